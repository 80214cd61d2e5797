"""How far to trust each score, and was n worth it: checked against independent computations.

The simulated judge rates the test study with several draws (some of them invalid); every
statistic geval-async writes is recomputed here from the ratings in the raw export
(``raw/<prefix>_<criterion>.json``) by a hand-written formula (standard error, Krippendorff's
alpha from its definition 1 - D_o / D_e, interval and ordinal) or by scipy (Spearman), and
must agree to 1e-9 (the CSVs, rounded to 6 significant digits, to that precision).
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import permutations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, StudyFiles, judge_study, run_cli, run_study, write_study
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from geval_async import load_results
from geval_async.scoring.reading.distributions import distribution_from_samples, standard_error
from geval_async.sim import SimServer

N = 5
CRITERIA = ("clar", "fit")


@dataclass
class TrustStudy:
    """A copy of the module's judged study (its own folder, outputs and all), and the judge
    that judged it, still answering (a test can see that it was asked nothing more)."""

    sim: SimServer
    study: StudyFiles


@pytest.fixture(scope="module")
def judged_once(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimServer, Path]]:
    """The test study judged with n = N draws, about 15 % of them invalid (records with fewer
    valid draws, some with none): once for the module, whose tests each read a copy."""
    with SimServer() as sim:
        study = write_study(tmp_path_factory.mktemp("trust"))
        sim.settings.invalid_answers = 0.15
        judge_study(study, sim.base_url, sampling={"n": N, "seed": 3})
        yield sim, study.root


@pytest.fixture
def trust(judged_once: tuple[SimServer, Path], tmp_path: Path) -> TrustStudy:
    sim, judged_root = judged_once
    root = Path(shutil.copytree(judged_root, tmp_path / "study"))
    records = root / "records.jsonl"
    count = len(records.read_text(encoding="utf-8").splitlines())
    study = StudyFiles(root, root / "config.toml", records, root / "cache", root / "out", count)
    study.judge_url = sim.base_url
    return TrustStudy(sim, study)


def _report(study: StudyFiles, *flags: str) -> None:
    result = run_cli("report", str(study.config), *flags)
    assert result.returncode == 0, result.stderr


def _ratings(study: StudyFiles, criterion: str, prefix: str = "t") -> dict[str, list[float]]:
    """Per record, its ratings in draw order (NaN for an invalid answer), from the raw export."""
    document = json.loads((study.output / "raw" / f"{prefix}_{criterion}.json").read_text())
    return {
        item["record_id"]: [math.nan if r is None else float(r) for r in item["ratings"]]
        for item in document["items"]
    }


def _long(study: StudyFiles, prefix: str = "t") -> pd.DataFrame:
    return pd.read_csv(study.output / "scores" / f"{prefix}_long.csv")


# --- independent computations ----------------------------------------------------------------


def _hand_se(ratings: list[float]) -> float:
    valid = [r for r in ratings if not math.isnan(r)]
    m = len(valid)
    if m < 2:
        return math.nan
    mean = sum(valid) / m
    return math.sqrt(sum((r - mean) ** 2 for r in valid) / (m - 1) / m)


def _pairable(units: list[list[float]]) -> list[list[float]]:
    valid = [[v for v in unit if not math.isnan(v)] for unit in units]
    return [unit for unit in valid if len(unit) >= 2]


def _interval_alpha(units: list[list[float]]) -> float:
    """1 - D_o / D_e with the squared difference (Krippendorff 2011, section E)."""
    units = _pairable(units)
    values = [v for unit in units for v in unit]
    n = len(values)
    observed = (
        sum(sum((a - b) ** 2 for a, b in permutations(unit, 2)) / (len(unit) - 1) for unit in units)
        / n
    )
    expected = sum((a - b) ** 2 for a, b in permutations(values, 2)) / (n * (n - 1))
    return 1 - observed / expected


def _ordinal_alpha(units: list[list[float]]) -> float:
    """1 - D_o / D_e from the coincidence matrix, with the ordinal metric
    delta(c, k) = (sum of n_g for g from c to k - (n_c + n_k) / 2)^2."""
    units = _pairable(units)
    domain = sorted({v for unit in units for v in unit})
    where = {v: i for i, v in enumerate(domain)}
    o = np.zeros((len(domain), len(domain)))
    for unit in units:
        for a, b in permutations(unit, 2):
            o[where[a], where[b]] += 1 / (len(unit) - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()

    def delta(c: int, k: int) -> float:
        lo, hi = min(c, k), max(c, k)
        return (n_c[lo : hi + 1].sum() - (n_c[c] + n_c[k]) / 2) ** 2

    pairs = [(c, k) for c in range(len(domain)) for k in range(len(domain))]
    observed = sum(o[c, k] * delta(c, k) for c, k in pairs)
    expected = sum(n_c[c] * n_c[k] * delta(c, k) for c, k in pairs) / (n - 1)
    return 1 - observed / expected


def _mean_of_first(ratings: list[float], k: int) -> float:
    valid = [r for r in ratings[:k] if not math.isnan(r)]
    return sum(valid) / len(valid) if valid else math.nan


# --- the tests -------------------------------------------------------------------------------


def test_each_record_s_standard_error_is_the_spread_of_its_valid_ratings(trust: TrustStudy) -> None:
    study = trust.study
    _report(study)
    long = _long(study).set_index(["record_id", "criterion"])
    checked = undefined = 0
    for criterion in CRITERIA:
        for record, ratings in _ratings(study, criterion).items():
            se, expected = long.loc[(record, criterion), "se"], _hand_se(ratings)
            if math.isnan(expected):
                assert math.isnan(se), f"{record} {criterion}: one valid rating has no SE"
                undefined += 1
            else:
                assert se == pytest.approx(expected, abs=1e-9, rel=0)
                checked += 1
    assert checked > 30
    # The Python API gives the same column.
    api = load_results(study.config).long.set_index(["record_id", "criterion"])["se"]
    assert np.allclose(api.to_numpy(), long["se"].to_numpy(), atol=1e-12, equal_nan=True)
    # One draw: the spread is unknown, never 0.
    result = run_cli("score", str(study.config), "--n", "1")
    assert result.returncode == 0, result.stderr
    one = _long(study, "t-n-1")
    assert one["se"].isna().all() and (one["score"].notna().sum() > 0)


def test_the_judge_s_self_consistency_is_krippendorff_s_alpha_over_its_draws(
    trust: TrustStudy,
) -> None:
    study = trust.study
    _report(study)
    written = pd.read_csv(study.output / "stats" / "t_consistency.csv").set_index("criterion")
    api = load_results(study.config).consistency.set_index("criterion")
    for criterion in CRITERIA:
        units = list(_ratings(study, criterion).values())
        interval, ordinal = _interval_alpha(units), _ordinal_alpha(units)
        assert api.loc[criterion, "alpha_interval"] == pytest.approx(interval, abs=1e-9, rel=0)
        assert api.loc[criterion, "alpha_ordinal"] == pytest.approx(ordinal, abs=1e-9, rel=0)
        assert written.loc[criterion, "alpha_interval"] == pytest.approx(interval, rel=1e-5)
        assert written.loc[criterion, "alpha_ordinal"] == pytest.approx(ordinal, rel=1e-5)
        assert written.loc[criterion, "units"] == len(_pairable(units))
        assert written.loc[criterion, "draws"] == N
        assert 0 < interval < 1, "the simulated judge is noisy, not random"
    report = (study.output / "t_report.md").read_text()
    assert "## How far to trust the scores" in report
    assert f"{api.loc['clar', 'alpha_interval']:.3f}" in report


def test_the_n_curve_rescores_the_cached_draws_without_asking_again(trust: TrustStudy) -> None:
    study = trust.study
    received = trust.sim.stats.received
    _report(study, "--plots")
    assert trust.sim.stats.received == received, "the n curve asks the judge nothing"
    written = pd.read_csv(study.output / "stats" / "t_n_curve.csv")
    api = load_results(study.config).n_curve
    assert list(api["criterion"]) == [c for c in CRITERIA for _ in range(N)]
    for criterion in CRITERIA:
        by_record = _ratings(study, criterion)
        full = [_mean_of_first(r, N) for r in by_record.values()]
        for k in range(1, N + 1):
            row = api[(api["criterion"] == criterion) & (api["k"] == k)].iloc[0]
            scores = [_mean_of_first(r, k) for r in by_record.values()]
            kept = [(a, b) for a, b in zip(scores, full, strict=True) if not math.isnan(a + b)]
            # Equal means are ties, whatever the last bit of their float says.
            expected = scipy_stats.spearmanr(
                [round(a, 9) for a, _ in kept], [round(b, 9) for _, b in kept]
            )
            assert row["records"] == len(kept)
            assert row["spearman"] == pytest.approx(expected.statistic, abs=1e-9, rel=0)
            errors = [_hand_se(r[:k]) for r in by_record.values()]
            defined = [e for e in errors if not math.isnan(e)]
            assert row["records_with_se"] == len(defined)
            if k == 1:
                assert not defined and math.isnan(row["mean_se"]), "one draw: no SE"
            else:
                assert row["mean_se"] == pytest.approx(np.mean(defined), abs=1e-9, rel=0)
            on_disk = written[(written["criterion"] == criterion) & (written["k"] == k)]
            assert on_disk["spearman"].iloc[0] == pytest.approx(row["spearman"], rel=1e-5)
        last = api[(api["criterion"] == criterion) & (api["k"] == N)]["spearman"].iloc[0]
        assert last == pytest.approx(1.0, abs=1e-12), "all n draws rank as all n draws"
    report = (study.output / "t_report.md").read_text()
    assert "### Was n worth it" in report
    assert f"with n = {N} on this study" in report
    assert "![n curve](plots/t_n_curve.png)" in report
    assert (study.output / "plots" / "t_n_curve.png").read_bytes().startswith(b"\x89PNG")


def test_in_logprobs_mode_the_se_is_the_distribution_s_spread_and_draws_are_not_compared(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url, sampling={"mode": "logprobs", "n": 1})
    assert run_study(study).returncode == 0
    _report(study)
    long = _long(study)
    scored = long[long["status"] == "scored"]
    assert len(scored) > 30
    for row in scored.itertuples():
        probs = {float(v): p for v, p in json.loads(row.distribution).items()}
        mean = sum(p * v for v, p in probs.items())
        sd = math.sqrt(sum(p * (v - mean) ** 2 for v, p in probs.items()))
        assert row.se == pytest.approx(sd, abs=1e-9, rel=0)
    consistency = pd.read_csv(study.output / "stats" / "t_consistency.csv")
    assert consistency["alpha_interval"].isna().all()
    assert consistency["note"].str.contains("logprobs mode has one draw").all()
    curve = pd.read_csv(study.output / "stats" / "t_n_curve.csv")
    assert curve.empty
    report = (study.output / "t_report.md").read_text()
    assert "spread of the judge's belief" in report
    assert "Not computed: logprobs mode has one draw per record" in report


def test_hand_written_alpha_agrees_with_krippendorff_s_worked_example() -> None:
    """The check itself is checked: Krippendorff's (2011) example of 4 coders and 12 units,
    whose interval alpha he gives as 0.849 and ordinal alpha as 0.815."""
    nan = math.nan
    coders = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
    units = [list(unit) for unit in zip(*coders, strict=True)]
    assert round(_interval_alpha(units), 3) == 0.849
    assert round(_ordinal_alpha(units), 3) == 0.815


def test_the_html_report_shows_the_trust_section_and_each_record_s_standard_error(
    trust: TrustStudy,
) -> None:
    from conftest import CHROMIUM, CHROMIUM_ARGS, open_report

    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).is_file():
        pytest.skip("needs Debian's chromium (.ci/run installs it: apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    study = trust.study
    _report(study, "--html")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        opened = open_report(browser, study.output / "t_report.html")
        page = opened.page
        assert opened.console == []
        rows = page.locator("#table-consistency tbody tr")
        assert rows.count() == len(CRITERIA)
        for index, criterion in enumerate(CRITERIA):
            units = list(_ratings(study, criterion).values())
            cells = rows.nth(index).locator("td").all_text_contents()
            assert cells[3] == f"{_interval_alpha(units):.3f}"
            assert cells[4] == f"{_ordinal_alpha(units):.3f}"
        assert page.locator("#figure-n-curve svg").is_visible()
        assert page.locator("#table-n-curve tbody tr").count() == len(CRITERIA) * N
        sentences = page.locator("ul.n-curve li").all_text_contents()
        assert len(sentences) == len(CRITERIA)
        assert all(f"with n = {N} on this study" in s or "no n below" in s for s in sentences)
        # The drill-down: a record's SE next to its weighted score.
        record, ratings = next(
            (r, v) for r, v in _ratings(study, "clar").items() if not math.isnan(_hand_se(v))
        )
        page.fill("#filter-text", record)
        page.click("#records tbody tr >> nth=0")
        shown = page.locator("#record-detail section[data-criterion='clar'] .weighted")
        assert f"standard error {_hand_se(ratings):.3f}" in shown.text_content()
        browser.close()


@given(st.lists(st.one_of(st.none(), st.sampled_from([1.0, 2.0, 3.0, 4.0, 4.5, 5.0])), max_size=30))
def test_the_standard_error_of_any_draws_is_the_textbook_one(ratings: list[float | None]) -> None:
    valid = [r for r in ratings if r is not None]
    se = standard_error(ratings)
    if len(valid) < 2:
        assert se is None
    else:
        assert se == pytest.approx(statistics.stdev(valid) / math.sqrt(len(valid)), abs=1e-12)
        sd = distribution_from_samples(ratings).sd
        assert sd == pytest.approx(float(np.std(valid)), abs=1e-12)  # ddof = 0: the spread


def test_rubric_criteria_are_consistent_per_rubric_and_have_no_standard_error(
    tmp_path: Path,
) -> None:
    """The chatbot example: a G-Eval criterion, a Likert one answered by option number (its
    ratings are the points, 0-1) and AND / OR rubric criteria, judged by the simulated judge."""
    example = ROOT / "examples" / "chatbot"
    (tmp_path / "replies.jsonl").write_text((example / "replies.jsonl").read_text())
    (tmp_path / "prompts").mkdir()
    for prompt in (ROOT / "prompts" / "chatbot").iterdir():
        (tmp_path / "prompts" / prompt.name).write_text(prompt.read_text())
    text = (example / "config.toml").read_text().replace("../../prompts/chatbot/", "prompts/")
    config = tmp_path / "config.toml"
    config.write_text(text.replace("../../cache/chatbot", "cache"))
    with SimServer() as server:
        run = run_cli("run", str(config), "--quiet", "--base-url", server.base_url)
        assert run.returncode == 0, run.stderr
    assert run_cli("report", str(config)).returncode == 0
    out = tmp_path / "out"
    long = pd.read_csv(out / "scores" / "chatbot_long.csv")
    consistency = load_results(config).consistency.set_index("criterion")
    curve = load_results(config).n_curve
    for criterion, kind in (("help", "likert"), ("empathy", "likert"), ("unbiased", "rubric")):
        items = json.loads((out / "raw" / f"chatbot_{criterion}.json").read_text())["items"]
        parts = [p for item in items for p in item.get("rubrics", [item])]
        units = [[math.nan if r is None else float(r) for r in p["ratings"]] for p in parts]
        values = {v for unit in _pairable(units) for v in unit}
        rows = long[long["criterion"] == criterion]
        if kind == "rubric":
            assert rows["se"].isna().all(), "a verdict has no standard error"
            assert criterion not in set(curve["criterion"])
            assert values <= {0.0, 1.0}
        else:
            by_record = {item["record_id"]: item["ratings"] for item in items}
            for row in rows.itertuples():
                ratings = [math.nan if r is None else float(r) for r in by_record[row.record_id]]
                expected = _hand_se(ratings)
                assert (
                    math.isnan(row.se)
                    if math.isnan(expected)
                    else (row.se == pytest.approx(expected, abs=1e-9, rel=0))
                )
            assert criterion in set(curve["criterion"])
        alpha = consistency.loc[criterion, "alpha_interval"]
        if len(values) < 2:
            assert math.isnan(alpha)
        else:
            assert alpha == pytest.approx(_interval_alpha(units), abs=1e-9, rel=0)
        assert consistency.loc[criterion, "units"] == len(_pairable(units))
