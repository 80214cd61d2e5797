"""Human scores carried by the records: the ``[meta] human`` fields, read one way for every stage.

Meta-evaluation correlates the judge with them; the scoring stage calibrates the judge's scores
to them and corrects its means (:mod:`geval_async.scoring.stats.calibration`,
:mod:`geval_async.scoring.stats.human_scale`). A record without the field, or with an empty one, is
unlabelled for that criterion; a value that is not a number is bad input, named with its record.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .records import Record

__all__ = ["EMPTY_CELLS", "check_found", "field_value", "human_number", "record_labels"]

# Cells that mean "no score" rather than a bad one.
EMPTY_CELLS = {"", "nan", "na", "n/a", "null", "none"}
_NAN = float("nan")


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


def human_number(value: Any, where: str) -> float:
    """A score as float; None or an empty cell is NaN; anything else non-numeric raises."""
    if value is None:
        return _NAN
    if isinstance(value, str):
        if value.strip().lower() in EMPTY_CELLS:
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


def record_labels(
    records: Iterable[Record], human: Mapping[str, str], source: Path | str
) -> dict[str, dict[str, float]]:
    """Per criterion ``human`` maps, each labelled record's id -> its human score.

    A record without the field (or with a null or empty one) is unlabelled and left out.

    Raises:
        ConfigError: a value is not a number, or no record has the field (naming the records
            file, a record and the field).
    """
    labels: dict[str, dict[str, float]] = {criterion: {} for criterion in human}
    first: Record | None = None
    found: set[str] = set()
    for record in records:
        first = first or record
        for criterion, path in human.items():
            try:
                value = field_value(record.fields, path)
            except KeyError:
                continue
            found.add(criterion)
            where = f"{source}: {record.where}, record {record.id!r}: field {path!r}"
            number = human_number(value, f"{where} ([meta] human {criterion!r})")
            if not math.isnan(number):
                labels[criterion][str(record.id)] = number
    check_found(first, found, human, source)
    return labels


def check_found(
    first: Record | None, found: set[str], human: Mapping[str, str], source: Path | str
) -> None:
    """A field no record has is a mistyped path, not a study without labels.

    Raises:
        ConfigError: naming the first record and the field, for the first criterion in
            ``human`` whose field no record has.
    """
    for criterion, path in human.items():
        if first is not None and criterion not in found:
            raise ConfigError(
                f"{source}: {first.where}, record {first.id!r}: no field {path!r} (the human "
                f"score of {criterion!r} named by [meta] human, and no record has it): fix "
                "the path or the records"
            )
