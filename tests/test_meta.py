"""Meta-evaluation against SummEval's expert scores: ``geval-async meta`` and geval_async.meta.

The judge scores are known (the human score plus deterministic noise, with a constant document
and some empty cells), and every expected figure is computed here independently: the data file
read with json, grouped by hand, and scipy's spearmanr / kendalltau / pearsonr called directly.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, SUMMEVAL, StudyFiles, needs_summeval, run_cli
from scipy import stats as sps

from geval_async.errors import ConfigError
from geval_async.judging.store.cache import JudgeCache
from geval_async.meta import METHODS, meta_evaluate, system_level
from geval_async.sim import SimServer

DATA = SUMMEVAL / "summeval.jsonl"

HUMAN = {"coh": "coherence", "con": "consistency", "flu": "fluency", "rel": "relevance"}
SCIPY = {
    "spearman": lambda x, y: sps.spearmanr(x, y).statistic,
    "kendall": lambda x, y: sps.kendalltau(x, y).statistic,
    "pearson": lambda x, y: sps.pearsonr(x, y).statistic,
}


def _records() -> list[dict]:
    with DATA.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _write_config(folder: Path, *, human: dict[str, str] | None = None, **meta: object) -> Path:
    """The SummEval study's meta.toml: its four criteria, the judge's 2 samples an item in a
    cache of its own, ``human`` (the criteria's human fields) and ``meta`` (bootstrap = 200,
    seed = 0 unless given) in its [meta] table."""
    human = human or {c: f"scores.{f}" for c, f in HUMAN.items()}
    criteria: list[dict[str, object]] = [
        {
            "name": c,
            "prompt": f"{ROOT}/prompts/summeval/{c}_detailed.txt",
            "scale": [1, 3 if c == "flu" else 5],
            "fields": {"document": "source", "summary": "system_output"},
        }
        for c in HUMAN
    ]
    return StudyFiles.in_folder(folder, DATA, "meta.toml").write_config(
        "http://127.0.0.1:9/v1",
        criteria=criteria,
        data={"id": "index", "group": "doc_id", "condition": "system_id"},
        sampling={"mode": None, "n": 2, "temperature": None, "max_tokens": None},
        limits={"concurrency": 8, "retries": 2, "timeout": 10},
        stats=None,
        meta={"human": human, "bootstrap": 200, "seed": 0, **meta},
    )


def _known_judge(records: list[dict]) -> dict[int, dict[str, float | None]]:
    """index -> criterion -> score: human + noise; one document constant; some cells empty."""
    constant_doc = records[3 * 16]["doc_id"]
    scores: dict[int, dict[str, float | None]] = {}
    for r in records:
        row: dict[str, float | None] = {}
        for c, f in HUMAN.items():
            if r["index"] % 97 == 5:
                row[c] = None
            elif r["doc_id"] == constant_doc:
                row[c] = 3.0
            else:
                row[c] = r["scores"][f] + ((r["index"] * 37 + len(c)) % 11 - 5) / 5
        scores[r["index"]] = row
    return scores


def _write_csv(path: Path, scores: dict[int, dict[str, float | None]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["index", *HUMAN])
        for index, row in scores.items():
            writer.writerow([index, *("" if row[c] is None else repr(row[c]) for c in HUMAN)])
    return path


def _expected(
    records: list[dict], judge: dict[int, dict[str, float | None]], criterion: str
) -> dict[str, object]:
    """Every level's correlations, computed by hand and with scipy."""
    field = HUMAN[criterion]
    pairs = [
        (r["doc_id"], r["system_id"], r["scores"][field], judge[r["index"]][criterion])
        for r in records
    ]
    scored = [p for p in pairs if p[3] is not None]
    by_doc: dict[str, list[tuple[float, float]]] = defaultdict(list)
    by_system: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for doc, system, h, j in scored:
        by_doc[doc].append((h, j))
        by_system[system].append((h, j))
    out: dict[str, object] = {"missing": len(pairs) - len(scored)}
    used = [v for v in by_doc.values() if len({h for h, _ in v}) > 1 and len({j for _, j in v}) > 1]
    out["skipped"] = len({p[0] for p in pairs}) - len(used)
    out["documents"] = len(used)
    for method, f in SCIPY.items():
        out[("summary", method)] = float(
            np.mean([f([h for h, _ in v], [j for _, j in v]) for v in used])
        )
        # Means equal in exact arithmetic must tie whatever order the float sums ran in.
        means = [
            (round(np.mean([h for h, _ in v]), 12), round(np.mean([j for _, j in v]), 12))
            for v in by_system.values()
        ]
        out[("system", method)] = f([m[0] for m in means], [m[1] for m in means])
        out[("dataset", method)] = f([p[2] for p in scored], [p[3] for p in scored])
    return out


@needs_summeval
def test_summary_system_and_dataset_levels_equal_scipy(tmp_path: Path) -> None:
    records = _records()
    judge = _known_judge(records)
    config = _write_config(tmp_path)
    evaluation = meta_evaluate(
        config, {"noisy": _write_csv(tmp_path / "noisy.csv", judge)}, use_cache=False
    )
    found = {(c.criterion, c.level, c.method): c for c in evaluation.correlations}
    assert len(found) == 4 * 3 * 3
    for criterion in HUMAN:
        expected = _expected(records, judge, criterion)
        for level in ("summary", "system", "dataset"):
            for method in METHODS:
                c = found[(criterion, level, method)]
                assert c.judge == "noisy"
                assert c.value == pytest.approx(expected[(level, method)], abs=1e-9), (
                    criterion,
                    level,
                    method,
                )
                assert c.missing == expected["missing"]
        summary = found[(criterion, "summary", "spearman")]
        assert summary.skipped == expected["skipped"]
        assert summary.n == expected["documents"]
        assert summary.n + summary.skipped == 100
        assert found[(criterion, "system", "pearson")].n == 16
        assert found[(criterion, "dataset", "pearson")].n == 1600 - expected["missing"]
    # Consistency: four documents have equal expert scores for all 16 summaries, a fifth once
    # its one unscored summary (an empty cell) is left out, and one document has equal judge
    # scores: all are skipped and counted. Coherence has only the judge's constant document.
    assert found[("coh", "summary", "kendall")].skipped == 1
    assert found[("con", "summary", "kendall")].skipped == 6
    notes = "\n".join(evaluation.notes)
    assert "noisy con: 6 of 100 documents skipped" in notes
    assert f"noisy coh: {expected['missing']} of 1600 items have no judge score" in notes


@needs_summeval
def test_bootstrap_interval_holds_the_estimate_and_follows_the_seed(tmp_path: Path) -> None:
    judge_file = _write_csv(tmp_path / "noisy.csv", _known_judge(_records()))

    def summary(seed: int, confidence: float = 0.95) -> dict[tuple[str, str], tuple]:
        given = {} if confidence == 0.95 else {"confidence": confidence}
        config = _write_config(tmp_path, bootstrap=500, seed=seed, **given)
        evaluation = meta_evaluate(config, {"noisy": judge_file}, use_cache=False)
        return {
            (c.criterion, c.method): (c.value, c.ci_low, c.ci_high)
            for c in evaluation.correlations
            if c.level == "summary"
        }

    first, again, other = summary(7), summary(7), summary(8)
    assert first == again, "the same seed gives the same intervals"
    assert first != other
    for key, (value, low, high) in first.items():
        assert low < value < high, key
        assert high - low < 0.5, key
    narrow = summary(7, confidence=0.5)
    for key, (_, low, high) in narrow.items():
        assert high - low < first[key][2] - first[key][1], key
    # Intervals belong to the summary level only.
    config = _write_config(tmp_path, bootstrap=0)
    evaluation = meta_evaluate(config, {"noisy": judge_file}, use_cache=False)
    assert all(math.isnan(c.ci_low) for c in evaluation.correlations)


@needs_summeval
def test_cli_compares_judge_files_and_writes_csv_and_json(tmp_path: Path) -> None:
    records = _records()
    judge = _known_judge(records)
    noisy = _write_csv(tmp_path / "noisy.csv", judge)
    # A second judge as JSONL, with numeric ids, that only rates two criteria.
    other = tmp_path / "other.jsonl"
    other.write_text(
        "".join(
            json.dumps(
                {
                    "index": r["index"],
                    "coh": r["scores"]["coherence"] * 2,
                    "rel": 5 - r["scores"]["relevance"],
                }
            )
            + "\n"
            for r in records
        )
    )
    config = _write_config(tmp_path)
    result = run_cli(
        "meta",
        str(config),
        "--no-cache",
        "--judge-file",
        f"noisy={noisy}",
        "--judge-file",
        f"flipped={other}",
    )
    assert result.returncode == 0, result.stderr
    assert "noisy con: 6 of 100 documents skipped" in result.stdout
    assert "flipped: no scores for con, flu (left out)" in result.stdout

    meta_csv = tmp_path / "out" / "meta" / "t_meta.csv"
    with meta_csv.open() as handle:
        rows = {
            (r["judge"], r["criterion"], r["level"], r["method"]): r for r in csv.DictReader(handle)
        }
    assert len(rows) == (4 + 2) * 3 * 3
    expected = _expected(records, judge, "rel")
    assert float(rows[("noisy", "rel", "summary", "kendall")]["value"]) == pytest.approx(
        expected[("summary", "kendall")], abs=1e-9
    )
    # coh x 2 ranks exactly like the human scores; 5 - rel reverses them.
    assert float(rows[("flipped", "coh", "dataset", "spearman")]["value"]) == pytest.approx(1)
    assert float(rows[("flipped", "rel", "system", "pearson")]["value"]) == pytest.approx(-1)
    document = json.loads((tmp_path / "out" / "meta" / "t_meta.json").read_text())
    assert document["judges"] == {"noisy": str(noisy), "flipped": str(other)}
    assert len(document["correlations"]) == len(rows)
    assert document["bootstrap"] == 200 and document["human"]["coh"] == "scores.coherence"
    # The terminal table shows value [CI] at summary level.
    line = next(
        x
        for x in result.stdout.splitlines()
        if x.startswith("noisy") and " rel " in x and "summary" in x
    )
    assert line.count("[") == 3


@needs_summeval
@pytest.mark.parametrize(
    ("header", "row", "message"),
    [
        ("index,coh", ",3.5", "row 2 (line 3), column 'index': the record id is missing"),
        ("index,coh", "1,inf", "row 2 (line 3), column 'coh': 'inf' is not a finite number"),
        ("index,coh", "99999,3", "row 2 (line 3), column 'index': '99999' is not the id"),
        ("index,coh", "0,2", "row 2 (line 3), column 'index': id '0' repeats row 1"),
        ("id,coh", "1,3", "no column 'index'"),
    ],
)
def test_bad_judge_file_is_one_line_and_exit_2(
    tmp_path: Path, header: str, row: str, message: str
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{header}\n0,3\n{row}\n")
    result = run_cli(
        "meta", str(_write_config(tmp_path)), "--no-cache", "--judge-file", f"bad={bad}"
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(bad) in lines[0] and message in lines[0]


@needs_summeval
def test_bad_jsonl_score_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"index": 0, "coh": 3}\n\n{"index": 1, "coh": [3]}\n')
    with pytest.raises(ConfigError, match=r"row 2 \(line 3\), column 'coh': \[3\] is not a number"):
        meta_evaluate(_write_config(tmp_path), {"bad": bad}, use_cache=False)


@needs_summeval
def test_meta_config_is_checked(tmp_path: Path) -> None:
    config = _write_config(tmp_path, bootstrp=5)
    with pytest.raises(ConfigError, match=r"\[meta\] unknown key 'bootstrp'"):
        meta_evaluate(config, use_cache=False)
    with pytest.raises(ConfigError, match=r"'human' names 'cohesion', which is not among"):
        meta_evaluate(_write_config(tmp_path, human={"cohesion": "scores.coherence"}))
    config = _write_config(tmp_path, human={"coh": "scores.coherance"})
    with pytest.raises(ConfigError, match=r"line 1, record '0': no field 'scores.coherance'"):
        meta_evaluate(config, {"x": tmp_path / "x.csv"}, use_cache=False)
    config = _write_config(tmp_path)
    result = run_cli("meta", str(config))  # no cache folder yet: says to run the study first
    assert result.returncode == 2
    assert "no cache folder there" in result.stderr
    assert f"run `geval-async run {config}` first" in result.stderr
    with JudgeCache(tmp_path / "cache"):
        pass  # a cache folder, empty
    result = run_cli("meta", str(config))
    assert result.returncode == 2
    assert "holds no scores for this study" in result.stderr


@needs_summeval
def test_cache_judge_equals_scipy_on_its_weighted_scores(tmp_path: Path) -> None:
    """The tool's own judge: scores from the cache (via load_results), then scipy directly."""
    from geval_async.scoring.scores.results import load_results

    config = _write_config(tmp_path)
    with SimServer() as server:
        judged = run_cli(
            "run", str(config), "--base-url", server.base_url, "--limit", "48", "--quiet"
        )
        assert judged.returncode == 0, judged.stderr
    result = run_cli("meta", str(config), "--limit", "48")
    assert result.returncode == 0, result.stderr
    assert "sim-judge (simulated)" in result.stdout

    long = load_results(config, limit=48).long
    human = {str(r["index"]): r for r in _records()[:48]}
    with (tmp_path / "out" / "meta" / "t_meta.csv").open() as handle:
        rows = {
            (r["criterion"], r["level"], r["method"]): float(r["value"])
            for r in csv.DictReader(handle)
        }
    for criterion, field in HUMAN.items():
        part = long[long["criterion"] == criterion]
        h = [human[i]["scores"][field] for i in part["record_id"]]
        j = part["score"].tolist()
        for method, f in SCIPY.items():
            assert rows[(criterion, "dataset", method)] == pytest.approx(f(h, j), abs=1e-9)


def test_system_means_equal_in_exact_arithmetic_tie() -> None:
    # System a's judge mean is (0.1 + 0.2 + 0.3) / 3, b's (0.6 + 0 + 0) / 3: equal, although
    # the float sums differ in the last bit. Ranked as a tie, as a person would rank them.
    judge = {"a": [0.1, 0.2, 0.3], "b": [0.6, 0.0, 0.0], "c": [1.0, 1.0, 1.0]}
    human = {"a": [1, 1, 1], "b": [2, 2, 2], "c": [3, 3, 3]}
    assert np.mean(judge["a"]) != np.mean(judge["b"])
    pairs = pd.DataFrame(
        [
            {
                "record_id": f"{s}{i}",
                "group": f"d{i}",
                "condition": s,
                "criterion": "x",
                "human": human[s][i],
                "judge": judge[s][i],
            }
            for s in judge
            for i in range(3)
        ]
    )
    found = {c.method: c.value for c in system_level(pairs, "j", "x")}
    assert found["spearman"] == pytest.approx(sps.spearmanr([1, 2, 3], [0.2, 0.2, 1]).statistic)
    assert found["kendall"] == pytest.approx(sps.kendalltau([1, 2, 3], [0.2, 0.2, 1]).statistic)
