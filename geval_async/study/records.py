"""Loading and validating input records.

Records come from a JSON array or a JSONL file (one object per line). Everything a later stage
relies on is checked here, before the first request: the file is readable, every record is an
object with a unique id, the group and condition fields exist, and every field a criterion
inserts into its prompt is present and is text (or a number). A problem raises one
:class:`~geval_async.errors.ConfigError` naming the file, the record and the field.
"""

from __future__ import annotations

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
        id: the record id, as text.
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
    raw = _read(path)
    required = sorted(set(required_fields))
    records: list[Record] = []
    seen: dict[str, str] = {}
    for where, item in raw:
        if not isinstance(item, dict):
            raise ConfigError(f"{path}: {where}: a record must be a JSON object")
        record_id = _key_field(path, where, item, id_field, "id")
        label = f"{where}, record {record_id!r}"
        if record_id in seen:
            raise ConfigError(
                f"{path}: {label}: duplicate id (first at {seen[record_id]}); ids must be unique"
            )
        seen[record_id] = where
        group = _key_field(path, label, item, group_field, "group") if group_field else None
        condition = (
            _key_field(path, label, item, condition_field, "condition") if condition_field else None
        )
        for name in required:
            if name not in item or item[name] is None:
                raise ConfigError(
                    f"{path}: {label}: field {name!r} is missing "
                    "(a criterion inserts it into its prompt): add it to the record"
                )
            value = item[name]
            if isinstance(value, bool) or not isinstance(value, _SCALAR):
                raise ConfigError(
                    f"{path}: {label}: field {name!r} must be text or a number, "
                    f"not {type(value).__name__}"
                )
        records.append(Record(record_id, group, condition, item, where))
    if not records:
        raise ConfigError(f"{path}: no records in the file")
    return records


def _key_field(path: Path, where: str, item: dict[str, Any], name: str, role: str) -> str:
    value = item.get(name)
    if value is None:
        raise ConfigError(
            f"{path}: {where}: {role} field {name!r} is missing "
            f"(set [data] {role} in the config if the field has another name)"
        )
    if isinstance(value, bool) or not isinstance(value, _SCALAR):
        raise ConfigError(
            f"{path}: {where}: {role} field {name!r} must be text or a number, "
            f"not {type(value).__name__}"
        )
    text = str(value)
    if not text.strip():
        raise ConfigError(f"{path}: {where}: {role} field {name!r} is empty")
    return text


def _read(path: Path) -> Sequence[tuple[str, Any]]:
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: records file not found (check [data] path)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the records file ({exc.strerror})") from exc
    stripped = content.lstrip()
    if not stripped:
        raise ConfigError(f"{path}: the records file is empty")
    if stripped[:1] == b"[":
        try:
            items = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
        return [(f"item {i}", item) for i, item in enumerate(items, start=1)]
    rows = []
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((f"line {number}", orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}: line {number}: not valid JSON ({exc}); "
                "records must be a JSON array or one JSON object per line"
            ) from exc
    return rows
