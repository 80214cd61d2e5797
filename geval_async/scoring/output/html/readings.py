"""Per-sample readings for the HTML report: each answer, the rating read from it, or why not.

The one place the report learns what the judge wrote about an item. It reads the scoring
stage's own per-sample table (:attr:`StudyResults.samples`, built by
:func:`geval_async.scoring.scores.readings.samples_frame`), so the drill-down shows exactly the
rating
and the invalid reason (``no_rating``, ``off_scale``, ...) that ``geval-async answers``, the
Markdown report and the invalid shares count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ....options import Reason

# What each reason means, for the reader of the page (the code itself is shown too).
REASON_WORDS = {
    Reason.NO_RATING: "no rating in the answer",
    Reason.OFF_SCALE: "a rating outside the scale",
    Reason.AMBIGUOUS: "more than one possible rating",
    Reason.FRACTIONAL: "a fraction where the scale has none",
    Reason.REFUSED: "the judge declined, or said nothing",
    Reason.CUT_OFF: "max_tokens cut the answer off before a rating",
    Reason.BAD_LOGPROBS: "logprobs that are not probabilities",
    Reason.LOW_MASS: "too little of the first token's probability on ratings",
}


@dataclass(frozen=True, slots=True)
class Reading:
    """One sampled answer: its text, the rating read from it, or the reason it is invalid."""

    draw: int
    text: str
    rating: float | None
    reason: str | None
    reasoning: str | None = None  # the message's reasoning field, as the judge sent it


Item = tuple[str, str, str | None]  # record id, criterion, rubric (None for a plain criterion)


def item_readings(samples: pd.DataFrame) -> dict[Item, list[Reading]]:
    """Every item's readings in draw order, from the samples table (one row per answer)."""
    out: dict[Item, list[Reading]] = {}
    columns = ("record_id", "criterion", "rubric", "draw", "text", "rating", "reason", "reasoning")
    for record, criterion, rubric, draw, text, rating, reason, reasoning in zip(
        *(samples[c].tolist() for c in columns), strict=True
    ):
        key = (str(record), str(criterion), None if _missing(rubric) else str(rubric))
        valid = not _missing(rating)
        out.setdefault(key, []).append(
            Reading(
                int(draw),
                str(text),
                float(rating) if valid else None,
                None if _missing(reason) else str(reason),
                None if _missing(reasoning) else str(reasoning),
            )
        )
    return out


def reason_counts(shares: pd.DataFrame) -> dict[str, list[tuple[str, int]]]:
    """Per criterion: each invalid reason and how often, most frequent first (from
    :meth:`StudyResults.invalid_shares`, summed over the conditions)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for criterion, group in shares.groupby("criterion", sort=False):
        counts = [(str(r), int(group[str(r)].sum())) for r in Reason]
        out[str(criterion)] = sorted(
            ((r, n) for r, n in counts if n), key=lambda item: (-item[1], item[0])
        )
    return out


def _missing(value: object) -> bool:
    # pandas stores a missing reason or rubric as None or NaN, by dtype and version.
    return value is None or (isinstance(value, float) and math.isnan(value))
