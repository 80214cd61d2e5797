"""The scale a prompt states ("(1-3)", "from 1 to 10"), checked against the criterion's.

A criterion declared ``scale = [1, 5]`` whose prompt asks for "(1-3)" gets ratings 1-3 scored
as if 5 were possible: its mean and every comparison shift without a word. At load each
prompt's fixed text (the template without record fields) is read for the scales it states;
one that differs from the criterion's gives a warning naming both (an error with ``--strict``).
"""

from __future__ import annotations

import re

from .scale import Scale

__all__ = ["scale_mismatch", "stated_scales"]

_RANGE = r"(\d{1,3})\s*(?:-|–|—|to)\s*(\d{1,3})"
# A range stated as a rating scale: in parentheses, or near scale/score/rate words.
_STATED = re.compile(
    rf"\(\s*{_RANGE}\s*\)"
    rf"|\b(?:scale|score|scores|rate|rating|ratings|grade|points?)\b[^.\n\d]{{0,30}}?"
    rf"(?:from\s+|of\s+|between\s+)?{_RANGE}(?!\s*(?:/|\d))"
    rf"|\b{_RANGE}\s*(?:-\s*)?(?:point\s+)?(?:scale|rating|score)\b",
    re.IGNORECASE,
)


def stated_scales(text: str) -> list[tuple[int, int]]:
    """The (lowest, highest) rating scales a prompt text states, in order, without repeats."""
    found: list[tuple[int, int]] = []
    for m in _STATED.finditer(text):
        numbers = [int(g) for g in m.groups() if g is not None]
        lo, hi = numbers[0], numbers[1]
        if lo < hi and lo <= 1 and (lo, hi) not in found:
            found.append((lo, hi))
    return found


def scale_mismatch(text: str, scale: Scale) -> tuple[int, int] | None:
    """A scale the prompt states that is not ``scale`` (None when all agree or none is stated)."""
    for lo, hi in stated_scales(text):
        if (lo, hi) != (scale.lo, scale.hi):
            return lo, hi
    return None
