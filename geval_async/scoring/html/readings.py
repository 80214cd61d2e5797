"""Per-sample readings for the HTML report: each answer, the rating read from it, or why not.

The one place the report learns what the judge wrote about an item. Today it reads what the
scoring stage already keeps on an :class:`ItemScore` (answer texts and parsed ratings, from
the cache); when the scoring stage gains its own per-sample readings with invalid reasons, this
module is the only one to change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..scores import ItemScore

_DIGIT = re.compile(r"\d")


@dataclass(frozen=True, slots=True)
class Reading:
    """One sampled answer: its text, the rating read from it, or the reason it is invalid."""

    draw: int
    text: str
    rating: float | None
    reason: str | None


def sample_readings(score: ItemScore) -> list[Reading]:
    """The readings of one item (one record on one criterion or rubric), in draw order."""
    yes_no = score.rubric is not None
    return [
        Reading(draw, text, rating, None if rating is not None else invalid_reason(text, yes_no))
        for draw, (text, rating) in enumerate(zip(score.answers, score.ratings, strict=True))
    ]


def invalid_reason(text: str, yes_no: bool = False) -> str:
    """Why an answer gave no rating, in words a reader of the report understands."""
    if not text.strip():
        return "empty answer"
    if yes_no:
        return "no clear yes or no in the answer"
    if not _DIGIT.search(text):
        return "no number in the answer"
    return "no rating on the scale in the answer"
