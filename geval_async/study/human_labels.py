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

__all__ = ["EMPTY_CELLS", "field_value", "human_number", "record_labels"]

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
        ConfigError: a value is not a number (naming the records file, record and field).
    """
    labels: dict[str, dict[str, float]] = {criterion: {} for criterion in human}
    for record in records:
        for criterion, path in human.items():
            try:
                value = field_value(record.fields, path)
            except KeyError:
                continue
            where = f"{source}: {record.where}, record {record.id!r}: field {path!r}"
            number = human_number(value, f"{where} ([meta] human {criterion!r})")
            if not math.isnan(number):
                labels[criterion][str(record.id)] = number
    return labels
