"""Pairwise criteria end to end: two conditions' texts compared, in both orders, against the
simulated judge, whose own record of its verdicts the outputs must match.

The floors: on the UEQ study (each user's two questionnaires) the wins, ties, inconsistent and
invalid pairs equal a count made from the simulated judge's record; a position bias set on
the judge lies inside the reported interval of the first-shown share, and with none set the
interval covers 0.5; on four SummEval systems over 100 documents the Bradley-Terry strengths
equal an independent fit to 1e-6 and rank the systems as the judge's preference does; a rerun
sends nothing; a run killed with SIGKILL loses nothing it had stored.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import Counter
from itertools import combinations
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest
from conftest import ROOT, SUMMEVAL, cache_snapshot, run_cli, running_sims, start_process

from geval_async import load_results
from geval_async.errors import ConfigError
from geval_async.scoring.stats.pairwise import PAIRWISE_COLUMNS
from geval_async.sim import SimServer, SimSettings
from geval_async.sim.pairs import text_digest
from geval_async.study.config import apply_overrides, load_config
from geval_async.study.plan import planned_requests
from geval_async.study.prepare import prepare_study

UEQ_PAIRWISE = ROOT / "examples" / "ueq" / "pairwise.toml"
UEQ_RECORDS = ROOT / "examples" / "ueq" / "records.jsonl"
FAST = ("--rpm", "100000000", "--tpm", "100000000")
ISSUE_COLUMNS = ["a", "b", "pairs", "a_wins", "b_wins", "ties", "inconsistent", "a_win_rate"]
ISSUE_COLUMNS += ["ci_low", "ci_high", "p", "p_adj", "first_shown_wins"]


def _ueq_flags(sim: SimServer, folder: Path, *extra: str) -> list[str]:
    return [
        str(UEQ_PAIRWISE),
        "--base-url",
        sim.base_url,
        "--cache",
        str(folder / "cache"),
        "--output",
        str(folder / "out"),
        *FAST,
        *extra,
    ]


def _run(*args: str) -> None:
    result = run_cli("run", *args, "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _majority(choices: list[str | None]) -> str | None:
    """An order's verdict from its choices as the judge recorded them: "A", "B" or "tie" by
    the share of valid choices for the text shown first (ties half); None without one."""
    valid = [c for c in choices if c is not None]
    if not valid:
        return None
    share = (sum(c == "A" for c in valid) + sum(c == "tie" for c in valid) / 2) / len(valid)
    return "A" if share > 0.5 else "B" if share < 0.5 else "tie"


def _combined_from_record(
    verdicts: list[tuple[str, str, list[str | None]]],
    records: list[dict],
    field: str,
    group: str,
    condition: str,
    pairs: list[tuple[str, str]],
) -> dict[tuple[str, str, str], tuple[str | None, bool]]:
    """Each pair's verdict as the simulated judge's own record gives it: both orders agree
    -> that winner, disagree -> an inconsistent tie, an order without a verdict -> None."""
    by_texts = {(first, second): _majority(choices) for first, second, choices in verdicts}
    texts: dict[str, dict[str, str]] = {}
    for record in records:
        texts.setdefault(record[group], {})[record[condition]] = text_digest(record[field])
    combined = {}
    for name, shown in texts.items():
        for a, b in pairs:
            if a not in shown or b not in shown:
                continue
            winners = []
            for first, second in ((a, b), (b, a)):
                verdict = by_texts[(shown[first], shown[second])]
                winners.append({"A": first, "B": second, "tie": "tie", None: None}[verdict])
            if None in winners:
                combined[(name, a, b)] = (None, False)
            elif winners[0] == winners[1]:
                combined[(name, a, b)] = (winners[0], False)
            else:
                combined[(name, a, b)] = ("tie", True)
    return combined


# --- the config --------------------------------------------------------------------------------


def _pairwise_config(
    tmp_path: Path, criterion: str, data: str = "", prompt_name: str = "pairwise_relevance.txt"
) -> Path:
    prompt = ROOT / "prompts" / "ueq" / prompt_name
    config = tmp_path / "config.toml"
    data = data or 'group = "user"\ncondition = "condition"'
    config.write_text(
        f'[data]\npath = "{UEQ_RECORDS}"\n{data}\n'
        '[judge]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
        f'[[criteria]]\nname = "rel_pair"\nkind = "pairwise"\nprompt = "{prompt}"\n{criterion}\n',
        encoding="utf-8",
    )
    return config


@pytest.mark.parametrize(
    ("criterion", "message"),
    [
        ("", "needs 'compare'"),
        ('compare = ["questionnaire"]\nscale = [1, 5]', "'scale' does not apply"),
        ('compare = ["questionnaire"]\norders = "sometimes"', "'orders' must be one of"),
        ('compare = ["questionnaire"]\npairs = [["UEQ-mLLM", "UEQ-mLLM"]]', "two different"),
        ('compare = ["questionnaire"]\nfields = ["questionnaire"]', "both shared"),
    ],
)
def test_a_pairwise_criterion_is_checked_where_it_is_read(
    tmp_path: Path, criterion: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_pairwise_config(tmp_path, criterion))


def test_bad_pairwise_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = _pairwise_config(tmp_path, 'compare = ["questionnaire"]\npairs = [["UEQ-mLLM", "X"]]')
    result = run_cli("run", str(config), "--dry-run")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "'pairs' names condition 'X', which no record" in result.stderr
    without_groups = _pairwise_config(
        tmp_path, 'compare = ["questionnaire"]', data='condition = "condition"'
    )
    result = run_cli("run", str(without_groups), "--dry-run")
    assert result.returncode == 2
    assert "set [data] group" in result.stderr


def test_a_shared_field_that_differs_within_a_pair_is_one_line_and_nothing_is_sent(
    tmp_path: Path,
) -> None:
    # A shared field is shown once: were the two records' values different, each order would
    # show the judge another profile of the user.
    records = _records(UEQ_RECORDS)
    records[1]["user_info"] += " Prefers short questionnaires."
    changed = tmp_path / "records.jsonl"
    changed.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    config = _pairwise_config(
        tmp_path,
        'compare = ["questionnaire"]\nfields = ["user_info", "user_state"]',
        prompt_name="pairwise_personalization.txt",
    )
    config.write_text(
        config.read_text(encoding="utf-8").replace(str(UEQ_RECORDS), str(changed)),
        encoding="utf-8",
    )
    with SimServer(SimSettings()) as sim:
        result = run_cli("run", str(config), "--base-url", sim.base_url, "--cache",
                         str(tmp_path / "cache"), *FAST)  # fmt: skip
        assert sim.stats.received == 0
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert f"{changed}: records 'u01-mLLM' (line 1) and 'u01-sLLM' (line 2)" in result.stderr
    assert "differ in field 'user_info', which criterion 'rel_pair'" in result.stderr
    assert "list it in 'compare'" in result.stderr
    assert cache_snapshot(tmp_path / "cache") == {}


def test_shared_fields_are_shown_once_and_compared_fields_in_each_place(tmp_path: Path) -> None:
    config = _pairwise_config(
        tmp_path,
        'compare = ["questionnaire"]\nfields = ["user_info", "user_state"]',
        prompt_name="pairwise_personalization.txt",
    )
    request = next(iter(planned_requests(prepare_study(load_config(config)))))
    shown = request.messages[0]["content"]
    first, second = _records(UEQ_RECORDS)[:2]
    assert shown.count(first["user_info"]) == 1 and shown.count(first["user_state"]) == 1
    assert shown.count(first["questionnaire"]) == shown.count(second["questionnaire"]) == 1


def test_more_than_two_conditions_are_compared_in_every_pair_unless_named(tmp_path: Path) -> None:
    records = [
        {"id": f"{group}-{c}", "group": group, "system": c, "summary": f"{c} on {group}"}
        for group in ("d1", "d2")
        for c in ("M8", "M9", "M10")
    ]
    del records[5]  # d2 has no M10 summary: its pairs with M10 are not asked
    path = tmp_path / "summaries.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(
        "Which summary is better?\n[The Start of Summary A]\n{{summary_a}}\n"
        "[The End of Summary A]\n[The Start of Summary B]\n{{summary_b}}\n"
        "[The End of Summary B]\nAnswer [[A]], [[B]] or [[C]] (a tie).",
        encoding="utf-8",
    )

    def compared(pairs: str) -> list[tuple[str, str, str, str]]:
        config = tmp_path / "three.toml"
        config.write_text(
            f'[data]\npath = "{path}"\ngroup = "group"\ncondition = "system"\n'
            '[judge]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
            f'[[criteria]]\nname = "rel"\nkind = "pairwise"\nprompt = "{prompt}"\n'
            f'compare = ["summary"]\n{pairs}\n',
            encoding="utf-8",
        )
        planned = planned_requests(prepare_study(load_config(config)))
        return [
            (r.item.record.group, r.item.record.a, r.item.record.b, r.item.record.first)
            for r in planned
        ]

    every = compared("")
    assert {(g, a, b) for g, a, b, _ in every} == {
        ("d1", "M8", "M9"), ("d1", "M8", "M10"), ("d1", "M9", "M10"), ("d2", "M8", "M9")
    }  # fmt: skip
    assert len(every) == 2 * 4  # both orders of each
    named = compared('pairs = [["M10", "M8"]]')
    assert named == [("d1", "M10", "M8", "M10"), ("d1", "M10", "M8", "M8")]


def test_both_orders_are_two_requests_with_their_own_keys(tmp_path: Path) -> None:
    config = _pairwise_config(tmp_path, 'compare = ["questionnaire"]')
    study = prepare_study(load_config(config))
    requests = list(planned_requests(study))
    assert len(requests) == 2 * 24  # 24 users, one pair each, both orders
    assert len({r.key for r in requests}) == len(requests)
    first, second = requests[0], requests[1]
    assert first.item.record.group == second.item.record.group == "u01"
    assert first.item.record.first == "UEQ-mLLM" and second.item.record.first == "UEQ-sLLM"
    texts = {r["condition"]: r["questionnaire"] for r in _records(UEQ_RECORDS)[:2]}
    shown = first.messages[0]["content"]
    assert shown.index(texts["UEQ-mLLM"]) < shown.index(texts["UEQ-sLLM"])
    swapped = second.messages[0]["content"]
    assert swapped.index(texts["UEQ-sLLM"]) < swapped.index(texts["UEQ-mLLM"])


def test_one_random_order_is_seeded_and_stays_put(tmp_path: Path) -> None:
    def firsts(seed: int) -> list[str]:
        config = _pairwise_config(
            tmp_path, f'compare = ["questionnaire"]\norders = "random"\nseed = {seed}'
        )
        return [r.item.record.first for r in planned_requests(prepare_study(load_config(config)))]

    drawn = firsts(0)
    assert len(drawn) == 24  # one request a pair
    assert set(drawn) == {"UEQ-mLLM", "UEQ-sLLM"}  # both conditions come first somewhere
    assert firsts(0) == drawn
    assert firsts(7) != drawn


def test_one_order_with_n_draws_reads_each_orders_majority(tmp_path: Path) -> None:
    config = _pairwise_config(tmp_path, 'compare = ["questionnaire"]\norders = "random"')
    flags = [str(config), "--cache", str(tmp_path / "cache"), "--n", "3", *FAST]
    with SimServer(SimSettings(pair_ties=0.2, invalid_answers=0.1)) as sim:
        _run(*flags, "--base-url", sim.base_url)
        assert sim.stats.received == 24  # one order a pair
        recorded = {
            (first, second): _majority(choices) for first, second, choices in sim.stats.verdicts
        }
    texts = {
        (r["user"], r["condition"]): text_digest(r["questionnaire"]) for r in _records(UEQ_RECORDS)
    }
    results = load_results(config, cache=str(tmp_path / "cache"), n=3)
    verdicts = results.pair_verdicts
    assert len(verdicts) == 24
    for row in verdicts.to_dict("records"):
        second = row["b"] if row["first"] == row["a"] else row["a"]
        key = (texts[(row["group"], row["first"])], texts[(row["group"], second)])
        assert row["verdict"] == recorded[key]
    frame = results.pairwise()
    assert frame["inconsistent"].iloc[0] == 0  # one order: nothing to disagree with
    assert frame["pairs"].iloc[0] + frame["invalid"].iloc[0] == 24


# --- the floors on the UEQ study -----------------------------------------------------------------


def test_wins_ties_and_inconsistent_pairs_equal_the_judges_own_record(tmp_path: Path) -> None:
    records = _records(UEQ_RECORDS)
    counted: dict[str, dict[str, int]] = {}
    with SimServer(SimSettings(position_bias=0.1, pair_ties=0.1, invalid_answers=0.05)) as sim:
        for criterion in ("ind_pair", "rel_pair"):
            sim.stats.reset()
            _run(*_ueq_flags(sim, tmp_path, "--criteria", criterion))
            combined = _combined_from_record(
                sim.stats.verdicts,
                records,
                "questionnaire",
                "user",
                "condition",
                [("UEQ-mLLM", "UEQ-sLLM")],
            )
            winners = Counter(w for w, _ in combined.values())
            counted[criterion] = {
                "a_wins": winners["UEQ-mLLM"],
                "b_wins": winners["UEQ-sLLM"],
                "ties": winners["tie"],
                "inconsistent": sum(inconsistent for _, inconsistent in combined.values()),
                "invalid": winners[None],
            }
    results = load_results(UEQ_PAIRWISE, cache=str(tmp_path / "cache"))
    frame = results.pairwise().set_index("criterion")
    for criterion, counts in counted.items():
        row = frame.loc[criterion]
        assert (row["a"], row["b"]) == ("UEQ-mLLM", "UEQ-sLLM")
        assert {name: int(row[name]) for name in counts} == counts
        assert row["pairs"] == 24 - counts["invalid"]
    assert sum(c["invalid"] for c in counted.values()) > 0  # the judge's lapses are counted
    assert all(c["inconsistent"] > 0 and c["ties"] > 0 for c in counted.values())


@pytest.mark.parametrize("bias", [0.0, 0.2])
def test_the_position_bias_set_on_the_judge_is_inside_the_interval(
    tmp_path: Path, bias: float
) -> None:
    # The judge is deterministic: this is one fixed draw of the 48 verdicts of one criterion,
    # and a 95% interval contains what was put in.
    with SimServer(SimSettings(position_bias=bias)) as sim:
        _run(*_ueq_flags(sim, tmp_path, "--criteria", "ind_pair"))
    results = load_results(UEQ_PAIRWISE, cache=str(tmp_path / "cache"), criteria="ind_pair")
    row = results.pairwise().iloc[0]
    assert row["first_shown_verdicts"] == 48  # both orders of 24 pairs, none a tie
    assert row["first_ci_low"] <= 0.5 + bias <= row["first_ci_high"]
    assert row["first_ci_low"] < row["first_shown_wins"] < row["first_ci_high"]


def test_outputs_csv_report_and_rerun_sending_nothing(tmp_path: Path) -> None:
    with SimServer(SimSettings(position_bias=0.2)) as sim:
        _run(*_ueq_flags(sim, tmp_path))
        sent = sim.stats.received
        assert sent == 96  # 2 criteria x 24 pairs x 2 orders
        _run(*_ueq_flags(sim, tmp_path))
        assert sim.stats.received == sent  # every answer came from the cache
    report = run_cli("report", *_ueq_flags(sim, tmp_path)[:1], "--cache", str(tmp_path / "cache"),
                     "--output", str(tmp_path / "out"))  # fmt: skip
    assert report.returncode == 0, report.stderr
    csv = tmp_path / "out" / "stats" / "ueq-pairwise_pairwise.csv"
    frame = pd.read_csv(csv)
    assert list(frame.columns) == PAIRWISE_COLUMNS
    assert set(ISSUE_COLUMNS) <= set(frame.columns)
    assert list(frame["criterion"]) == ["ind_pair", "rel_pair"]
    text = (tmp_path / "out" / "ueq-pairwise_report.md").read_text(encoding="utf-8")
    assert "## Which is better: pairwise verdicts" in text
    assert "| ind_pair | UEQ-mLLM | UEQ-sLLM | 24 |" in text
    assert "first shown wins" in text
    assert "## Coverage" not in text  # no criterion rates: no empty rating tables
    # The bias section's position check reads the same share and flags it.
    results = load_results(UEQ_PAIRWISE, cache=str(tmp_path / "cache"))
    position = results.bias().query("check == 'position'").set_index("criterion")
    pairwise = results.pairwise().set_index("criterion")
    for criterion, row in position.iterrows():
        assert row["value"] == pytest.approx(pairwise.loc[criterion, "first_shown_wins"])
        assert row["flagged"] == (pairwise.loc[criterion, "first_ci_low"] > 0.5)
    assert "**Flag:** position (rel_pair)" in text
    assert "first shown wins" in report.stdout  # the terminal shows the table too


def test_dry_run_and_status_count_every_order(tmp_path: Path) -> None:
    with SimServer(SimSettings()) as sim:
        flags = _ueq_flags(sim, tmp_path)
        dry = run_cli("run", *flags, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "requests to send: 96" in dry.stdout
        assert sim.stats.received == 0
        _run(*flags, "--criteria", "ind_pair")
    status = run_cli("status", *flags[:1], "--cache", str(tmp_path / "cache"))
    assert status.returncode == 0, status.stderr
    rows = {line.split()[0]: line.split()[1:] for line in status.stdout.splitlines() if line}
    assert rows["ind_pair"][:4] == ["48", "48", "0", "0"]  # items, answered, refused, missing
    assert rows["rel_pair"][:4] == ["48", "0", "0", "48"]


def test_a_batch_job_judges_the_pairs_as_the_online_run_does(tmp_path: Path) -> None:
    with SimServer(SimSettings(position_bias=0.1)) as sim:
        _run(*_ueq_flags(sim, tmp_path / "online"))
        _run(*_ueq_flags(sim, tmp_path / "batch"), "--batch", "--poll", "0.05")
        assert sim.stats.batch_lines == 96  # every order of every pair, in the batch
    online = load_results(UEQ_PAIRWISE, cache=str(tmp_path / "online" / "cache"))
    batch = load_results(UEQ_PAIRWISE, cache=str(tmp_path / "batch" / "cache"))
    pd.testing.assert_frame_equal(online.pairwise(), batch.pairwise())


def test_logprobs_mode_reads_the_probability_of_a_against_b(tmp_path: Path) -> None:
    with SimServer(SimSettings()) as sim:
        _run(*_ueq_flags(sim, tmp_path, "--criteria", "ind_pair", "--mode", "logprobs"))
        recorded = [v[2][0] for v in sim.stats.verdicts]
    results = load_results(
        UEQ_PAIRWISE, cache=str(tmp_path / "cache"), criteria="ind_pair", mode="logprobs"
    )
    verdicts = results.pair_verdicts
    assert verdicts["first_share"].between(0, 1).all()
    assert verdicts["first_share"].nunique() > 10  # probabilities, not 0/1 votes
    assert sorted(verdicts["verdict"]) == sorted(recorded)  # the likeliest letter


# --- four conditions: SummEval systems ------------------------------------------------------------

SYSTEMS = {"M8": 1.5, "M9": 0.5, "M10": -0.5, "M12": -1.5}  # the judge's preference


def _summeval_study(tmp_path: Path, base_url: str) -> Path:
    prompt = ROOT / "prompts" / "summeval" / "pairwise_relevance.txt"
    pairs = ", ".join(f'["{a}", "{b}"]' for a, b in combinations(SYSTEMS, 2))
    config = tmp_path / "summeval.toml"
    config.write_text(
        f'[data]\npath = "{SUMMEVAL / "summeval.jsonl"}"\nid = "index"\ngroup = "doc_id"\n'
        'condition = "system_id"\n'
        f'[judge]\nmodel = "sim"\nbase_url = "{base_url}"\n'
        "[sampling]\nn = 1\nmax_tokens = 20\n"
        "[limits]\nconcurrency = 16\n"
        f'[cache]\npath = "{tmp_path / "cache"}"\n[output]\npath = "{tmp_path / "out"}"\n'
        f'[[criteria]]\nname = "rel"\nkind = "pairwise"\nprompt = "{prompt}"\n'
        f'fields = ["source"]\ncompare = ["system_output"]\npairs = [{pairs}]\n',
        encoding="utf-8",
    )
    return config


def _strength_file(tmp_path: Path) -> Path:
    table = {
        r["system_output"]: SYSTEMS[r["system_id"]]
        for r in _records(SUMMEVAL / "summeval.jsonl")
        if r["system_id"] in SYSTEMS
    }
    path = tmp_path / "strengths.json"
    path.write_text(json.dumps(table), encoding="utf-8")
    return path


def _bradley_terry_mm(wins: np.ndarray) -> np.ndarray:
    """Hunter's (2004) MM iteration for the Bradley-Terry MLE, run to convergence:
    ``wins[i, j]`` is how often i beat j (ties counted half). Log-strengths centred on 0."""
    games = wins + wins.T
    p = np.ones(len(wins))
    for _ in range(100_000):
        denominator = (games / (p[:, None] + p[None, :])).sum(axis=1)
        updated = wins.sum(axis=1) / denominator
        updated /= np.exp(np.log(updated).mean())
        if np.max(np.abs(updated - p)) < 1e-15:
            p = updated
            break
        p = updated
    log = np.log(p)
    return log - log.mean()


def test_bradley_terry_on_four_summeval_systems(tmp_path: Path) -> None:
    records = [r for r in _records(SUMMEVAL / "summeval.jsonl") if r["system_id"] in SYSTEMS]
    pairs = list(combinations(SYSTEMS, 2))
    settings = SimSettings(pair_strengths=str(_strength_file(tmp_path)))
    with SimServer(settings) as sim:
        config = _summeval_study(tmp_path, sim.base_url)
        _run(str(config), *FAST)
        # 100 documents x 6 pairs x both orders, but where two systems wrote the same summary
        # both orders are one request (the same body), asked once.
        keys = {r.key for r in planned_requests(prepare_study(load_config(config)))}
        assert sim.stats.received == len(keys) > 1190
        combined = _combined_from_record(
            sim.stats.verdicts, records, "system_output", "doc_id", "system_id", pairs
        )
    results = load_results(config)
    strengths = results.strengths().set_index("condition")
    assert len(strengths) == 4

    # An independent fit: the wins counted from the judge's own record, Hunter's MM.
    index = {system: k for k, system in enumerate(SYSTEMS)}
    wins = np.zeros((4, 4))
    for (_, a, b), (winner, _) in combined.items():
        if winner == "tie":
            wins[index[a], index[b]] += 0.5
            wins[index[b], index[a]] += 0.5
        elif winner is not None:
            loser = b if winner == a else a
            wins[index[winner], index[loser]] += 1
    independent = _bradley_terry_mm(wins)
    fitted = np.array([strengths.loc[system, "strength"] for system in SYSTEMS])
    assert np.max(np.abs(fitted - independent)) < 1e-6
    # Ranked as the judge prefers them, each inside its interval.
    assert list(strengths.sort_values("strength", ascending=False).index) == list(SYSTEMS)
    assert list(strengths.loc[list(SYSTEMS), "rank"]) == [1, 2, 3, 4]
    assert (strengths["ci_low"] <= strengths["strength"]).all()
    assert (strengths["strength"] <= strengths["ci_high"]).all()
    # Six pairs of conditions, each with its own row of the pairwise table.
    frame = results.pairwise()
    assert len(frame) == 6 and (frame["pairs"] == 100).all()
    assert frame.set_index(["a", "b"]).loc[("M8", "M12"), "a_win_rate"] > 0.8
    # The report writes the same strengths, and says what they are.
    report = run_cli("report", str(config))
    assert report.returncode == 0, report.stderr
    (written,) = (tmp_path / "out" / "stats").glob("*_strengths.csv")
    pd.testing.assert_frame_equal(
        pd.read_csv(written)[["condition", "strength", "rank"]],
        results.strengths()[["condition", "strength", "rank"]],
        check_dtype=False,
        atol=1e-6,
    )
    (markdown,) = (tmp_path / "out").glob("*_report.md")
    assert "### Bradley-Terry strengths" in markdown.read_text(encoding="utf-8")


# --- a run killed with SIGKILL -------------------------------------------------------------------


def test_sigkill_mid_run_loses_nothing_it_stored(tmp_path: Path) -> None:
    settings = SimSettings(latency_ms=20.0, latency_sigma=0.3, position_bias=0.1)
    with SimServer(settings) as sim:
        flags = _ueq_flags(sim, tmp_path, "--concurrency", "4")
        config = apply_overrides(
            load_config(UEQ_PAIRWISE), cache=str(tmp_path / "cache"), base_url=sim.base_url
        )
        study = prepare_study(config)
        digest_to_key = {
            hashlib.sha256(orjson.dumps(r.body)).hexdigest(): r.key for r in planned_requests(study)
        }
        process = start_process("run", *flags, "--quiet", quiet=True)
        deadline = time.monotonic() + 60
        while len(sim.stats.answered) < 30:
            assert process.poll() is None, "the run ended before its kill"
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.002)
        process.kill()
        process.wait()
        while sim.stats.in_flight:
            time.sleep(0.002)
        stored = set(cache_snapshot(tmp_path / "cache"))
        assert stored <= set(digest_to_key.values())
        assert 30 - 4 <= len(stored) < len(digest_to_key)
        answered_at_kill = Counter(sim.stats.answered)
        _run(*flags)
        # Only what was not stored at the kill was asked again.
        for digest, count in sim.stats.answered.items():
            if digest_to_key[digest] in stored:
                assert count == answered_at_kill[digest] == 1
        assert set(sim.stats.answered) == set(digest_to_key)
    resumed = load_results(UEQ_PAIRWISE, cache=str(tmp_path / "cache"))
    with SimServer(settings) as sim:
        _run(*_ueq_flags(sim, tmp_path / "whole"))
    whole = load_results(UEQ_PAIRWISE, cache=str(tmp_path / "whole" / "cache"))
    pd.testing.assert_frame_equal(resumed.pairwise(), whole.pairwise())
    assert not math.isnan(whole.pairwise()["first_shown_wins"].iloc[0])


def test_a_panel_judges_the_pairs_with_each_judge_and_reports_each(tmp_path: Path) -> None:
    """Each judge of a panel asks every order of every pair itself and has its own pairwise
    table; the panel's two judges here differ in their position bias, and so do their tables."""
    text = UEQ_PAIRWISE.read_text(encoding="utf-8")
    biases = {"left": 0.4, "even": 0.0}
    with running_sims(biases, lambda: SimSettings()) as sims:
        for name, server in sims.items():
            server.settings.position_bias = biases[name]
        judges = "".join(
            f'[[judges]]\nname = "{name}"\nmodel = "sim-{name}"\nbase_url = "{s.base_url}"\n'
            for name, s in sims.items()
        )
        panel = text.replace('[judge]\nmodel = "gpt-4o-mini"\napi_key_env = "OPENAI_API_KEY"\n', "")
        panel = panel.replace('path = "records.jsonl"', f'path = "{UEQ_RECORDS}"')
        panel = panel.replace("../../prompts", str(ROOT / "prompts"))
        panel = panel.replace('path = "../../cache/ueq"', f'path = "{tmp_path / "cache"}"')
        config = tmp_path / "panel.toml"
        config.write_text(panel + judges, encoding="utf-8")
        result = run_cli("run", str(config), "--quiet", *FAST)
        assert result.returncode == 0, result.stderr
        for server in sims.values():
            assert server.stats.received == 96  # 2 criteria x 24 pairs x 2 orders, each judge
    results = load_results(config)
    tables = {
        name: member.pairwise().set_index("criterion") for name, member in results.members.items()
    }
    assert set(tables) == {"left", "even"}
    for criterion in ("ind_pair", "rel_pair"):
        left, even = tables["left"].loc[criterion], tables["even"].loc[criterion]
        assert left["first_shown_wins"] > even["first_shown_wins"] + 0.2
        assert left["first_ci_low"] > 0.5  # the biased judge's tilt is found


def test_answers_lists_the_orders_without_a_verdict_and_a_records_pairs(tmp_path: Path) -> None:
    with SimServer(SimSettings(position_bias=0.2, invalid_answers=0.3, seed=2)) as sim:
        _run(*_ueq_flags(sim, tmp_path))
    flags = [str(UEQ_PAIRWISE), "--cache", str(tmp_path / "cache")]
    overview = run_cli("answers", *flags)
    assert overview.returncode == 0, overview.stderr
    results = load_results(UEQ_PAIRWISE, cache=str(tmp_path / "cache"))
    without = int(results.pair_verdicts["verdict"].isna().sum())
    assert 0 < without < 96
    assert f"{without} of 96 pairwise orders have no verdict (none is a tie)" in overview.stdout
    reasons = results.pair_verdicts["reason"].dropna().value_counts()
    for reason, count in reasons.items():  # each reason with its count, as the table has it
        assert f"{count:6d}  {reason}" in overview.stdout
    story = run_cli("answers", *flags, "--record", "u01-mLLM", "--criterion", "rel_pair")
    assert story.returncode == 0, story.stderr
    assert "pairwise orders of record u01-mLLM (2):" in story.stdout
    assert "UEQ-mLLM shown first, UEQ-sLLM second" in story.stdout
    assert "UEQ-sLLM shown first, UEQ-mLLM second" in story.stdout
