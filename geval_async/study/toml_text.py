"""A study config written as TOML text, for a study built in code and saved to a folder.

Python's ``tomllib`` reads TOML but does not write it. A config holds few kinds of value (text,
numbers, booleans, lists and small tables), so they are written here: plain sections as
``[name]``, the ``criteria`` and ``judges`` lists as ``[[criteria]]`` and ``[[judges]]``, and
anything nested inside a table as an inline table. The text is read back with ``tomllib`` before
it is returned, so a value that would not read as written never reaches a file.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from typing import Any

__all__ = ["toml_text"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ARRAYS_OF_TABLES = ("criteria", "judges")


def toml_text(document: Mapping[str, Any]) -> str:
    """``document`` as TOML text that ``tomllib`` reads back as ``document``.

    Raises:
        ValueError: a value TOML cannot hold (None, NaN, an object of another kind).
    """
    lines: list[str] = []
    for name, value in document.items():
        if name in _ARRAYS_OF_TABLES and isinstance(value, list):
            for table in value:
                lines += [f"[[{_key(name)}]]", *_pairs(table), ""]
        elif isinstance(value, Mapping):
            lines += [f"[{_key(name)}]", *_pairs(value), ""]
        else:
            lines.insert(0, f"{_key(name)} = {_value(value)}")
    text = "\n".join(lines)
    if tomllib.loads(text) != _plain(document):
        raise ValueError("the config does not read back as written")
    return text


def _pairs(table: Mapping[str, Any]) -> list[str]:
    return [f"{_key(key)} = {_value(value)}" for key, value in table.items()]


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    # JSON's escapes are TOML's; DEL is the one character TOML wants escaped and JSON not.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(_pairs(value)) + " }" if value else "{}"
    raise ValueError(f"{value!r} cannot be written in a TOML config")


def _plain(value: Any) -> Any:
    """``value`` as ``tomllib`` reads it back (tuples as lists)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
