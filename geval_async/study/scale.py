"""The scale of a criterion: the ratings a judge may give, e.g. 1-5 or 0, 0.5, 1."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["MAX_SCALE_POINTS", "TOLERANCE", "Scale"]

# A rating scale longer than this is a typo, not a scale (and would be slow to build).
MAX_SCALE_POINTS = 1000

# How close a parsed number must be to a scale point to count as that point.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Scale:
    """The ratings a criterion allows, e.g. (1, 2, 3, 4, 5) or (0, 0.5, 1).

    Points are stored sorted, without duplicates, as floats.
    """

    points: tuple[float, ...]

    def __post_init__(self) -> None:
        try:
            points = tuple(sorted({float(p) for p in self.points}))
        except (TypeError, ValueError, OverflowError) as exc:
            raise ConfigError(f"scale points must be numbers, got {self.points!r}") from exc
        if not points:
            raise ConfigError("a scale needs at least one point")
        if not all(math.isfinite(p) for p in points):
            raise ConfigError(f"scale points must be finite, got {self.points!r}")
        object.__setattr__(self, "points", points)

    @classmethod
    def integer(cls, lo: int, hi: int) -> Scale:
        """The integer scale lo, lo+1, ..., hi (both ends included)."""
        if lo > hi:
            raise ConfigError(f"scale lower end {lo} is above upper end {hi}")
        if hi - lo > MAX_SCALE_POINTS:
            raise ConfigError(
                f"scale [{lo}, {hi}] has more than {MAX_SCALE_POINTS} points: a judge rating "
                "scale is short (e.g. [1, 5] or [1, 10])"
            )
        return cls(tuple(float(v) for v in range(lo, hi + 1)))

    @property
    def lo(self) -> float:
        """The lowest rating."""
        return self.points[0]

    @property
    def hi(self) -> float:
        """The highest rating."""
        return self.points[-1]

    def point(self, value: float) -> float | None:
        """The scale point equal to ``value`` (within 1e-9), or None if there is none."""
        for p in self.points:
            if abs(value - p) <= TOLERANCE:
                return p
        return None
