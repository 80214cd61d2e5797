"""Scores in, for meta-evaluation: human scores from record fields, judge scores from the cache
or from another judge's output file (CSV or JSONL), paired per record and criterion.

A bad judge file raises one :class:`~geval_async.errors.ConfigError` naming the file, the row
and the column.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from ..errors import ConfigError
from ..study.records import Record

PAIR_COLUMNS = ["record_id", "group", "condition", "criterion", "human", "judge"]
_NAN = float("nan")
# Cells of a judge file that mean "no score" rather than a bad one.
_EMPTY = {"", "nan", "na", "n/a", "null", "none"}


def field_value(fields: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` ("scores.coherence") of a record; KeyError if absent.

    A key that itself contains the dots ("scores.coherence" at the top level) wins.
    """
    if path in fields:
        return fields[path]
    value: Any = fields
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(path)
        value = value[part]
    return value


def human_scores(
    records: Iterable[Record], human: Mapping[str, str], source: Path | str
) -> pd.DataFrame:
    """The human score of every record on every criterion ``human`` maps to a field path.

    Returns:
        Columns record_id, group, condition, criterion, human (NaN where the field is null).

    Raises:
        ConfigError: a record lacks the field, or its value is not a number.
    """
    rows = []
    for record in records:
        for criterion, path in human.items():
            label = f"{source}: {record.where}, record {record.id!r}"
            try:
                value = field_value(record.fields, path)
            except KeyError:
                raise ConfigError(
                    f"{label}: no field {path!r} (the human score of {criterion!r} named by "
                    "[meta] human): fix the path or the record"
                ) from None
            rows.append(
                {
                    "record_id": record.id,
                    "group": record.group,
                    "condition": record.condition,
                    "criterion": criterion,
                    "human": _number(value, f"{label}: field {path!r}"),
                }
            )
    return pd.DataFrame(rows, columns=PAIR_COLUMNS[:5])


def _number(value: Any, where: str) -> float:
    """A score as float; None or an empty cell is NaN; anything else non-numeric raises."""
    if value is None:
        return _NAN
    if isinstance(value, str):
        if value.strip().lower() in _EMPTY:
            return _NAN
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"{where}: {value!r} is not a number") from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: {value!r} is not a number")
    else:
        number = float(value)
    if math.isnan(number):
        return _NAN
    if not math.isfinite(number):
        raise ConfigError(f"{where}: {value!r} is not a finite number")
    return number


def judge_scores(long: pd.DataFrame) -> pd.DataFrame:
    """This tool's weighted scores (``StudyResults.long``) as record_id, criterion, judge."""
    return long[["record_id", "criterion", "score"]].rename(columns={"score": "judge"})


def read_judge_file(
    path: Path | str, *, id_field: str, criteria: Sequence[str], record_ids: Collection[str]
) -> pd.DataFrame:
    """Another judge's scores: a CSV or JSONL file, one row per record.

    The id column is named like the config's ``[data] id``; each criterion's scores are in a
    column named after the criterion (criteria without a column are simply absent). An empty
    or null score is a missing score.

    Returns:
        Columns record_id, criterion, judge (one row per record and criterion present).

    Raises:
        ConfigError: the file cannot be read, has no id column or no criterion column, or a
            row has a missing, unknown or repeated id or a score that is not a number; the
            message names the file, the row and the column.
    """
    path = Path(path)
    try:
        content = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{path}: judge file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the judge file ({exc})") from exc
    json_like = path.suffix.lower() in (".jsonl", ".ndjson", ".json") or (
        path.suffix.lower() != ".csv" and content.lstrip()[:1] in ("{", "[")
    )
    rows = _json_rows(path, content) if json_like else _csv_rows(path, content)
    if not rows:
        raise ConfigError(f"{path}: the judge file has no rows")
    columns: dict[str, None] = {}
    for _, _, row in rows:
        columns.update(dict.fromkeys(row))
    if id_field not in columns:
        raise ConfigError(
            f"{path}: no column {id_field!r} (the config's [data] id); "
            f"the file has {', '.join(map(repr, columns)) or 'no columns'}"
        )
    present = [c for c in criteria if c in columns]
    if not present:
        raise ConfigError(
            f"{path}: no column named after a criterion ({', '.join(criteria)}); "
            f"the file has {', '.join(map(repr, columns))}"
        )
    known = set(record_ids)
    seen: dict[str, str] = {}
    out = []
    for number, line, row in rows:
        where = f"{path}: row {number} (line {line})"
        record_id = _record_id(row.get(id_field), known)
        if record_id is None:
            raise ConfigError(f"{where}, column {id_field!r}: the record id is missing")
        if record_id not in known:
            raise ConfigError(
                f"{where}, column {id_field!r}: {record_id!r} is not the id of "
                "any record of the study"
            )
        if record_id in seen:
            raise ConfigError(
                f"{where}, column {id_field!r}: id {record_id!r} repeats {seen[record_id]}"
            )
        seen[record_id] = f"row {number}"
        for criterion in present:
            score = _number(row.get(criterion), f"{where}, column {criterion!r}")
            out.append({"record_id": record_id, "criterion": criterion, "judge": score})
    return pd.DataFrame(out, columns=["record_id", "criterion", "judge"])


def _record_id(value: Any, known: Collection[str]) -> str | None:
    if value is None or isinstance(value, bool | dict | list):
        return None
    text = str(value).strip()
    if not text:
        return None
    # An id written 7.0 (a JSON float, a spreadsheet's export) still names record 7.
    if text not in known and isinstance(value, float) and value.is_integer():
        return str(int(value))
    return text


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


def pair_scores(human: pd.DataFrame, judge: pd.DataFrame) -> pd.DataFrame:
    """Human and judge scores side by side, one row per record and criterion of ``human``
    (the judge score NaN where the judge has none)."""
    pairs = human.merge(judge, on=["record_id", "criterion"], how="left", validate="one_to_one")
    return pairs[PAIR_COLUMNS]
