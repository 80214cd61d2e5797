"""The scoring stage: from the cache alone to tables, composite, tests and the report.

The expected figures are computed here independently: the cache read with diskcache directly,
ratings read with a plain regex, then numpy, scipy and statsmodels called directly.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import zlib
from pathlib import Path

import diskcache
import numpy as np
import pytest
from conftest import DemoRun, StudyFiles, answer_to, run_cli
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from geval_async.errors import ConfigError
from geval_async.judging.store.cache import JudgeCache
from geval_async.scoring.output.html.overview import study_facts
from geval_async.scoring.scores.results import load_results
from geval_async.sim import SimServer, SimSettings
from geval_async.study.config import load_config
from geval_async.study.plan import first_request, plan_items
from geval_async.study.prepare import prepare_study

SCALES = {"clar": 5, "fit": 3}


def _judge(study: StudyFiles, **settings: object) -> None:
    with SimServer(SimSettings(**settings)) as server:  # type: ignore[arg-type]
        study.write_config(server.base_url)
        result = run_cli("run", str(study.config), "--quiet")
        assert result.returncode == 0, result.stderr
    # The server is gone from here on: everything below reads the cache only.


def _independent_scores(cache_path: Path) -> dict[tuple[str, str], float]:
    """(record id, criterion) -> mean of the valid sampled ratings, straight from diskcache."""
    ratings: dict[tuple[str, str], list[int]] = {}
    with diskcache.Cache(str(cache_path)) as cache:
        for key in cache.iterkeys():
            # As geval_async/judging/store/stored.py lays an entry out: a mark, a 10-byte header,
            # the metadata's JSON on one line, then the response body as received (entry2)
            # or deflated (entry3).
            mark, rest = cache[key][:8], cache[key][8 + 10 :]
            assert mark in (b"\x00entry2\n", b"\x00entry3\n")
            meta, raw_body = rest.split(b"\n", 1)
            if mark == b"\x00entry3\n":
                raw_body = zlib.decompress(raw_body, -zlib.MAX_WBITS)
            entry, body = json.loads(meta), json.loads(raw_body)
            for choice in body["choices"]:
                match = re.search(r"\d+", choice["message"]["content"])
                values = ratings.setdefault((entry["record_id"], entry["criterion"]), [])
                if match and 1 <= int(match.group()) <= SCALES[entry["criterion"]]:
                    values.append(int(match.group()))
    return {k: float(np.mean(v)) for k, v in ratings.items() if v}


def _read_table(path: Path) -> dict[str, dict[str, float]]:
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    first = next(iter(rows[0]))
    return {row[first]: {k: float(v) for k, v in row.items() if k != first and v} for row in rows}


def test_offline_scores_equal_an_independent_computation(study: StudyFiles) -> None:
    _judge(study, invalid_answers=0.05, seed=3)
    expected = _independent_scores(study.cache)

    for command in ("score", "average", "ttest", "report"):
        result = run_cli(command, str(study.config))
        assert result.returncode == 0, f"{command}: {result.stderr}"

    out = study.output
    # Per record: the long table.
    with (out / "scores" / "t_long.csv").open() as handle:
        long = {(r["record_id"], r["criterion"]): float(r["score"]) for r in csv.DictReader(handle)}
    assert long.keys() == expected.keys()
    for key, value in expected.items():
        assert long[key] == pytest.approx(value, abs=1e-6)

    # Per user and condition, with the Average row.
    users = [f"u{u:03d}" for u in range(12)]
    per_user = {
        c: {cond: [expected[(f"{u}-{cond}", c)] for u in users] for cond in "AB"} for c in SCALES
    }
    for criterion in SCALES:
        table = _read_table(out / "scores" / f"t_{criterion}.csv")
        for i, user in enumerate(users):
            for cond in "AB":
                # Tables are rounded to 3 decimals (the long table keeps every digit).
                assert table[user][cond] == pytest.approx(per_user[criterion][cond][i], abs=5e-4)
        for cond in "AB":
            assert table["Average"][cond] == pytest.approx(
                np.mean(per_user[criterion][cond]), abs=5e-4
            )

    # The composite: mean(clar/5, fit/3) x 100.
    composite = {
        cond: [
            (per_user["clar"][cond][i] / 5 + per_user["fit"][cond][i] / 3) / 2 * 100
            for i in range(len(users))
        ]
        for cond in "AB"
    }
    table = _read_table(out / "scores" / "t_average.csv")
    for i, user in enumerate(users):
        assert table[user]["A"] == pytest.approx(composite["A"][i], abs=5e-4)

    # Welch per criterion, BH across the criteria, from the per-user values (not the Average);
    # the design is paired, so Welch (configured) is beside the summary's paired t-test.
    with (out / "stats" / "t_ttest-welch.csv").open() as handle:
        tests = {r["criterion"]: r for r in csv.DictReader(handle)}
    p_values = []
    for criterion in SCALES:
        t, p = sps.ttest_ind(per_user[criterion]["A"], per_user[criterion]["B"], equal_var=False)
        assert float(tests[criterion]["statistic"]) == pytest.approx(t, rel=1e-5)
        assert float(tests[criterion]["p"]) == pytest.approx(p, rel=1e-5)
        p_values.append(p)
    reject, adjusted, _, _ = multipletests(p_values, alpha=0.05, method="fdr_bh")
    for criterion, p_adj in zip(SCALES, adjusted, strict=True):
        assert float(tests[criterion]["p_adj"]) == pytest.approx(p_adj, rel=1e-5)
    t, p = sps.ttest_ind(composite["A"], composite["B"], equal_var=False)
    assert float(tests["composite"]["p"]) == pytest.approx(p, rel=1e-5)

    # The report names the invalid samples and the simulated judge.
    report = (out / "t_report.md").read_text()
    coverage = report.split("## Coverage")[1].split("## ")[0]
    invalid = sum(
        int(row.split("|")[8])
        for row in coverage.splitlines()
        if row.startswith(("| clar ", "| fit "))
    )
    assert invalid > 0
    assert "simulated" in report.lower()
    raw = json.loads((out / "raw" / "t_clar.json").read_text())
    assert len(raw["items"]) == 24 and "{{reader}}" in raw["items"][0]["messages"][0]["content"]


def test_invalid_samples_are_counted_not_scored_as_zero(study: StudyFiles) -> None:
    _judge(study, invalid_answers=0.3, seed=5)
    results = load_results(study.config)
    for name, tally in results.tallies.items():
        assert tally.invalid_samples > 0, name
        assert tally.valid_samples + tally.invalid_samples == 24 * 3
    scores = results.long["score"].dropna()
    assert (scores >= 1).all(), "an invalid sample must never count as a 0 rating"


def test_missing_items_are_reported_and_strict_refuses(study: StudyFiles) -> None:
    with SimServer() as server:
        study.write_config(server.base_url)
        assert run_cli("run", str(study.config), "--quiet", "--limit", "10").returncode == 0
    result = run_cli("score", str(study.config))
    assert result.returncode == 0
    assert "28 of 48 items have no answer" in result.stdout
    strict = run_cli("score", str(study.config), "--strict")
    assert strict.returncode == 2 and "28 of 48" in strict.stderr


def _logprob_body(top: list[tuple[str, float]]) -> dict:
    return {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": top[0][0]},
                "logprobs": {
                    "content": [
                        {
                            "token": top[0][0],
                            "logprob": top[0][1],
                            "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top],
                        }
                    ]
                },
            }
        ]
    }


def test_logprob_scoring_from_hand_written_bodies(study: StudyFiles) -> None:
    study.write_config("http://127.0.0.1:9/v1", sampling={"mode": "logprobs"})
    config = load_config(study.config)
    study_plan = prepare_study(config)
    items = [i for i in plan_items(study_plan) if i.criterion.name == "clar"][:4]
    ln = np.log
    bodies = [
        # duplicate rating tokens: " 4" and "4" add up; the exact duplicate "4" counts once
        [("4", ln(0.4)), (" 4", ln(0.2)), ("4", ln(0.4)), ("3", ln(0.2)), ("The", ln(0.1))],
        # ratings missing from top_logprobs: only 2 and 5 present
        [("5", ln(0.45)), ("2", ln(0.15)), ("\n", ln(0.3))],
        # no valid rating at all
        [("The", ln(0.6)), ("I", ln(0.3))],
        # tokens with spaces only
        [(" 1", ln(0.5)), (" 2", ln(0.5))],
    ]
    with JudgeCache(config.cache_path) as cache:
        for item, top in zip(items, bodies, strict=True):
            cache.put(answer_to(first_request(item, config), _logprob_body(top)))
    results = load_results(study.config)
    by_record = {(s.record_id, s.criterion): s for s in results.scores}
    scores = [by_record[(item.record.id, "clar")] for item in items]
    assert scores[0].weighted_score == pytest.approx((4 * 0.6 + 3 * 0.2) / 0.8)
    assert scores[0].distribution.valid_mass == pytest.approx(0.8)
    assert scores[1].weighted_score == pytest.approx((5 * 0.45 + 2 * 0.15) / 0.6)
    assert scores[2].weighted_score is None and scores[2].status == "no valid rating"
    assert scores[3].weighted_score == pytest.approx(1.5)
    assert results.tallies["clar"].no_valid == 1
    assert results.tallies["clar"].missing == 24 - 4


def test_logprobs_that_lie_are_invalid_with_their_reason_never_scored_from_scraps(
    study: StudyFiles,
) -> None:
    study.write_config("http://127.0.0.1:9/v1", sampling={"mode": "logprobs"})
    config = load_config(study.config)
    items = [i for i in plan_items(prepare_study(config)) if i.criterion.name == "clar"][:5]
    bodies: list[list[tuple[str, object]]] = [
        [("4", 1e-7), ("3", -12.0)],  # +1e-7 is 0 rounded: the judge is sure of its 4
        [("4", "-0.1"), ("3", -2.0)],  # a string is no logprob
        [(t, 0.0) for t in ("1", "2", "3", "4", "5")],  # a mass of 5
        [("I", np.log(0.9999)), ("4", np.log(0.0001))],  # 0.01% on ratings: scraps
        [("4", None), ("3", -1.0)],  # null
    ]
    with JudgeCache(config.cache_path) as cache:
        for item, top in zip(items, bodies, strict=True):
            cache.put(answer_to(first_request(item, config), _logprob_body(top)))
    results = load_results(study.config)
    by_record = {(s.record_id, s.criterion): s for s in results.scores}
    sure, string, five, scraps, null = [by_record[(i.record.id, "clar")] for i in items]
    assert sure.status == "scored" and sure.weighted_score == pytest.approx(4.0, abs=1e-4)
    for score, reason in ((string, "bad_logprobs"), (five, "bad_logprobs"), (null, "bad_logprobs"),
                          (scraps, "low_mass")):  # fmt: skip
        assert score.status == "no valid rating" and score.weighted_score is None
        assert score.reasons == (reason,)
    assert results.tallies["clar"].reasons == {"bad_logprobs": 3, "low_mass": 1}


def test_the_valid_mass_floor_is_a_sampling_setting(study: StudyFiles) -> None:
    study.write_config(
        "http://127.0.0.1:9/v1", sampling={"mode": "logprobs", "min_valid_mass": 0.0001}
    )
    config = load_config(study.config)
    assert config.sampling.min_valid_mass == 0.0001
    item = next(i for i in plan_items(prepare_study(config)) if i.criterion.name == "clar")
    with JudgeCache(config.cache_path) as cache:
        body = _logprob_body([("I", np.log(0.9998)), ("4", np.log(0.0002))])
        cache.put(answer_to(first_request(item, config), body))
    score = next(s for s in load_results(study.config).scores if s.record_id == item.record.id)
    assert score.weighted_score == pytest.approx(4.0)
    study.write_config("http://127.0.0.1:9/v1", sampling={"min_valid_mass": 1.5})
    with pytest.raises(ConfigError, match=r"\[sampling\] 'min_valid_mass' must be between 0 and 1"):
        load_config(study.config)


def test_the_report_says_when_the_scored_answers_arrived(study: StudyFiles) -> None:
    study.write_config("http://127.0.0.1:9/v1", sampling={"mode": "logprobs"})
    config = load_config(study.config)
    with JudgeCache(config.cache_path):
        pass  # a cache folder with nothing in it yet (a missing one is refused: test_cli_stage)
    assert dict(study_facts(load_results(study.config)))["judged"] == "nothing in the cache yet"
    items = list(plan_items(prepare_study(config)))[:3]
    times = (1_700_000_000.0, 1_700_003_600.0, 1_700_000_600.0)
    with JudgeCache(config.cache_path) as cache:
        for item, time in zip(items, times, strict=True):
            cache.put(answer_to(first_request(item, config), _logprob_body([("4", 0.0)]), time))
    results = load_results(study.config)
    # Computed once, as the answers are read: the Overview renders it without the cache.
    assert results.judged == (1_700_000_000.0, 1_700_003_600.0)
    shutil.rmtree(config.cache_path)
    facts = dict(study_facts(results))
    assert facts["judged"] == "2023-11-14 22:13 UTC to 2023-11-14 23:13 UTC"


def test_demo_runs_end_to_end(demo_run: DemoRun, tmp_path: Path) -> None:
    stdout = demo_run.stdout  # `geval-async demo --output FOLDER`, once a session
    assert "SIMULATED" in stdout
    # The test table a user reads first: the paired design's summary test, words not reprs.
    assert re.search(r"^composite\s+UEQ-mLLM .* paired-t ", stdout, re.M), stdout
    assert "welch, for independent groups, is in the report too" in stdout
    out = demo_run.folder / "out"
    for name in (
        "scores/ueq_con.csv",
        "scores/ueq_average.csv",
        "stats/ueq_ttest.csv",
        "plots/ueq_composite.png",
        "ueq_report.md",
        "raw/ueq_ind.json",
    ):
        assert (out / name).is_file(), name
    shutil.copytree(demo_run.folder, tmp_path / "demo")  # the shared demo stays as it was
    again = run_cli("demo", "--output", str(tmp_path / "demo"))
    assert again.returncode == 0
    assert re.search(r"total\s+192\s+192\s+0", again.stdout), "a rerun comes from the cache"


def _answers_body(*choices: dict) -> dict:
    return {
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", **{k: v for k, v in c.items() if k != "finish"}},
                "finish_reason": c.get("finish", "stop"),
            }
            for i, c in enumerate(choices)
        ]
    }


def test_a_thinking_judge_is_scored_from_what_follows_its_reasoning(study: StudyFiles) -> None:
    config = load_config(study.write_config("http://127.0.0.1:9/v1"))
    first, second = [i for i in plan_items(prepare_study(config)) if i.criterion.name == "clar"][:2]
    tagged = _answers_body(
        {"content": "<think>\nIt's a 1 out of 5 for grammar? No.\n</think>\n4"},
        {"content": "<think>...maybe 4.\n</think>\n\n5"},
        {"content": "Score: 2? Too harsh.\n</think>\nScore: 3"},  # the opening was the prompt's
    )
    fields = _answers_body(
        {"content": "4", "reasoning_content": "Final score: 1? No, it reads well."},
        {"content": "Rating: 2", "reasoning": "Rating: 5? It misses the main event."},
        {"content": "", "reasoning_content": "Clarity: 3 or 4? Let me re-", "finish": "length"},
    )
    with JudgeCache(config.cache_path) as cache:
        cache.put(answer_to(first_request(first, config), tagged))
        cache.put(answer_to(first_request(second, config), fields))
    results = load_results(study.config)
    by_record = {(s.record_id, s.criterion): s for s in results.scores}
    one, two = by_record[(first.record.id, "clar")], by_record[(second.record.id, "clar")]
    assert one.ratings == (4, 5, 3) and one.weighted_score == pytest.approx(4.0)
    assert two.ratings == (4, 2, None) and two.reasons == (None, None, "cut_off")
    assert two.weighted_score == pytest.approx(3.0)

    story = run_cli("answers", str(study.config), "--record", second.record.id, "--criterion",
                    "clar")  # fmt: skip
    assert story.returncode == 0, story.stderr
    lines = story.stdout.splitlines()
    at = lines.index("[draw 0] rating 4")
    assert lines[at + 1] == ("  reasoning (34 characters: 'Final score: 1? No, it reads well.')")
    assert lines[at + 2] == "  answer: '4'"
    assert "[draw 2] cut_off (cut off inside its reasoning)" in lines
    story = run_cli("answers", str(study.config), "--record", first.record.id, "--criterion",
                    "clar")  # fmt: skip
    assert "  answer: '\\n4'" in story.stdout and "[draw 2] rating 3" in story.stdout
