"""Scores held in columns (numbers in arrays, each item rebuilt when read) are the scores
held as one object per item: the same items in the same order, the same long table, samples,
invalid shares, tallies, self-consistency and n curve, and the same output files.

The reference is computed here from :func:`~geval_async.scoring.scores.scores.score_items` kept in
a plain list, as the scoring stage held them before it used columns.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import StudyFiles, run_study

from geval_async.judging.store.read_model import open_answers
from geval_async.scoring.scores.columns import ScoreColumns
from geval_async.scoring.scores.readings import invalid_shares, samples_frame, share_differences
from geval_async.scoring.scores.results import StudyResults, load_results
from geval_async.scoring.scores.scores import ItemScore, distribution_json, score_items, tally
from geval_async.scoring.scores.tables import LONG_COLUMNS, conditions_present, write_long_csv
from geval_async.scoring.scores.trust import consistency_frame, n_curve_frame
from geval_async.sim import SimServer, SimSettings
from geval_async.study.config import EvalConfig, load_config
from geval_async.study.prepare import prepare_study


def long_frame(held: list[ItemScore]) -> pd.DataFrame:
    """The long table, one row an item object: the reference the columns must equal."""
    rows = [
        {
            "record_id": s.record_id,
            "group": s.group,
            "condition": s.condition,
            "criterion": s.criterion,
            "score": np.nan if s.weighted_score is None else s.weighted_score,
            "se": np.nan if s.se is None else s.se,
            "status": s.status,
            "valid": s.valid,
            "invalid": s.invalid,
            "valid_mass": np.nan if s.distribution is None else s.distribution.valid_mass,
            "distribution": distribution_json(s),
        }
        for s in held
    ]
    return pd.DataFrame(rows, columns=LONG_COLUMNS)


def group_tables(long: pd.DataFrame, config: EvalConfig) -> dict[str, pd.DataFrame]:
    """Per criterion, the mean score per group (else record) and condition, by pandas'
    groupby on the long table: the reference for the tables made from columns."""
    by_group = bool(long["group"].notna().any())
    keys = [
        long["criterion"],
        (long["group"] if by_group else long["record_id"]).rename("_group"),
        long["condition"].fillna("all").rename("_condition"),
    ]
    means = long["score"].groupby(keys, sort=False, dropna=False).mean()
    groups = list(pd.unique(long["group"] if by_group else long["record_id"]))
    seen = list(pd.unique(long["condition"].dropna()))
    conditions = [c for c in config.stats.conditions if c in seen]
    conditions = (conditions + [c for c in seen if c not in conditions]) or ["all"]
    tables = {}
    for criterion in config.criteria:
        rows = means[means.index.get_level_values("criterion") == criterion.name]
        table = rows.droplevel("criterion").unstack("_condition")
        table = table.reindex(index=groups, columns=conditions).astype(float)
        table.index.name = config.data.group_field or "record"
        table.columns.name = None
        tables[criterion.name] = table
    return tables


def design_is_paired(long: pd.DataFrame, config: EvalConfig) -> bool:
    """The same groups under both compared conditions, read from the long table."""
    if len(config.stats.conditions) != 2 or long["group"].isna().all():
        return False
    a, b = config.stats.conditions
    groups_a = set(long.loc[long["condition"] == a, "group"])
    groups_b = set(long.loc[long["condition"] == b, "group"])
    return bool(groups_a) and groups_a == groups_b


def _held(config: Path) -> tuple[StudyResults, list[ItemScore]]:
    """The results as loaded, and the same items scored into a list."""
    results = load_results(config)
    with open_answers(prepare_study(load_config(config))) as answers:
        held = list(score_items(answers.study, answers))
    return results, held


def _same_as_held(results: StudyResults, held: list[ItemScore]) -> None:
    assert isinstance(results.scores, ScoreColumns)
    # Before the long table is built: the group tables from its score columns alone.
    assert "long" not in results.__dict__
    for name, table in group_tables(long_frame(held), results.config).items():
        pd.testing.assert_frame_equal(results.group_tables[name], table)
    # The design and the conditions present, read from the records' codes, as from the frame.
    frame = long_frame(held)
    assert results.paired_design == design_is_paired(frame, results.config)
    assert conditions_present(results.columns) == set(frame["condition"].dropna())
    assert "long" not in results.__dict__
    assert len(results.scores) == len(held)
    assert list(results.scores) == held
    assert [results.scores[i] for i in (0, -1, len(held) // 2)] == [
        held[0],
        held[-1],
        held[len(held) // 2],
    ]
    assert list(results.scores.items(held[0].criterion)) == [
        s for s in held if s.criterion == held[0].criterion
    ]
    pd.testing.assert_frame_equal(results.long, long_frame(held))
    assert results.long.to_csv(index=False) == long_frame(held).to_csv(index=False)
    for rows in (1, 7, 100_000):  # the long table written a chunk of items at a time
        out = io.BytesIO()
        write_long_csv(out, results.scores, rows=rows)
        assert out.getvalue() == long_frame(held).to_csv(index=False).encode()
    pd.testing.assert_frame_equal(results.samples, samples_frame(held))
    pd.testing.assert_frame_equal(results.invalid_shares(), invalid_shares(samples_frame(held)))
    stats = results.config.stats
    assert results.share_differences() == share_differences(
        samples_frame(held), stats.conditions, stats.alpha
    )
    assert results.tallies == tally(held)
    study = results.study
    pd.testing.assert_frame_equal(results.consistency, consistency_frame(study, held))
    pd.testing.assert_frame_equal(results.n_curve, n_curve_frame(study, held))


def test_columns_hold_what_a_list_of_item_scores_holds(study: StudyFiles) -> None:
    # Invalid answers (reasons, texts), and the second half of the records never asked
    # (missing items): every status but refused, every column with something in it.
    with SimServer(SimSettings(invalid_answers=0.3, seed=5)) as server:
        study.write_config(server.base_url)
        assert run_study(study, "--limit", str(study.n_records // 2)).returncode == 0
    results, held = _held(study.config)
    assert {s.status for s in held} >= {"scored", "missing"}
    assert any(r is not None for s in held for r in s.reasons)
    assert results.invalid_shares()["invalid"].sum() > 0
    _same_as_held(results, held)
    # A list given to StudyResults is put in columns, and reads the same.
    again = StudyResults(results.study, held, results.simulated, results.corrupted)
    assert isinstance(again.scores, ScoreColumns)
    _same_as_held(again, held)


@pytest.mark.parametrize("mode", ["samples", "logprobs"])
def test_rubric_and_option_criteria_in_columns(tmp_path: Path, mode: str) -> None:
    from test_methods import _body_logprobs, _body_samples, _store, _study

    config = _study(tmp_path, mode)
    if mode == "samples":
        answers = {
            ("empathy", None): _body_samples(["2", "3", "x", "2"]),
            ("fair", "a"): _body_samples(["Yes", "Yes", "No", "Yes"]),
            ("fair", "b"): _body_samples(["Yes", "maybe", "Yes", "No"]),
            ("hate", "a"): _body_samples(["No"] * 4),
            ("hate", "b"): _body_samples(["No", "No", "Yes", "No"]),
            ("clear", "a"): _body_samples(["Yes"] * 4),
            ("clear", "b"): _body_samples(["No"] * 4),
            ("clear", "c"): _body_samples(["Yes", "No", "Yes", "Yes"]),
        }
    else:
        answers = {
            ("empathy", None): _body_logprobs({"1": 0.2, "2": 0.5, "3": 0.3}),
            **{
                (c, r): _body_logprobs({"Yes": 0.7, "No": 0.3})
                for c, r in [
                    ("fair", "a"),
                    ("fair", "b"),
                    ("hate", "a"),
                    ("hate", "b"),
                    ("clear", "a"),
                    ("clear", "b"),
                    ("clear", "c"),
                ]
            },
        }
    _store(config, answers)
    results, held = _held(config)
    assert any(s.parts for s in held) and any(not s.parts for s in held)
    _same_as_held(results, held)
    # The raw exports read the items back from the columns: the prompt and the answers.
    raw = {c: json.loads(d) for c, d in _raw(results).items()}
    assert raw["empathy"]["items"][0]["answers"] == list(held[0].answers)
    assert [r["rubric"] for r in raw["fair"]["items"][0]["rubrics"]] == ["a", "b"]


def _raw(results: StudyResults) -> dict[str, bytes]:
    """Per criterion, the raw export as ``score`` writes it, from the columns; the same bytes
    from the items held in a list."""
    from geval_async.scoring.output.report import write_raw_document

    documents = {}
    for criterion in results.study.criteria:
        by_columns, by_list = io.BytesIO(), io.BytesIO()
        write_raw_document(by_columns, results.study, criterion.name, results.scores)
        write_raw_document(by_list, results.study, criterion.name, list(results.scores))
        assert by_columns.getvalue() == by_list.getvalue()
        documents[criterion.name] = by_columns.getvalue()
    return documents


async def test_a_panels_pooled_scores_in_columns_with_their_flags(study: StudyFiles) -> None:
    """The panel's pooled items are held in columns as one judge's are: the same items as
    pooling the judges' scores into a list, the long table with ``judges_scored`` and
    ``judges_missing`` (a judge that writes no rating in most answers leaves records to
    the others, flagged), and the invalid shares of every judge's answers."""
    from contextlib import ExitStack

    from test_panel_scores import judge_all, write_panel

    from geval_async.scoring.panel.pooled import pool_items
    from geval_async.scoring.panel.results import load_panel

    settings = [SimSettings(seed=0), SimSettings(seed=1), SimSettings(seed=2, invalid_answers=0.8)]
    with ExitStack() as stack:
        sims = [stack.enter_context(SimServer(s)) for s in settings]
        config = write_panel(study, sims, 3)
        await judge_all(config)
    panel = load_panel(config).panel
    judges = panel.members
    held = pool_items({name: list(r.scores) for name, r in judges.items()}, panel.config.panel)
    columns = panel.scores
    assert isinstance(columns, ScoreColumns) and columns.panel is not None
    assert list(columns) == held
    assert columns[len(held) // 2] == held[len(held) // 2]
    # The long table as the panel made it from its item objects: the flags after the status.
    reference = long_frame(held)
    at = reference.columns.get_loc("status") + 1
    reference.insert(at, "judges_scored", [len(s.judges_scored) for s in held])
    reference.insert(at + 1, "judges_missing", [",".join(s.judges_missing) for s in held])
    assert (reference["judges_missing"] != "").any()  # some records flagged
    for name, table in group_tables(reference, panel.config).items():
        pd.testing.assert_frame_equal(panel.group_tables[name], table)
    pd.testing.assert_frame_equal(panel.long, reference)
    for rows in (1, 7, 100_000):
        out = io.BytesIO()
        write_long_csv(out, columns, rows=rows)
        assert out.getvalue() == reference.to_csv(index=False).encode()
    assert panel.tallies == tally(held)
    every = pd.concat([r.samples for r in judges.values()], ignore_index=True)
    pd.testing.assert_frame_equal(panel.invalid_shares(), invalid_shares(every))
    stats = panel.config.stats
    assert panel.share_differences() == share_differences(every, stats.conditions, stats.alpha)
