"""The checks one record passes when the records file is read: its id, group and condition
fields, and the fields a criterion inserts into its prompt.

Each failure is one :class:`~geval_async.errors.ConfigError` naming the file, where the record
is ("line 12" or "item 12") and, once known, its id.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError

_SCALAR = (str, int, float)


def label(where: str, record_id: str | None) -> str:
    return where if record_id is None else f"{where}, record {record_id!r}"


def key_field(
    path: Path, where: str, item: dict[str, Any], name: str, role: str, record_id: str | None = None
) -> str:
    """The text of the id, group or condition field ``name`` (``role``) of a record."""
    value = item.get(name)
    if type(value) is str and value.strip():
        return value  # the usual case, checked first
    if value is None:
        raise ConfigError(
            f"{path}: {label(where, record_id)}: {role} field {name!r} is missing "
            f"(set [data] {role} in the config if the field has another name)"
        )
    if isinstance(value, bool) or not isinstance(value, _SCALAR):
        raise ConfigError(
            f"{path}: {label(where, record_id)}: {role} field {name!r} must be text or a "
            f"number, not {type(value).__name__}"
        )
    text = str(value)
    if not text.strip():
        raise ConfigError(f"{path}: {label(where, record_id)}: {role} field {name!r} is empty")
    return text


def check_required(
    path: Path, where: str, item: dict[str, Any], record_id: str, required: Sequence[str]
) -> None:
    """Every field in ``required`` (inserted into a prompt) is present and text or a number."""
    for name in required:
        value = item.get(name)
        if type(value) is str:
            continue  # the usual case, checked first: a large study has many records
        if value is None:
            raise ConfigError(
                f"{path}: {label(where, record_id)}: field {name!r} is missing "
                "(a criterion inserts it into its prompt): add it to the record"
            )
        if isinstance(value, bool) or not isinstance(value, _SCALAR):
            raise ConfigError(
                f"{path}: {label(where, record_id)}: field {name!r} must be text or a "
                f"number, not {type(value).__name__}"
            )
