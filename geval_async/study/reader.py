"""Typed access to one table of a study's TOML document, with errors that name file and key.

Every setting of a study passes through a :class:`TableReader`: the config file's sections, its
``[[criteria]]`` tables, and overrides from flags and the Python API
(:mod:`geval_async.study.overrides`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ConfigError
from ..options import words

_Option = TypeVar("_Option", bound=StrEnum)

__all__ = ["TableReader", "kind_name"]


class TableReader:
    """Typed access to one table of the TOML document, with errors naming file and key."""

    def __init__(
        self, source: Path | str, where: str, table: Mapping[str, Any], known: set[str]
    ) -> None:
        """``source`` names where the table came from (a file, or the flag or keyword that
        patched it); ``where`` is the table's name ("" for none)."""
        self.source, self.where, self.table = source, where, table
        unknown = sorted(set(table) - known)
        if unknown:
            raise self.error(f"unknown key {unknown[0]!r} (known keys: {', '.join(sorted(known))})")

    def error(self, message: str) -> ConfigError:
        where = f"[{self.where}] " if self.where else ""
        return ConfigError(f"{self.source}: {where}{message}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        value = self.table.get(key, default)
        if value is None:
            return None
        # bool is an int in Python; a TOML `n = true` is still a mistake.
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.error(f"{key!r} must be {kind_name(kind)}, not {value!r}")
        if not isinstance(value, kind):
            raise self.error(f"{key!r} must be {kind_name(kind)}, not {value!r}")
        return value

    def required(self, key: str, kind: type | tuple[type, ...]) -> Any:
        value = self.get(key, kind)
        if value is None:
            raise self.error(f"{key!r} is required")
        return value

    def positive(self, key: str, default: float | None, *, integer: bool = False) -> Any:
        value = self.get(key, int if integer else (int, float), default)
        # NaN passes a `<= 0` test, and inf is no limit or timeout anyone can wait for.
        if value is not None and (value <= 0 or not math.isfinite(value)):
            raise self.error(f"{key!r} must be a positive number, not {value!r}")
        return value

    def choice(self, key: str, options: type[_Option], default: _Option) -> _Option:
        value = self.get(key, str, default)
        if value not in words(options):
            raise self.error(f"{key!r} must be one of {', '.join(words(options))}, not {value!r}")
        return options(value)


def kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds:
        kinds = tuple(k for k in kinds if k is not int)  # "a number" covers both
    names = {int: "a whole number", float: "a number", str: "a string", list: "a list"}
    return " or ".join(
        dict.fromkeys(names.get(k, "a table" if k is dict else k.__name__) for k in kinds)
    )
