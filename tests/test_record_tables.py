"""Records from CSV, TSV and Parquet files: read in passes as JSONL is (each row's place kept,
its fields read again as a walk needs them), with the same checks and one-line errors.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import StudyFiles

from geval_async.errors import ConfigError
from geval_async.study.records import load_records

FORMS = ["csv", "tsv", "parquet"]


def write_table(study: StudyFiles, form: str, rows: list[dict[str, str]] | None = None) -> Path:
    """The study's records (or ``rows``) as a table of ``form``; Parquet in row groups of 5."""
    frame = pd.DataFrame(rows) if rows is not None else pd.read_json(study.records, lines=True)
    path = study.root / f"records.{form}"
    if form == "parquet":
        frame.to_parquet(path, row_group_size=5)
    else:
        frame.to_csv(path, index=False, sep="\t" if form == "tsv" else ",")
    return path


@pytest.mark.parametrize("form", FORMS)
def test_a_table_reads_the_records_jsonl_reads(study: StudyFiles, form: str) -> None:
    table = load_records(write_table(study, form), group_field="user", condition_field="condition")
    jsonl = load_records(study.records, group_field="user", condition_field="condition")
    assert [r.fields for r in table] == [r.fields for r in jsonl]
    assert table.ids == jsonl.ids and table.conditions == jsonl.conditions
    # By place, a slice and a reader: each the record a walk gives at that position.
    assert table[17].fields == jsonl[17].fields
    assert [r.id for r in table[4:12]] == jsonl.ids[4:12]
    with table[2:].reader() as reader:
        assert [reader[i].id for i in (9, 0, 9)] == [jsonl[11].id, jsonl[2].id, jsonl[11].id]
    # A row is named by its line (the header is line 1), a Parquet row by its number.
    assert table[0].where == ("row 1" if form == "parquet" else "line 2")


def test_quoted_cells_a_bom_and_blank_lines_read_as_written(tmp_path: Path) -> None:
    path = tmp_path / "records.csv"
    path.write_bytes(
        b'\xef\xbb\xbfid,text\r\n007,"two\nlines, a ""quote"""\r\n\r\n7,4.50\r\n8,\r\n'
    )
    records = load_records(path, required_fields=["text"])
    assert [(r.id, r.fields["text"], r.where) for r in records] == [
        ("007", 'two\nlines, a "quote"', "line 2"),
        ("7", "4.50", "line 5"),
        ("8", "", "line 6"),
    ]
    assert records[1].fields == {"id": "7", "text": "4.50"}


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b"id,text\nr1,a\nr1,b\n", "line 3, record 'r1': duplicate id (first at line 2)"),
        (b"id,text\nr1,a,b\n", "line 2: 3 cells, but the header names 2 columns"),
        (b"id,text\nr1\n", "line 2, record 'r1': field 'text' is missing"),
        (b"id,text\n,a\n", "line 2: id field 'id' is empty"),
        (b'id,text\nr1,"open\n', "line 2: not valid CSV (unexpected end of data)"),
        (b"id,text,id\nr1,a,b\n", "line 1: column 'id' is named twice"),
        (b"id,text\nr1,caf\xe9\n", "line 2: the file is not UTF-8: save it as UTF-8"),
        (b"", "the records file is empty"),
        (b"id,text\n", "no records in the file"),
    ],
)
def test_a_bad_csv_is_one_line_naming_file_line_and_field(
    tmp_path: Path, content: bytes, error: str
) -> None:
    path = tmp_path / "records.csv"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as raised:
        load_records(path, required_fields=["text"])
    assert str(raised.value).startswith(f"{path}: {error}"), str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_parquet_null_is_a_missing_field_and_a_number_id_its_text(tmp_path: Path) -> None:
    path = tmp_path / "records.parquet"
    pd.DataFrame({"id": [1, 2], "text": ["a", None]}).to_parquet(path)
    with pytest.raises(ConfigError) as raised:
        load_records(path, required_fields=["text"])
    assert str(raised.value) == (
        f"{path}: row 2, record '2': field 'text' is missing (a criterion inserts it into its "
        "prompt): add it to the record"
    )
    assert load_records(path).ids == ["1", "2"]


@pytest.mark.parametrize("form", FORMS)
def test_a_table_changed_under_the_study_is_one_clear_error(study: StudyFiles, form: str) -> None:
    path = write_table(study, form)
    records = load_records(path, group_field="user", condition_field="condition")
    rows = [json.loads(line) for line in study.records.read_text().splitlines()]
    write_table(study, form, rows[::-1])  # the same rows, other places and ids
    with pytest.raises(ConfigError, match="records file changed") as raised:
        list(records)
    assert str(raised.value).startswith(f"{path}: ")


def test_parquet_without_pyarrow_names_the_extra_to_install(
    study: StudyFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_table(study, "parquet")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # as a plain install has it
    with pytest.raises(ConfigError) as raised:
        load_records(path)
    assert str(raised.value) == (
        f"{path}: reading Parquet records needs pyarrow: pip install 'geval-async[parquet]'"
    )
