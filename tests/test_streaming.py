"""Records that stream: the plan made from the records file read in passes (an index of
offsets, texts read again as each walk needs them) is the plan made from records held in
memory: the same keys in the same order, the same scores.

The in-memory study is built here from the file with ``json.loads``, a list of
:class:`~geval_async.study.records.Record`, as the loader held them before it streamed.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import StudyFiles, run_study

from geval_async.errors import ConfigError
from geval_async.judging.store.read_model import open_answers
from geval_async.scoring.scores.scores import score_items
from geval_async.sim import SimServer
from geval_async.study.config import apply_overrides, load_config
from geval_async.study.plan import Study, planned_requests
from geval_async.study.prepare import prepare_study
from geval_async.study.records import Record, Records, load_records


def _held(study: Study, path: Path) -> Study:
    """``study`` with its records parsed whole from the file and kept in a list."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    records = [
        Record(row["id"], row["user"], row["condition"], row, f"line {number}")
        for number, row in enumerate(rows, start=1)
    ]
    return dataclasses.replace(study, records=records)  # type: ignore[arg-type]


def _scores(study: Study) -> list[tuple[object, ...]]:
    with open_answers(study) as answers:
        return [
            (s.record_id, s.group, s.condition, s.criterion, s.status, s.weighted_score, s.answers)
            for s in score_items(study, answers)
        ]


@pytest.mark.parametrize("limit", [None, 7])
def test_streamed_plan_equals_the_plan_held_in_memory(
    sim: SimServer, study: StudyFiles, limit: int | None
) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    config = apply_overrides(load_config(study.config), limit=limit)
    streamed = prepare_study(config)
    assert isinstance(streamed.records, Records)
    held = _held(streamed, study.records)

    for send in (False, True):  # plan order (status, scoring) and send order (run)
        keys = [r.key for r in planned_requests(streamed, send=send)]
        assert keys == [r.key for r in planned_requests(held, send=send)]
        assert len(keys) == 2 * (limit or study.n_records)
    assert [r.fields for r in streamed.selected_records] == [
        r.fields for r in held.selected_records
    ]
    scores = _scores(streamed)
    assert scores == _scores(held)
    assert sum(1 for s in scores if s[4] == "scored") == 2 * (limit or study.n_records)


def test_a_record_is_read_by_its_offset(study: StudyFiles) -> None:
    records = load_records(study.records, group_field="user", condition_field="condition")
    rows = [json.loads(line) for line in study.records.read_text().splitlines()]
    assert records[5].fields == rows[5] and records[5].where == "line 6"
    assert records[-1].id == rows[-1]["id"]
    assert [r.id for r in records[3:6]] == [row["id"] for row in rows[3:6]]
    assert records.ids == [row["id"] for row in rows]
    assert records.conditions[:2] == ["A", "B"]


def test_a_reader_reads_records_by_offset_through_one_open_file(study: StudyFiles) -> None:
    records = load_records(study.records, group_field="user", condition_field="condition")
    tail = records[2:]
    with tail.reader() as reader:
        # Out of order and again: each the record iteration gives at that position.
        assert [reader[i] for i in (3, 0, 3, len(tail) - 1)] == [
            tail[3], tail[0], tail[3], tail[-1]
        ]  # fmt: skip
        with pytest.raises(IndexError):
            reader[len(tail)]
        rows = [json.loads(line) for line in study.records.read_text().splitlines()]
        rows.reverse()
        study.records.write_text("".join(json.dumps(r) + "\n" for r in rows))
        with pytest.raises(ConfigError, match="records file changed"):
            reader[1]


def test_records_changed_under_the_study_is_one_clear_error(study: StudyFiles) -> None:
    records = load_records(study.records, group_field="user", condition_field="condition")
    rows = [json.loads(line) for line in study.records.read_text().splitlines()]
    rows.reverse()  # the same lines, other offsets and ids
    study.records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ConfigError, match="records file changed") as caught:
        list(records)
    assert str(study.records) in str(caught.value)


def test_raw_exports_that_fail_while_rendered_leave_every_output_as_it_was(
    sim: SimServer, study: StudyFiles
) -> None:
    from geval_async.scoring.output.writer import write_outputs
    from geval_async.scoring.scores.results import load_results

    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    written = write_outputs(load_results(study.config), ["scores"])
    raw = [p for p in written if p.parent.name == "raw"]
    assert len(raw) == 2 and json.loads(raw[0].read_bytes())["items"][0]["messages"]
    before = {p: p.read_bytes() for p in written}
    results = load_results(study.config)
    rows = [json.loads(line) for line in study.records.read_text().splitlines()]
    rows.reverse()  # the raw exports read the prompts' texts again: now they differ
    study.records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ConfigError, match="records file changed"):
        write_outputs(results, ["scores"])
    assert {p: p.read_bytes() for p in written} == before
    assert sorted(p.name for p in study.output.rglob("*")) == sorted(
        [p.name for p in written] + ["raw", "scores"]
    )  # no temporary file left behind


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_reads_the_same_records(tmp_path: Path, end: bytes) -> None:
    rows = [{"id": "a", "t": "x"}, {"id": 2, "t": "y"}, {"id": 2.0, "t": "z"}]
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + end.join(json.dumps(r).encode() for r in rows) + end)
    records = load_records(path, required_fields=["t"])
    assert [(r.id, r.fields["t"], r.where) for r in records] == [
        ("a", "x", "line 1"),
        ("2", "y", "line 2"),
        ("2.0", "z", "line 3"),
    ]
    assert records[2].fields == {"id": 2.0, "t": "z"}
