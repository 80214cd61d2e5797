"""The guard before outputs are written: scores on disk are never replaced by emptier ones.

A mistyped ``--cache`` (or a cache folder moved away) reads as a study with no answers; writing
its outputs would silently replace a whole study's tables with empty ones. The writer
(:mod:`.outputs`) asks here first.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import ConfigError

if TYPE_CHECKING:
    from ..scores.results import StudyResults

__all__ = ["check_not_emptier"]


def check_not_emptier(results: StudyResults, long_csv: Path) -> None:
    """Refuse to replace scores on disk with emptier ones (a mistyped --cache reads as empty);
    ``long_csv`` is the long table the outputs would replace."""
    scored = sum(t.scored for t in results.tallies.values())
    items = len(results.scores)
    cache = results.config.cache_path
    if items and not scored:
        raise ConfigError(
            f"the cache {cache} holds no answer for any of the study's {items} items: "
            "nothing was written; check --cache (or [cache] path), or run "
            f"`geval-async run {results.config.source}` first"
        )
    before = _scored_on_disk(long_csv)
    if before and scored < before / 2:
        raise ConfigError(
            f"the cache {cache} holds answers for {scored} items, but the outputs under "
            f"{results.config.output.path} were made from {before}: nothing was written; "
            "check --cache (or [cache] path), or pass --output to write elsewhere"
        )


def _scored_on_disk(long_csv: Path) -> int:
    """Items with a score in an existing long table (0 when there is none or it is unreadable)."""
    try:
        with long_csv.open(newline="", encoding="utf-8") as file:
            return sum(1 for row in csv.DictReader(file) if _is_number(row.get("score")))
    except (OSError, UnicodeDecodeError, csv.Error):
        return 0


def _is_number(text: str | None) -> bool:
    try:
        return text is not None and math.isfinite(float(text))
    except ValueError:
        return False
