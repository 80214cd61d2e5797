"""Loading and validating input records.

Records come from a JSON array or a JSONL file (one object per line). Everything a later stage
relies on is checked here, before the first request: the file is readable, every record is an
object with a unique id, the group and condition fields exist, and every field a criterion
inserts into its prompt is present and is text (or a number). A problem raises one
:class:`~geval_async.errors.ConfigError` naming the file, the record and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import ConfigError

_SCALAR = (str, int, float)


@dataclass(frozen=True, slots=True)
class Record:
    """One record to judge.

    Attributes:
        id: the record id, as text: a number's text as the file writes it (``1.0`` and
            ``1e0`` are two ids, a 24-digit integer keeps its digits).
        group: the group (e.g. user) or None when the study has none.
        condition: the condition or None.
        fields: the record as loaded.
        where: "line 12" or "item 12", for error messages.
    """

    id: str
    group: str | None
    condition: str | None
    fields: dict[str, Any]
    where: str


def load_records(
    path: Path,
    *,
    id_field: str = "id",
    group_field: str | None = None,
    condition_field: str | None = None,
    required_fields: Iterable[str] = (),
) -> list[Record]:
    """Read and validate every record of a JSON array or JSONL file.

    Raises:
        ConfigError: the file cannot be read or a record is invalid.
    """
    raw = _read(path, id_field)
    required = sorted(set(required_fields))
    records: list[Record] = []
    seen: dict[str, str] = {}
    for where, item, id_text in raw:
        if not isinstance(item, dict):
            raise ConfigError(f"{path}: {where}: a record must be a JSON object")
        record_id = id_text or _key_field(path, where, item, id_field, "id")
        if record_id in seen:
            raise ConfigError(
                f"{path}: {_label(where, record_id)}: duplicate id (first at {seen[record_id]}); "
                "ids must be unique"
            )
        seen[record_id] = where
        group = (
            _key_field(path, where, item, group_field, "group", record_id) if group_field else None
        )
        condition = (
            _key_field(path, where, item, condition_field, "condition", record_id)
            if condition_field
            else None
        )
        for name in required:
            value = item.get(name)
            if type(value) is str:
                continue  # the usual case, checked first: a large study has many records
            if value is None:
                raise ConfigError(
                    f"{path}: {_label(where, record_id)}: field {name!r} is missing "
                    "(a criterion inserts it into its prompt): add it to the record"
                )
            if isinstance(value, bool) or not isinstance(value, _SCALAR):
                raise ConfigError(
                    f"{path}: {_label(where, record_id)}: field {name!r} must be text or a "
                    f"number, not {type(value).__name__}"
                )
        records.append(Record(record_id, group, condition, item, where))
    if not records:
        raise ConfigError(f"{path}: no records in the file")
    return records


def _label(where: str, record_id: str | None) -> str:
    return where if record_id is None else f"{where}, record {record_id!r}"


def _key_field(
    path: Path, where: str, item: dict[str, Any], name: str, role: str, record_id: str | None = None
) -> str:
    value = item.get(name)
    if type(value) is str and value.strip():
        return value  # the usual case, checked first
    if value is None:
        raise ConfigError(
            f"{path}: {_label(where, record_id)}: {role} field {name!r} is missing "
            f"(set [data] {role} in the config if the field has another name)"
        )
    if isinstance(value, bool) or not isinstance(value, _SCALAR):
        raise ConfigError(
            f"{path}: {_label(where, record_id)}: {role} field {name!r} must be text or a "
            f"number, not {type(value).__name__}"
        )
    text = str(value)
    if not text.strip():
        raise ConfigError(f"{path}: {_label(where, record_id)}: {role} field {name!r} is empty")
    return text


def _read(path: Path, id_field: str) -> Sequence[tuple[str, Any, str | None]]:
    """Each record with where it is and, when its id is a number, the id as written."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: records file not found (check [data] path)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the records file ({exc.strerror})") from exc
    # Editors on Windows save UTF-8 with a byte order mark; JSON parsers refuse it.
    content = content.removeprefix(b"\xef\xbb\xbf")
    stripped = content.lstrip()
    if not stripped:
        raise ConfigError(f"{path}: the records file is empty")
    if stripped[:1] == b"[":
        try:
            items = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({_why(exc, content)})") from exc
        ids: list[str | None] = [None] * len(items)
        if any(_numeric_id(item, id_field) for item in items):
            written = _as_written(content)
            ids = [
                w[id_field] if _numeric_id(item, id_field) else None
                for item, w in zip(items, written, strict=True)
            ]
        return [(f"item {i}", item, ids[i - 1]) for i, item in enumerate(items, start=1)]
    rows = []
    for number, line in enumerate(content.splitlines(), start=1):
        if not line or line.isspace():  # not strip(): that copies every line
            continue
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}: line {number}: not valid JSON ({_why(exc, line)}); "
                "records must be a JSON array or one JSON object per line"
            ) from exc
        id_text = _as_written(line)[id_field] if _numeric_id(item, id_field) else None
        rows.append((f"line {number}", item, id_text))
    return rows


def _as_written(raw: bytes) -> Any:
    """``raw`` parsed again with every number kept as the text the file has. Only for records
    whose id is a number: a float (or orjson's float for an integer beyond 64 bits) has lost
    that text, so ``1.0`` and ``1e0``, or two long integers, would read as one id."""
    return json.loads(raw, parse_int=str, parse_float=str)


def _numeric_id(item: Any, id_field: str) -> bool:
    return isinstance(item, dict) and type(item.get(id_field)) in (int, float)


def _why(exc: orjson.JSONDecodeError, raw: bytes) -> str:
    """The parser's reason, or what to do when ``raw`` is not UTF-8 (a Latin-1 or UTF-16
    export, say), which the parser words as a complaint about surrogates or ``str``."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "the file is not UTF-8: save it as UTF-8"
    return str(exc)
