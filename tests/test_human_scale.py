"""Findings on the human scale: calibrated scores, conformal intervals and prediction-powered
means from the records' human scores, judged by the simulated judge and read from the cache.

The expected figures are computed here from the paper's formula (PPI++, arXiv 2311.01453: the
power-tuned mean and its standard error) and from ``ppi-python`` called directly, with the
records file read by json and the judge's scores taken from the long table.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import StudyFiles, run_cli, write_records
from scipy import stats as sps

import geval_async as ga
from geval_async.errors import ConfigError
from geval_async.scoring.scores.tables import LONG_COLUMNS
from geval_async.scoring.stats.human_scale import load_ppi
from geval_async.sim import SimServer

USERS = 40  # 80 records: 40 users under conditions A and B
HUMAN = {"clar": "human.clar"}


def _label(index: int) -> float | None:
    """A record's human clarity: whole ratings 1-5, none for every seventh record."""
    return None if index % 7 == 3 else float(1 + (index * 5 + index // 3) % 5)


def _label_records(path: Path, changed: dict[str, float] | None = None) -> dict[str, float]:
    """Give the records their human scores (``changed``: some ids' instead); id -> score."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    labels = {}
    for index, row in enumerate(rows):
        value = (changed or {}).get(row["id"], _label(index))
        if value is not None:
            row["human"] = {"clar": value}
            labels[row["id"]] = value
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return labels


@pytest.fixture
def labelled(study: StudyFiles) -> StudyFiles:
    """The test study with 40 users, human clarity scores, judged by the simulated judge."""
    write_records(study.records, USERS)
    _label_records(study.records)
    with SimServer() as server:
        study.write_config(server.base_url, meta={"human": HUMAN, "labelled": 0.5, "seed": 3})
        result = run_cli("run", str(study.config), "--quiet")
        assert result.returncode == 0, result.stderr
    return study


def _hand_ppi(y: np.ndarray, yhat: np.ndarray, rest: np.ndarray, coverage: float) -> tuple:
    """PPI++'s mean by the formula: the tuned lambda, the estimate, its standard error (ddof 1)
    and the t interval on n - 1 degrees of freedom."""
    n, big_n = len(y), len(rest)
    both = np.concatenate([yhat, rest])
    covariance = np.mean((y - y.mean()) * (yhat - yhat.mean()))
    lam = float(np.clip(covariance / ((1 + n / big_n) * both.var(ddof=1)), 0, 1))
    estimate = lam * rest.mean() + np.mean(y - lam * yhat)
    variance = (lam * rest).var() / big_n + (y - lam * yhat).var() / n
    se = math.sqrt(variance * n / (n - 1))
    q = sps.t.ppf(1 - (1 - coverage) / 2, n - 1)
    return estimate, se, estimate - q * se, estimate + q * se


def test_means_and_the_paired_difference_follow_the_papers_formula(labelled: StudyFiles) -> None:
    result = run_cli("calibrate", str(labelled.config))
    assert result.returncode == 0, result.stderr
    results = ga.load_results(labelled.config)
    items = results.labelled
    assert items is not None
    clar = items[items["criterion"] == "clar"].set_index("record_id")
    # Half the users drawn, both of each user's records with them.
    used = clar[clar["used"]]
    users = set(used["group"])
    assert len(users) == USERS // 2  # every user has a human score on one record or both
    for user in users:
        rows = clar[clar["group"] == user]
        assert rows["used"].sum() == rows["human"].notna().sum()
    frame = results.human_scale
    row = frame.set_index(["criterion", "estimand", "condition", "method"])
    ppi = load_ppi()
    for condition in ("A", "B"):
        part = clar[clar["condition"] == condition]
        y = part.loc[part["used"], "human"].to_numpy()
        yhat = part.loc[part["used"], "score"].to_numpy()
        rest = part.loc[~part["used"], "score"].to_numpy()
        estimate, se, low, high = _hand_ppi(y, yhat, rest, 0.9)
        found = row.loc[("clar", "mean", condition, "prediction-powered")]
        assert found["estimate"] == pytest.approx(estimate, abs=1e-9)
        assert found["se"] == pytest.approx(se, abs=1e-9)
        assert (found["ci_low"], found["ci_high"]) == pytest.approx((low, high), abs=1e-9)
        assert found["estimate"] == pytest.approx(
            float(np.squeeze(ppi.ppi_mean_pointestimate(y, yhat, rest))), abs=1e-9
        )
        alone = row.loc[("clar", "mean", condition, "labels only")]
        assert alone["estimate"] == pytest.approx(y.mean(), abs=1e-12)
        assert alone["se"] == pytest.approx(sps.sem(y), abs=1e-12)
        judge = row.loc[("clar", "mean", condition, "judge only")]
        assert judge["estimate"] == pytest.approx(part["score"].mean(), abs=1e-12)
    # The design is paired (each user under A and B): the difference over the users' pairs.
    a, b = (clar[clar["condition"] == c].set_index("group") for c in ("A", "B"))
    b = b.loc[a.index]
    pair_used = a["used"].to_numpy() & b["used"].to_numpy()
    d_human = (a["human"] - b["human"]).to_numpy()
    d_score = (a["score"] - b["score"]).to_numpy()
    estimate, se, low, high = _hand_ppi(
        d_human[pair_used], d_score[pair_used], d_score[~pair_used], 0.9
    )
    found = row.loc[("clar", "difference", "A - B", "prediction-powered")]
    assert found["design"] == "paired"
    assert found["estimate"] == pytest.approx(estimate, abs=1e-9)
    assert (found["ci_low"], found["ci_high"]) == pytest.approx((low, high), abs=1e-9)
    p = 2 * sps.t.sf(abs(estimate / se), pair_used.sum() - 1)
    assert found["p"] == pytest.approx(p, abs=1e-9)
    # The file holds the same rows, to six significant digits.
    written = labelled.output / "stats" / "t_human_scale.csv"
    with written.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(frame)
    first = frame.iloc[0]
    assert float(rows[0]["estimate"]) == pytest.approx(first["estimate"], rel=1e-5)
    assert "prediction-powered" in result.stdout and "A - B (paired)" in result.stdout


def test_a_records_own_label_never_moves_its_calibrated_score(labelled: StudyFiles) -> None:
    before = ga.load_results(labelled.config).labelled
    assert before is not None
    clar = before[before["criterion"] == "clar"].set_index("record_id")
    target = clar[clar["used"]].index[0]
    old = clar.loc[target, "human"]
    _label_records(labelled.records, {target: 1.0 if old >= 3 else 5.0})
    after = ga.load_results(labelled.config).labelled
    assert after is not None
    moved = after[after["criterion"] == "clar"].set_index("record_id")
    assert moved.loc[target, "human"] != old  # the label did change
    assert moved.loc[target, "calibrated"] == clar.loc[target, "calibrated"]
    others = moved.index != target
    assert (moved.loc[others, "calibrated"] != clar.loc[others, "calibrated"]).any()


def test_intervals_hold_possible_human_scores_and_say_their_coverage(labelled: StudyFiles) -> None:
    results = ga.load_results(labelled.config, coverage=0.8)
    long = results.long
    at = list(long.columns).index("se")
    assert list(long.columns[at + 1 : at + 4]) == ["calibrated", "lo", "hi"]
    clar = long[(long["criterion"] == "clar") & long["calibrated"].notna()]
    assert len(clar) == 2 * USERS
    # Whole ratings: each end is one of them, about the calibrated score.
    assert set(clar["lo"]) | set(clar["hi"]) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    assert (clar["lo"] <= clar["calibrated"] + 0.5).all()
    assert (clar["calibrated"] - 0.5 <= clar["hi"]).all()
    assert long.loc[long["criterion"] == "fit", "calibrated"].isna().all()  # no human field
    items = results.labelled
    assert items is not None
    used = items[items["used"] & (items["criterion"] == "clar")]
    inside = ((used["lo"] <= used["human"]) & (used["human"] <= used["hi"])).mean()
    summary = results.calibration_summary.set_index("criterion").loc["clar"]
    assert summary["coverage_cv"] == pytest.approx(inside)
    assert summary["labels"] == len(used)
    assert summary["bias"] == pytest.approx((used["score"] - used["human"]).mean())
    # --coverage is in the names: it does not overwrite the configured level's outputs.
    result = run_cli("calibrate", str(labelled.config), "--coverage", "0.8")
    assert result.returncode == 0, result.stderr
    with (labelled.output / "scores" / "t-coverage-0.8_long.csv").open() as handle:
        rows = [r for r in csv.DictReader(handle) if r["criterion"] == "clar"]
    assert [float(r["hi"]) for r in rows] == list(clar["hi"])


def test_report_has_the_section_and_the_file(labelled: StudyFiles) -> None:
    result = run_cli("report", str(labelled.config))
    assert result.returncode == 0, result.stderr
    report = (labelled.output / "t_report.md").read_text(encoding="utf-8")
    section = report.split("## On the human scale", 1)[1]
    assert "a share of 0.5 of the labelled records" in section
    assert "| clar |" in section and "| A - B (paired) |" in section
    # How many labels were used, the judge's bias on them and the intervals' cross-validated
    # coverage, as the labelled records give them.
    items = ga.load_results(labelled.config).labelled
    assert items is not None
    used = items[items["used"] & (items["criterion"] == "clar")]
    labelled_count = int(items.loc[items["criterion"] == "clar", "human"].notna().sum())
    bias = (used["score"] - used["human"]).mean()
    inside = ((used["lo"] <= used["human"]) & (used["human"] <= used["hi"])).mean()
    row = next(line for line in section.splitlines() if line.startswith("| clar |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == f"{len(used)} of {labelled_count}" and len(used) < labelled_count
    assert cells[2] == f"{bias:+.3f}"
    assert cells[7] == f"{inside:.3f}"
    assert (labelled.output / "stats" / "t_human_scale.csv").is_file()


def test_the_html_report_has_the_section(labelled: StudyFiles) -> None:
    pytest.importorskip("matplotlib")
    result = run_cli("report", str(labelled.config), "--html")
    assert result.returncode == 0, result.stderr
    page = (labelled.output / "t_report.html").read_text(encoding="utf-8")
    assert '<a href="#human-scale">On the human scale</a>' in page
    section = page.split('<section id="human-scale"', 1)[1].split("</section>", 1)[0]
    assert 'id="table-human-summary"' in section and '<th scope="row">clar</th>' in section
    assert "A - B (paired)" in section and "`" not in section


def test_a_study_without_human_scores_is_as_before(study: StudyFiles) -> None:
    with SimServer() as server:
        study.write_config(server.base_url)
        assert run_cli("run", str(study.config), "--quiet").returncode == 0
    results = ga.load_results(study.config)
    assert list(results.long.columns) == LONG_COLUMNS
    assert results.human_scale.empty
    assert run_cli("report", str(study.config)).returncode == 0
    assert not (study.output / "stats" / "t_human_scale.csv").exists()
    assert "On the human scale" not in (study.output / "t_report.md").read_text()
    result = run_cli("calibrate", str(study.config))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "[meta] human" in result.stderr


def test_settings_have_one_way_in(labelled: StudyFiles) -> None:
    config = str(labelled.config)
    flag = run_cli("calibrate", config, "--coverage", "1.5")
    assert flag.returncode == 2
    assert flag.stderr.startswith("error: --coverage 1.5: [meta] 'coverage' must be between 0")
    with pytest.raises(ConfigError, match=r"^labelled=0: \[meta\] 'labelled' must be a share"):
        ga.load_results(config, labelled=0)
    text = labelled.config.read_text(encoding="utf-8").replace("labelled = 0.5", "labelled = 2")
    labelled.config.write_text(text, encoding="utf-8")
    found = run_cli("score", config)
    assert found.returncode == 2
    assert "[meta] 'labelled' must be a share" in found.stderr and str(config) in found.stderr


def test_a_human_score_that_is_not_a_number_is_named(labelled: StudyFiles) -> None:
    rows = labelled.records.read_text(encoding="utf-8").splitlines()
    first = json.loads(rows[0])
    first["human"] = {"clar": "good"}
    rows[0] = json.dumps(first)
    labelled.records.write_text("\n".join(rows) + "\n", encoding="utf-8")
    result = run_cli("calibrate", str(labelled.config))
    assert result.returncode == 2
    assert f"record '{first['id']}'" in result.stderr and "'human.clar'" in result.stderr
    assert "'good' is not a number" in result.stderr
    assert not (labelled.output / "stats").exists()


def test_a_field_no_record_has_is_a_mistyped_path(labelled: StudyFiles) -> None:
    text = labelled.config.read_text(encoding="utf-8").replace("human.clar", "human.clarity")
    labelled.config.write_text(text, encoding="utf-8")
    result = run_cli("calibrate", str(labelled.config))
    assert result.returncode == 2
    assert "record 'u000-A': no field 'human.clarity'" in result.stderr
    assert "no record has it" in result.stderr and result.stderr.count("\n") == 1


def test_importing_ppi_python_leaves_the_warning_filters_alone() -> None:
    before = list(warnings.filters)
    load_ppi()
    assert warnings.filters == before
    with pytest.warns(UserWarning):
        warnings.warn("still shown", UserWarning, stacklevel=1)
