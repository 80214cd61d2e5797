"""Benchmark: findings on the human scale from a few labels (calibration, human_scale).

SummEval's 1,600 summaries (100 articles x 16 systems, read from ../shared/data/summeval, never
copied) with the mean of the three experts' ratings as the human score, judged by the simulated
judge made to rate each summary from that mean plus a known bias and noise (clipped to the 1-5
scale; drawn once, with a fixed seed, and handed to the judge as its ``rated_scores``): a judge
biased and noisy against the experts, as real ones are. The study is examples/summeval's, run
on its coherence criterion in logprobs mode into a fresh cache, and its weighted scores are read
from that cache as ``calibrate`` reads them (``ga.load_results``). Then the labelled share
(``[meta] labelled``, whole articles at a time) is drawn ``--draws`` times, each with its own
seed, and the study's human-scale outputs are computed through the same functions
``geval-async calibrate`` runs (``calibrated_items``, ``human_scale_frame``):

- per system, whether each interval for the system's mean covers the mean of all 100 experts'
  ratings (prediction-powered, labels only, judge only), and the intervals' mean width; the
  same for the paired difference between two systems; beside them, ppi-python's own normal
  interval for the same estimates, which the t-interval the study reports corrects;
- the conformal intervals' coverage on the records whose labels were not used, and their width;
- Spearman with the experts and mean absolute error on those records, judge against calibrated.

    .venv/bin/python bench/human_scale.py [--quick] [--draws 200] [--labelled 0.1]

With ``--config`` the judge is a real one: its weighted scores are read from the study's cache
(``ga.load_results`` with ``--model``, ``--mode``, ``--limit``, ``--cache`` as overrides), and the
human scores from the records, as ``calibrate`` reads them::

    .venv/bin/python bench/human_scale.py --config examples/summeval/config.toml --limit 160 \
        --mode logprobs --model smollm2 --cache /tmp/llama-cache --labelled 0.3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import ROOT, save, table, workdir

from geval_async.scoring.scores.labelled import calibrated_items
from geval_async.scoring.stats.human_scale import METHODS, human_scale_frame, load_ppi
from geval_async.study.settings import MetaConfig

DATA = ROOT.parent / "shared" / "data" / "summeval" / "summeval.jsonl"
EXAMPLE = ROOT / "examples" / "summeval" / "config.toml"  # reads DATA
FIELD = {"coh": "coherence", "con": "consistency", "flu": "fluency", "rel": "relevance"}
NORMAL = "ppi-python's normal interval"  # reported beside the three, not an output
COMPARED = ("M23", "M0")  # the example's two systems (examples/summeval/compare.toml)


def simulated_items(args: argparse.Namespace, folder: Path, seed: int) -> pd.DataFrame:
    """The example study judged by the simulated judge, each summary rated from the experts'
    mean plus ``--bias`` and noise of sd ``--noise``; its records as ``calibrate`` reads them."""
    import geval_async as ga
    from geval_async.sim import SimServer, SimSettings

    with DATA.open(encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    human = np.array([r["scores"][FIELD[args.criterion]] for r in records], dtype=float)
    rng = np.random.default_rng(seed)
    intended = np.clip(human + args.bias + rng.normal(0, args.noise, len(human)), 1, 5)
    # Two systems that wrote the same summary of an article are one prompt, rated once.
    rated = {r["system_output"]: float(value) for r, value in zip(records, intended, strict=True)}
    table = folder / "rated_scores.json"
    table.write_text(json.dumps(rated), encoding="utf-8")
    study = argparse.Namespace(**vars(args))
    study.config, study.mode, study.cache = str(EXAMPLE), "logprobs", str(folder / "cache")
    os.environ.setdefault("OPENAI_API_KEY", "sim-key")  # the simulated judge takes any key
    with SimServer(SimSettings(rated_scores=str(table))) as server:
        run = asyncio.run(
            ga.judge(
                EXAMPLE,
                criteria=study.criterion,
                mode=study.mode,
                cache=study.cache,
                base_url=server.base_url,
                rpm=1e8,
                tpm=1e10,
            )
        )
        if not run.complete:
            raise SystemExit(f"{EXAMPLE}: the simulated judge's run did not complete")
    return cached_items(study)


def cached_items(args: argparse.Namespace) -> pd.DataFrame:
    """The records of a judged study, as ``calibrate`` reads them (scores from the cache)."""
    import geval_async as ga

    overrides = {k: getattr(args, k) for k in ("model", "mode", "limit", "cache")}
    results = ga.load_results(args.config, criteria=args.criterion, **overrides)
    items = results.labelled
    if items is None:
        raise SystemExit(f"{args.config}: no [meta] human for {args.criterion}")
    items = items[items["score"].notna() & items["human"].notna()]
    return items[["record_id", "group", "condition", "criterion", "score", "human"]]


def truths(items: pd.DataFrame) -> dict[str, float]:
    """Each system's mean of the experts' ratings over all its records, and the compared
    systems' mean paired difference."""
    found = items.groupby("condition")["human"].mean().to_dict()
    a, b = (items[items["condition"] == c].set_index("group")["human"] for c in COMPARED)
    found[f"{COMPARED[0]} - {COMPARED[1]}"] = float((a - b.loc[a.index]).mean())
    return found


def one_draw(items: pd.DataFrame, seed: int, labelled: float, coverage: float) -> dict:
    """One labelled share drawn: what covered, how wide, what calibration did."""
    meta = MetaConfig(labelled=labelled, seed=seed, coverage=coverage)
    calibrated = calibrated_items(items, meta)
    conditions = list(dict.fromkeys(calibrated["condition"]))
    frame = human_scale_frame(calibrated, conditions, COMPARED, True, coverage)
    truth = truths(items)
    frame["truth"] = frame["condition"].map(truth)
    frame["covers"] = (frame["ci_low"] <= frame["truth"]) & (frame["truth"] <= frame["ci_high"])
    frame["width"] = frame["ci_high"] - frame["ci_low"]
    frame = pd.concat([frame, ppi_normal(calibrated, conditions, coverage, truth)])
    out: dict = {"labels": int(calibrated["used"].sum())}
    for estimand in ("mean", "difference"):
        rows = frame[frame["estimand"] == estimand]
        for method in (*METHODS, NORMAL):
            part = rows[rows["method"] == method]
            out[(estimand, method, "coverage")] = float(part["covers"].mean())
            out[(estimand, method, "width")] = float(part["width"].mean())
    rest = calibrated[~calibrated["used"]]
    inside = (rest["lo"] <= rest["human"]) & (rest["human"] <= rest["hi"])
    out["conformal_coverage"] = float(inside.mean())
    out["conformal_width"] = float((rest["hi"] - rest["lo"]).mean())
    out["spearman_judge"] = _spearman(rest["score"], rest["human"])
    # A judge that barely ranks the records is calibrated to a flat map: no order left to rank.
    out["spearman_calibrated"] = _spearman(rest["calibrated"], rest["human"])
    out["mae_judge"] = float((rest["score"] - rest["human"]).abs().mean())
    out["mae_calibrated"] = float((rest["calibrated"] - rest["human"]).abs().mean())
    return out


def ppi_normal(
    calibrated: pd.DataFrame, conditions: list[str], coverage: float, truth: dict[str, float]
) -> pd.DataFrame:
    """ppi-python's own normal interval (``ppi_mean_ci``: the spread with ddof 0 and z) for the
    same means and paired difference: what ``human_scale_frame``'s t-interval is held against,
    since with ten labels a system the normal one covers less than it says."""
    ppi = load_ppi()
    alpha = 1 - coverage

    def interval(score: np.ndarray, human: np.ndarray, used: np.ndarray) -> tuple[float, float]:
        lam = 0.0 if np.ptp(score) == 0 else None  # as human_scale_frame: nothing to tune
        low, high = ppi.ppi_mean_ci(human[used], score[used], score[~used], alpha=alpha, lam=lam)
        return float(np.squeeze(low)), float(np.squeeze(high))

    rows = []
    for condition in conditions:
        part = calibrated[calibrated["condition"] == condition]
        found = interval(*_columns(part))
        rows.append(("mean", condition, *found))
    a, b = (calibrated[calibrated["condition"] == c].set_index("group") for c in COMPARED)
    b = b.loc[a.index]
    (score_a, human_a, used_a), (score_b, human_b, used_b) = _columns(a), _columns(b)
    found = interval(score_a - score_b, human_a - human_b, used_a & used_b)
    rows.append(("difference", f"{COMPARED[0]} - {COMPARED[1]}", *found))
    frame = pd.DataFrame(rows, columns=["estimand", "condition", "ci_low", "ci_high"])
    frame["method"] = NORMAL
    frame["truth"] = frame["condition"].map(truth)
    frame["covers"] = (frame["ci_low"] <= frame["truth"]) & (frame["truth"] <= frame["ci_high"])
    frame["width"] = frame["ci_high"] - frame["ci_low"]
    return frame


def _columns(part: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        part["score"].to_numpy(float),
        part["human"].to_numpy(float),
        part["used"].to_numpy(bool),
    )


def _spearman(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rho, NaN where one side is constant (a flat calibration)."""
    if x.nunique() < 2 or y.nunique() < 2:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 draws: a smoke run")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--labelled", type=float, default=0.1)
    parser.add_argument("--coverage", type=float, default=0.9)
    parser.add_argument("--criterion", default="coh", choices=sorted(FIELD))
    parser.add_argument("--bias", type=float, default=-0.6, help="the judge's bias")
    parser.add_argument("--noise", type=float, default=1.2, help="the judge's noise (sd)")
    parser.add_argument("--config", help="read a real judge's scores from this study's cache")
    parser.add_argument("--model")
    parser.add_argument("--mode")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--cache")
    args = parser.parse_args()
    draws = 20 if args.quick else args.draws
    if args.config:
        items = cached_items(args)
        judge = f"the cache's judge ({args.model or 'the config model'}), {len(items)} records"
    else:
        with workdir("human-scale") as folder:
            items = simulated_items(args, folder, seed=2023)
        judge = (
            f"the simulated judge rating the experts' mean {args.bias:+g} + N(0, {args.noise:g}), "
            f"clipped to 1-5, in logprobs mode; {len(items)} records"
        )
    bias = float((items["score"] - items["human"]).mean())
    agreement = float(spearmanr(items["score"], items["human"]).statistic)
    print(f"the judge's bias on all records {bias:+.3f}, Spearman {agreement:.3f} with the experts")
    runs = [one_draw(items, seed, args.labelled, args.coverage) for seed in range(draws)]

    def average(key: object) -> float:
        values = [run[key] for run in runs]
        return float(np.nanmean(values)) if not np.isnan(values).all() else float("nan")

    rows = [
        {
            "estimand": estimand,
            "method": method,
            "coverage": average((estimand, method, "coverage")),
            "mean width": average((estimand, method, "width")),
        }
        for estimand in ("mean", "difference")
        for method in (*METHODS, NORMAL)
    ]
    record = {
        "judge bias (all records)": round(bias, 4),
        "judge Spearman (all records)": round(agreement, 4),
        "labels per draw": average("labels"),
        "conformal coverage (unlabelled records)": average("conformal_coverage"),
        "conformal mean width": average("conformal_width"),
        "Spearman judge": average("spearman_judge"),
        "Spearman calibrated": average("spearman_calibrated"),
        "flat calibrations": int(sum(np.isnan(run["spearman_calibrated"]) for run in runs)),
        "MAE judge": average("mae_judge"),
        "MAE calibrated": average("mae_calibrated"),
    }
    print(
        f"SummEval {args.criterion}: {judge}; labelled = {args.labelled:g} (whole articles), "
        f"{draws} draws, intervals at {args.coverage:.0%}"
    )
    print(table(rows, ["estimand", "method", "coverage", "mean width"]))
    print(table([record], list(record)[2:5]))
    print(table([record], list(record)[5:]))
    settings = {k: v for k, v in vars(args).items() if k != "quick"} | {"draws": draws}
    name = "human_scale" if not args.config else "human_scale_cached"
    path = save(name, {"settings": settings, "intervals": rows, "records": record})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
