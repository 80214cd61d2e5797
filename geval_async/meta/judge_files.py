"""Another judge's scores from a file (CSV or JSONL), matched to the study's records.

A row is matched to a record by one or more key columns (``keys``: record field -> column; by
default the id, in a column named like ``[data] id``), and each criterion's score is read from
a column (``scores``: criterion -> column; by default the column named after the criterion).
Key cells are compared as text, and failing that as numbers, the same way for every format: a
CSV ``0.0`` and a JSON ``0.0`` both name record ``0``.

A record without a row, or with an empty or null cell, is *not covered*; a cell holding text
that is not a number (``"error"``, ``"4 stars"``) is *unparseable*. Both are left out and
counted apart. Anything that says the file or the mapping is wrong (no such column, a row that
names no record or repeats one, keys that do not tell records apart, a column with no number at
all) raises one :class:`~geval_async.errors.ConfigError` naming the file, the row and the column.
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from ..errors import ConfigError
from ..study.human_labels import EMPTY_CELLS, field_value
from ..study.records import Record
from ..study.settings import JudgeFile

SCORED, UNPARSEABLE = "scored", "unparseable"
JUDGE_COLUMNS = ["record_id", "criterion", "judge", "status", "cell"]


@dataclass(frozen=True)
class JudgeFileScores:
    """A judge file as read: its digest, the mapping used, and one row per scored cell.

    Attributes:
        frame: record_id, criterion, judge (NaN when unparseable), status (``scored`` or
            ``unparseable``) and cell (where an unparseable cell is and what it holds).
    """

    path: Path
    sha256: str
    keys: dict[str, str]
    scores: dict[str, str]
    frame: pd.DataFrame


def read_judge_file(
    judge: JudgeFile | Path | str,
    *,
    records: Sequence[Record],
    id_field: str,
    criteria: Sequence[str],
) -> JudgeFileScores:
    """Read a judge file and match its rows to ``records``.

    Args:
        judge: the file and its column mapping (a bare path: the id and criterion-named columns).
        records: every record of the study (rows for records outside ``--limit`` are fine).
        id_field: the config's ``[data] id``: as a key it means the record id.
        criteria: the criteria to read (those with human scores).

    Raises:
        ConfigError: see the module docstring.
    """
    if not isinstance(judge, JudgeFile):
        judge = JudgeFile(Path(judge))
    path = judge.path
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: judge file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the judge file ({exc.strerror})") from exc
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read the judge file ({exc})") from exc
    json_like = path.suffix.lower() in (".jsonl", ".ndjson", ".json") or (
        path.suffix.lower() != ".csv" and text.lstrip()[:1] in ("{", "[")
    )
    rows = _json_rows(path, text) if json_like else _csv_rows(path, text)
    if not rows:
        raise ConfigError(f"{path}: the judge file has no rows")
    present: dict[str, None] = {}
    for _, _, row in rows:
        present.update(dict.fromkeys(row))
    keys = dict(judge.keys) or {id_field: id_field}
    scores = dict(judge.scores) or {c: c for c in criteria if c in present}
    _check_columns(path, present, keys, scores, judge, id_field, criteria)
    scores = {c: column for c, column in scores.items() if c in criteria}
    index = _RecordIndex(path, records, keys, id_field)
    seen: dict[str, str] = {}
    out = []
    for number, line, row in rows:
        where = f"{path}: row {number} (line {line})"
        record_id = index.find(row, where)
        if record_id in seen:
            raise ConfigError(f"{where}, {index.describe(row)} repeats {seen[record_id]}")
        seen[record_id] = f"row {number}"
        for criterion, column in scores.items():
            cell = row.get(column)
            score, status = _score(cell, f"{where}, column {column!r}")
            if status is not None:
                note = f"row {number}: {cell!r}" if status == UNPARSEABLE else ""
                out.append((record_id, criterion, score, status, note))
    frame = pd.DataFrame(out, columns=JUDGE_COLUMNS)
    for criterion, column in scores.items():
        cells = frame[frame["criterion"] == criterion]
        if len(cells) and (cells["status"] == UNPARSEABLE).all():
            raise ConfigError(
                f"{path}: column {column!r} ({criterion}) holds no number "
                f"({cells['cell'].iloc[0]}): is it the score column? Map it with "
                f'[meta.judges.NAME] scores = {{ {criterion} = "COLUMN" }}'
            )
    digest = hashlib.sha256(content).hexdigest()
    return JudgeFileScores(path, digest, keys, scores, frame)


def _check_columns(
    path: Path,
    present: Mapping[str, None],
    keys: Mapping[str, str],
    scores: Mapping[str, str],
    judge: JudgeFile,
    id_field: str,
    criteria: Sequence[str],
) -> None:
    has = ", ".join(map(repr, present)) or "no columns"
    for field, column in keys.items():
        if column not in present:
            role = (
                "the config's [data] id"
                if not judge.keys
                else f"the key holding the records' {field!r}"
            )
            hint = (
                ""
                if judge.keys
                else ': map its key columns with [meta.judges.NAME] keys = { field = "column" }'
            )
            raise ConfigError(f"{path}: no column {column!r} ({role}); the file has {has}{hint}")
    if not scores:
        raise ConfigError(
            f"{path}: no column named after a criterion ({', '.join(criteria)}); the file "
            f'has {has}: map them with [meta.judges.NAME] scores = {{ criterion = "COLUMN" }}'
        )
    for criterion, column in scores.items():
        if column not in present:
            raise ConfigError(
                f"{path}: no column {column!r} (the scores of {criterion}); the file has {has}"
            )


def _score(value: Any, where: str) -> tuple[float, str | None]:
    """A cell as (score, status): status None for no score stated (not covered)."""
    if value is None:
        return math.nan, None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in EMPTY_CELLS:
            return math.nan, None
        try:
            number = float(text)
        except ValueError:
            return math.nan, UNPARSEABLE
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: {value!r} is not a number")
    else:
        number = float(value)
    if math.isnan(number):
        return math.nan, None
    if not math.isfinite(number):
        raise ConfigError(f"{where}: {value!r} is not a finite number")
    return number, SCORED


def key_text(value: Any) -> str | None:
    """A key cell or record field as text (None when absent or not a scalar)."""
    if value is None or isinstance(value, bool | dict | list):
        return None
    text = str(value).strip()
    return text or None


def key_number(text: str) -> str:
    """The numeric form of a key (``0.0``, ``0`` and ``00`` -> ``0``), or the text itself."""
    try:
        number = Decimal(text)
    except InvalidOperation:
        return text
    if not number.is_finite():
        return text
    if number == number.to_integral_value():
        return str(int(number))
    return str(number.normalize())


class _RecordIndex:
    """Records by their key values: exact text first, then the numeric form."""

    def __init__(
        self, path: Path, records: Iterable[Record], keys: Mapping[str, str], id_field: str
    ):
        self.path, self.keys, self.id_field = path, keys, id_field
        self.exact: dict[tuple[str, ...], str] = {}
        self.numeric: dict[tuple[str, ...], str | None] = {}
        for record in records:
            values = tuple(self._record_value(record, field) for field in keys)
            if values in self.exact:
                fields = ", ".join(keys)
                raise ConfigError(
                    f"{path}: the keys ({fields}) do not tell records {self.exact[values]!r} "
                    f"and {record.id!r} apart (both {self._pairs(values)}): add a key column, "
                    "e.g. [meta.judges.NAME] keys = { doc_id = ..., system_id = ... }"
                )
            self.exact[values] = record.id
            numeric = tuple(key_number(v) for v in values)
            # Two records equal as numbers ("7" and "07") are matched by exact text only.
            self.numeric[numeric] = None if numeric in self.numeric else record.id

    def _record_value(self, record: Record, field: str) -> str:
        if field == self.id_field:
            return record.id
        try:
            value = key_text(field_value(record.fields, field))
        except KeyError:
            value = None
        if value is None:
            raise ConfigError(
                f"{self.path}: record {record.id!r} ({record.where}) has no field {field!r}, "
                'a key of this judge file: fix keys = { record_field = "column" }'
            )
        return value

    def _pairs(self, values: Sequence[str]) -> str:
        return ", ".join(f"{f} = {v!r}" for f, v in zip(self.keys, values, strict=True))

    def describe(self, row: Mapping[str, Any]) -> str:
        if len(self.keys) == 1:
            field, column = next(iter(self.keys.items()))
            value = key_text(row.get(column))
            noun = "id" if field == self.id_field else field
            return f"column {column!r}: {noun} {value!r}"
        return ", ".join(f"{c} = {key_text(row.get(c))!r}" for c in self.keys.values())

    def find(self, row: Mapping[str, Any], where: str) -> str:
        values = []
        for field, column in self.keys.items():
            value = key_text(row.get(column))
            if value is None:
                noun = "the record id" if field == self.id_field else f"the key {field!r}"
                raise ConfigError(f"{where}, column {column!r}: {noun} is missing")
            values.append(value)
        found = self.exact.get(tuple(values)) or self.numeric.get(
            tuple(key_number(v) for v in values)
        )
        if found is None:
            if len(self.keys) == 1:
                field, column = next(iter(self.keys.items()))
                what = "the id" if field == self.id_field else f"the {field!r}"
                raise ConfigError(
                    f"{where}, column {column!r}: {values[0]!r} is not {what} of any "
                    "record of the study"
                )
            raise ConfigError(
                f"{where}: no record of the study has {self._pairs(values)} "
                f"(columns {', '.join(map(repr, self.keys.values()))})"
            )
        return found


def _csv_rows(path: Path, content: str) -> list[tuple[int, int, dict[str, Any]]]:
    reader = csv.DictReader(content.splitlines(keepends=True))
    rows = []
    try:
        for number, row in enumerate(reader, start=1):
            if None in row:
                raise ConfigError(
                    f"{path}: row {number} (line {reader.line_num}) has more "
                    "cells than the header has columns"
                )
            rows.append((number, reader.line_num, {k.strip(): v for k, v in row.items()}))
    except csv.Error as exc:
        raise ConfigError(f"{path}: line {reader.line_num}: not valid CSV ({exc})") from exc
    return rows


def _json_rows(path: Path, content: str) -> list[tuple[int, int, dict[str, Any]]]:
    if content.lstrip()[:1] == "[":
        try:
            items = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
        numbered = [(i, i, item) for i, item in enumerate(items, start=1)]
    else:
        numbered = []
        for line, text in enumerate(content.splitlines(), start=1):
            if not text.strip():
                continue
            try:
                numbered.append((len(numbered) + 1, line, orjson.loads(text)))
            except orjson.JSONDecodeError as exc:
                raise ConfigError(
                    f"{path}: line {line}: not valid JSON ({exc}); a judge file "
                    "is CSV or one JSON object per line"
                ) from exc
    for number, line, item in numbered:
        if not isinstance(item, dict):
            raise ConfigError(f"{path}: row {number} (line {line}): must be a JSON object")
    return numbered
