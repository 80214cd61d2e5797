"""A panel of judges scored: each judge's outputs, the panel's pooled
scores, flagged records and the agreement CSV, on simulated judges over real HTTP.

Each judge of a panel has its own simulated server (its own port and seed, so the judges
disagree) and its own model; every judge is judged with the one-judge path into one shared
cache, then scored as a panel. The expected numbers are computed here from each judge's own
long table, independently of the pooling code.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import StudyFiles, run_cli, sim_judges
from hypothesis import given
from hypothesis import strategies as st

import geval_async as ga
from geval_async.options import PanelPool
from geval_async.scoring.panel.pooled import pooled_score
from geval_async.scoring.panel.results import PanelResults, load_panel
from geval_async.sim import SimServer, SimSettings
from geval_async.study.config import load_config

NAMES = ("alpha", "beta", "gamma")


@pytest.fixture
def sims() -> Iterator[list[SimServer]]:
    """Three simulated judges on their own ports; their seeds differ, so their ratings do.
    The third writes no rating in about half of its answers (all three of an item's
    draws invalid for about one item in eight)."""
    settings = [SimSettings(seed=0), SimSettings(seed=1), SimSettings(seed=2, invalid_answers=0.5)]
    with ExitStack() as stack:
        yield [stack.enter_context(SimServer(s)) for s in settings]


def write_panel(
    study: StudyFiles,
    sims: list[SimServer],
    count: int,
    panel: dict[str, object] | None = None,
    name: str = "panel.toml",
) -> Path:
    """A panel config of the first ``count`` judges, each on its own server and model."""
    judges = sim_judges(dict(zip(NAMES[:count], sims, strict=False)))
    return study.write_panel(judges, panel=panel, path=study.root / name)


def write_alone(study: StudyFiles, sims: list[SimServer], judge: str) -> Path:
    """The one-judge study of ``judge`` (same records, criteria, sampling and cache), writing
    to its own folder."""
    sim = sims[NAMES.index(judge)]
    return study.write_config(
        sim.base_url,
        judge={"model": f"sim-{judge}"},
        output={"path": f"alone-{judge}"},
        path=study.root / f"alone-{judge}.toml",
    )


async def judge_all(config: Path) -> None:
    """Judge every member with the one-judge path, into the study's one cache."""
    panel = load_config(config)
    for name in panel.judge_names:
        await ga.judge(panel.for_judge(name))


def add_filtered_record(study: StudyFiles) -> None:
    """A record every judge refuses (its text trips the simulated content filter)."""
    row = {"id": "u099-A", "user": "u099", "condition": "A", "reader": "r", "text": "[[FILTER]]"}
    with study.records.open("a", encoding="utf-8") as file:
        file.write(json.dumps(row) + "\n")


def read_long(study: StudyFiles, prefix: str) -> pd.DataFrame:
    return pd.read_csv(study.output / "scores" / f"{prefix}_long.csv", keep_default_na=False,
                       na_values=[""])  # fmt: skip


def judges_frame(study: StudyFiles, judges: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            judge: read_long(study, f"t-judge-{judge}").set_index(["record_id", "criterion"])[
                "score"
            ]
            for judge in judges
        }
    )


async def test_every_judges_outputs_equal_its_one_judge_run(
    sims: list[SimServer], study: StudyFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # the HTML's generation time
    config = write_panel(study, sims, 2)
    await judge_all(config)
    panel = load_panel(config)
    ga.write_outputs(panel, plots=True, html=True)
    for judge in NAMES[:2]:
        alone = write_alone(study, sims, judge)
        ga.write_outputs(ga.load_results(alone), plots=True, html=True)
        theirs = study.root / f"alone-{judge}"
        files = sorted(p for p in theirs.rglob("*") if p.is_file())
        # tables, long, composite, tests, trust, raw, box plots and the n curve, both reports
        assert len(files) >= 15, files
        for file in files:
            relative = file.relative_to(theirs)
            ours = study.output / relative.parent / file.name.replace("t_", f"t-judge-{judge}_", 1)
            assert ours.is_file(), f"the panel wrote no {ours.name}"
            expected = file.read_bytes().replace(str(alone).encode(), str(config).encode())
            got = ours.read_bytes().replace(f"t-judge-{judge}".encode(), b"t")
            assert got == expected, f"{ours.name} differs from the one-judge run's {file.name}"
    # The panel's own outputs, under the study's prefix.
    for name in ("scores/t_clar.csv", "scores/t_fit.csv", "scores/t_long.csv",
                 "scores/t_average.csv", "stats/t_ttest.csv", "stats/t_agreement.csv",
                 "plots/t_clar.png", "plots/t_composite.png", "t_report.md",
                 "t_report.html"):  # fmt: skip
        assert (study.output / name).is_file(), name
    # Raw answers, self-consistency and the n curve are a judge's, not a pool's.
    for name in ("raw/t_clar.json", "stats/t_consistency.csv", "stats/t_n_curve.csv"):
        assert not (study.output / name).exists(), name


POOLS = [
    ({}, "mean"),
    ({"weights": {"alpha": 2.0, "beta": 0.5}}, "mean"),
    ({"pool": "median"}, "median"),
    ({"pool": "median", "weights": {"alpha": 3.0}}, "median"),
    ({"weights": {"gamma": 0}}, "mean"),  # gamma in no pool, and never flagged missing
]


async def test_the_panels_record_scores_pool_the_judges(
    sims: list[SimServer], study: StudyFiles
) -> None:
    await judge_all(write_panel(study, sims, 3))  # one cache: each pooling re-scores it
    scores = judges_frame_of(load_panel(study.root / "panel.toml"))
    for panel, pool in POOLS:
        config = write_panel(study, sims, 3, panel)
        ga.write_outputs(load_panel(config), ["scores"])
        stated: dict[str, float] = panel.get("weights", {})  # type: ignore[assignment]
        weights = {n: float(stated.get(n, 1.0)) for n in NAMES}
        long = read_long(study, "t").set_index(["record_id", "criterion"])
        assert long["score"].notna().sum() > 0
        for key, row in scores.iterrows():
            present = row.dropna()
            got = long.loc[key, "score"]
            if present.empty:
                assert math.isnan(got)
                continue
            w = np.array([weights[n] for n in present.index])
            v = present.to_numpy()
            expected = float((w * v).sum() / w.sum()) if pool == "mean" else weighted_median(v, w)
            assert got == pytest.approx(expected, abs=1e-9), (panel, key)
            assert long.loc[key, "judges_scored"] == int((w > 0).sum())
        missing = long["judges_missing"].dropna().astype(str)
        assert weights["gamma"] > 0 or not missing.str.contains("gamma").any()


def judges_frame_of(panel: PanelResults) -> pd.DataFrame:
    """Each judge's record scores from its own one-judge results (not the pooling code)."""
    return pd.DataFrame(
        {
            name: results.long.set_index(["record_id", "criterion"])["score"]
            for name, results in panel.judges.items()
        }
    )


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The test's own weighted median: expand integer-scaled weights into repeated values and
    take numpy's median (weights here are multiples of 0.5)."""
    repeats = np.rint(weights * 2).astype(int)
    return float(np.median(np.repeat(values, repeats)))


async def test_a_judge_that_fails_on_some_records_leaves_them_to_the_others_flagged(
    sims: list[SimServer], study: StudyFiles
) -> None:
    add_filtered_record(study)
    config = write_panel(study, sims, 3)
    await judge_all(config)
    result = run_cli("report", str(config))
    assert result.returncode == 0, result.stderr
    scores = judges_frame(study, NAMES)
    long = read_long(study, "t").set_index(["record_id", "criterion"])
    # gamma wrote no rating at all for some items: those are scored by alpha and beta alone.
    failed = scores["gamma"].isna() & scores["alpha"].notna() & scores["beta"].notna()
    assert failed.sum() > 0
    for key in scores.index[failed]:
        assert long.loc[key, "judges_missing"] == "gamma"
        assert long.loc[key, "judges_scored"] == 2
        expected = (scores.loc[key, "alpha"] + scores.loc[key, "beta"]) / 2
        assert long.loc[key, "score"] == pytest.approx(expected, abs=1e-9)
        assert long.loc[key, "score"] > 0
    # The record every judge refused stays unscored: no 0, and the refusal said.
    for criterion in ("clar", "fit"):
        row = long.loc[("u099-A", criterion)]
        assert math.isnan(row["score"]) and row["status"] == "refused"
        assert row["judges_scored"] == 0 and row["judges_missing"] == "alpha,beta,gamma"
    flagged = int((long["score"].notna() & long["judges_missing"].notna()).sum())
    report = (study.output / "t_report.md").read_text(encoding="utf-8")
    assert f"Records scored by only some judges: {flagged}" in report
    # The terminal lists each judge and the panel.
    for judge in NAMES:
        assert re.search(rf"^{judge}\s+sim-{judge}\s", result.stdout, re.M), result.stdout
    assert re.search(rf"^panel\s+mean\s+\d+/\d+\s+{flagged}\s*$", result.stdout, re.M)
    # The agreement CSV: a row (or more) per criterion, every pair of judges.
    agreement = pd.read_csv(study.output / "stats" / "t_agreement.csv")
    assert set(agreement["criterion"]) == {"clar", "fit"}
    pairs = agreement[agreement["statistic"] == "spearman"]
    assert len(pairs) == 2 * 3


async def test_the_python_api_gives_every_judge_and_the_panel(
    sims: list[SimServer], study: StudyFiles
) -> None:
    config = write_panel(study, sims, 2)
    await judge_all(config)
    panel = load_panel(config)
    assert list(panel.judges) == ["alpha", "beta"]
    assert set(panel.long["judge"]) == {"alpha", "beta", "panel"}
    assert len(panel.long) == 3 * len(panel.panel.long)
    # load_results of a panel config is the panel's results, not its first judge's.
    pooled = ga.load_results(config)
    assert isinstance(pooled, ga.StudyResults)
    pd.testing.assert_frame_equal(pooled.long, panel.panel.long)
    first = panel.judges["alpha"].long["score"].to_numpy()
    assert not np.allclose(pooled.long["score"].to_numpy(), first, equal_nan=True)
    assert set(panel.agreement["criterion"]) == {"clar", "fit"}


async def test_a_panel_with_a_judge_not_run_yet_writes_nothing_and_names_it(
    sims: list[SimServer], study: StudyFiles
) -> None:
    config = write_panel(study, sims, 2)
    await ga.judge(load_config(config).for_judge("alpha"))  # beta never judged
    result = run_cli("score", str(config))
    assert result.returncode == 2
    assert "judge 'beta' of the panel" in result.stderr and len(result.stderr.splitlines()) == 1
    assert not study.output.exists() or not any(study.output.rglob("*.csv"))


scores_st = st.lists(st.floats(1, 5), min_size=1, max_size=6)


@given(scores_st)
def test_equal_weights_pool_to_numpys_mean_and_median(values: list[float]) -> None:
    ones = [1.0] * len(values)
    assert pooled_score(values, ones, PanelPool.MEAN) == pytest.approx(np.mean(values), abs=1e-9)
    assert pooled_score(values, ones, PanelPool.MEDIAN) == pytest.approx(
        np.median(values), abs=1e-9
    )


@given(scores_st, st.data())
def test_whole_weights_pool_as_repeated_scores(values: list[float], data: st.DataObject) -> None:
    weights = data.draw(st.lists(st.integers(1, 4), min_size=len(values), max_size=len(values)))
    repeated = np.repeat(values, weights)
    w = [float(x) for x in weights]
    assert pooled_score(values, w, PanelPool.MEAN) == pytest.approx(np.mean(repeated), abs=1e-9)
    assert pooled_score(values, w, PanelPool.MEDIAN) == pytest.approx(np.median(repeated), abs=1e-9)
