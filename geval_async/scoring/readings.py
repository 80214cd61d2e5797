"""How every answer was read: one row per sample, invalid shares, and the shapes of bad answers.

The scoring stage keeps, for every answer it read, the rating or the reason there is none
(:class:`geval_async.scoring.ratings.Reason`). This module lays them out for people:

- :func:`samples_frame`: one row per answer (record, criterion, rubric, draw, text, rating,
  reason, and the reasoning field a thinking model sent beside its text), the table behind
  ``geval-async answers`` and the report's drill-down;
- :func:`invalid_shares`: invalid samples per criterion and condition, by reason (counted
  without a frame by :class:`ShareCounts`, as ``status`` does);
- :func:`share_differences`: whether the invalid share differs between the two compared
  conditions (Fisher's exact test on the counts): the comparison is then made on different
  subsets of the answers;
- :func:`invalid_shapes`: invalid answers grouped by reason and by the shape of their text.

Pure and sync: pandas and scipy, no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..options import Reason, words
from .columns import REASONS as REASON_LIST
from .columns import ScoreColumns
from .scores import ItemScore

__all__ = [
    "SAMPLE_COLUMNS",
    "ShareCounts",
    "ShareDifference",
    "invalid_shapes",
    "invalid_shares",
    "reasons_frame",
    "samples_frame",
    "share_differences",
    "text_shape",
]

SAMPLE_COLUMNS = [
    "record_id",
    "group",
    "condition",
    "criterion",
    "rubric",
    "draw",
    "text",
    "rating",
    "reason",
    "reasoning",
]
REASONS = words(Reason)
_NAN = float("nan")


def samples_frame(scores: Iterable[ItemScore]) -> pd.DataFrame:
    """One row per answer read: ``rating`` (NaN when invalid) and ``reason`` (None when valid).

    Rubric criteria give one row per rubric answer (``rubric`` names it). Items the cache
    lacks or refused have no answers, hence no rows.
    """
    if isinstance(scores, ScoreColumns) and scores.simple:
        return _samples_from_columns(scores)
    # Built a column at a time, an item's answers at once: a study has tens of thousands.
    columns: dict[str, list[Any]] = {name: [] for name in SAMPLE_COLUMNS}
    for score in scores:
        for part in score.parts or (score,):
            count = len(part.answers)
            ratings = part.ratings[:count] + (None,) * (count - len(part.ratings))
            reasons = part.reasons[:count] + (None,) * (count - len(part.reasons))
            columns["record_id"] += [part.record_id] * count
            columns["group"] += [part.group] * count
            columns["condition"] += [part.condition] * count
            columns["criterion"] += [score.criterion] * count
            columns["rubric"] += [part.rubric] * count
            columns["draw"] += range(count)
            columns["text"] += part.answers
            columns["rating"] += [_NAN if r is None else r for r in ratings]
            columns["reason"] += [None if r is None else str(r) for r in reasons]
            reasonings = part.reasonings[:count] + (None,) * (count - len(part.reasonings))
            columns["reasoning"] += reasonings
    if not columns["draw"]:
        return pd.DataFrame([], columns=SAMPLE_COLUMNS)  # object columns, as rows would give
    return pd.DataFrame(columns, columns=SAMPLE_COLUMNS)


class ShareCounts:
    """Samples, invalid ones and their reasons per criterion and condition (none: "all"),
    counted as the answers are read: the numbers behind :func:`invalid_shares` and
    :func:`share_differences` without a row per sample (``status`` counts them this way)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], Counter[str]] = {}

    def add(self, criterion: str, condition: str | None, reasons: Iterable[str | None]) -> None:
        """Count one item's answers, each by its reason (None: valid)."""
        counts = self.counts.setdefault((criterion, condition or "all"), Counter())
        for reason in reasons:
            counts["samples"] += 1
            if reason is not None:
                counts["invalid"] += 1
                counts[reason] += 1

    @classmethod
    def of(cls, samples: pd.DataFrame) -> ShareCounts:
        """The counts of a :func:`samples_frame`."""
        out = cls()
        frame = samples.assign(condition=samples["condition"].fillna("all"))
        for (criterion, condition), group in frame.groupby(["criterion", "condition"], sort=False):
            counts: Counter[str] = Counter(
                {
                    str(reason): int(count)
                    for reason, count in group["reason"].value_counts().items()
                }
            )
            counts["samples"] = len(group)
            counts["invalid"] = int(group["reason"].notna().sum())
            out.counts[(str(criterion), str(condition))] = counts
        return out

    def shares(self) -> pd.DataFrame:
        """Per criterion and condition: samples, invalid, share and a count per reason."""
        rows = []
        for (criterion, condition), counts in self.counts.items():
            row: dict[str, Any] = {
                "criterion": criterion,
                "condition": condition,
                "samples": counts["samples"],
                "invalid": counts["invalid"],
            }
            row["share"] = row["invalid"] / row["samples"] if row["samples"] else 0.0
            row.update({reason: counts[reason] for reason in REASONS})
            rows.append(row)
        columns = ["criterion", "condition", "samples", "invalid", "share", *REASONS]
        return pd.DataFrame(rows, columns=columns)

    def differences(self, conditions: Sequence[str], alpha: float = 0.05) -> list[ShareDifference]:
        """Criteria whose invalid share differs between the two conditions (Fisher's exact
        p < alpha); fewer than two conditions: none."""
        from scipy.stats import fisher_exact

        if len(conditions) != 2:
            return []
        a, b = conditions
        out = []
        for criterion in dict.fromkeys(criterion for criterion, _ in self.counts):
            in_a = self.counts.get((criterion, a), Counter())
            in_b = self.counts.get((criterion, b), Counter())
            invalid_a, samples_a = in_a["invalid"], in_a["samples"]
            invalid_b, samples_b = in_b["invalid"], in_b["samples"]
            if not samples_a or not samples_b or invalid_a + invalid_b == 0:
                continue
            table = [[invalid_a, samples_a - invalid_a], [invalid_b, samples_b - invalid_b]]
            p = float(fisher_exact(table).pvalue)
            if p < alpha:
                out.append(
                    ShareDifference(criterion, a, b, invalid_a, samples_a, invalid_b, samples_b, p)
                )
        return out


def _objects(values: list[Any], sentinel: Any = None) -> np.ndarray:
    """``values`` as an object array, with ``sentinel`` after them (read by the code -1)."""
    table = np.empty(len(values) + 1, dtype=object)
    table[:] = [*values, sentinel]
    return table


def _per_answer(columns: ScoreColumns) -> np.ndarray:
    """Per answer, the index of its item (every item's answers are rows, in item order)."""
    counts = np.frombuffer(columns.counts[0], dtype=np.uint16)
    return np.repeat(np.arange(len(counts)), counts)


def _samples_from_columns(columns: ScoreColumns) -> pd.DataFrame:
    """The samples frame of items held in columns (no rubric items, as many ratings, reasons
    and reasoning fields as answers): the same frame, read by code."""
    item = _per_answer(columns)
    if not len(item):
        return pd.DataFrame([], columns=SAMPLE_COLUMNS)
    record = np.frombuffer(columns.record, dtype=np.int32)[item]
    counts = np.frombuffer(columns.counts[0], dtype=np.uint16)
    starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)[:-1]])
    rubric = np.frombuffer(columns.rubric, dtype=np.int16)[item]
    texts = _objects(columns.texts.values)
    frame = {
        "record_id": _objects(columns.record_ids)[record].tolist(),
        "group": _objects(columns.record_groups)[record].tolist(),
        "condition": _objects(columns.record_conditions)[record].tolist(),
        "criterion": columns.criterion_column()[item].tolist(),
        "rubric": _objects(columns.rubrics.values)[rubric].tolist(),
        "draw": np.arange(len(item), dtype=np.int64) - starts[item],
        "text": texts[np.frombuffer(columns.text, dtype=np.int32)].tolist(),
        "rating": _objects(columns.ratings.values, _NAN)[
            np.frombuffer(columns.rating, dtype=np.int32)
        ].tolist(),
        "reason": _objects([str(r) for r in REASON_LIST])[
            np.frombuffer(columns.reason, dtype=np.int8)
        ].tolist(),
        "reasoning": texts[np.frombuffer(columns.reasoning, dtype=np.int32)].tolist(),
    }
    return pd.DataFrame(frame, columns=SAMPLE_COLUMNS)


def reasons_frame(scores: Iterable[ItemScore]) -> pd.DataFrame:
    """The ``criterion``, ``condition`` and ``reason`` columns of :func:`samples_frame`, all
    that :func:`invalid_shares` and :func:`share_differences` read: made without the texts
    when the items are held in columns."""
    if not (isinstance(scores, ScoreColumns) and scores.simple):
        return samples_frame(scores)[["criterion", "condition", "reason"]]
    item = _per_answer(scores)
    if not len(item):
        return pd.DataFrame([], columns=["criterion", "condition", "reason"])
    record = np.frombuffer(scores.record, dtype=np.int32)[item]
    frame = {
        "criterion": scores.criterion_column()[item].tolist(),
        "condition": _objects(scores.record_conditions)[record].tolist(),
        "reason": _objects([str(r) for r in REASON_LIST])[
            np.frombuffer(scores.reason, dtype=np.int8)
        ].tolist(),
    }
    return pd.DataFrame(frame)


def invalid_shares(samples: pd.DataFrame) -> pd.DataFrame:
    """Per criterion and condition: samples, invalid, share and a count per reason."""
    return ShareCounts.of(samples).shares()


@dataclass(frozen=True)
class ShareDifference:
    """Invalid shares of one criterion under the two compared conditions, and the test."""

    criterion: str
    condition_a: str
    condition_b: str
    invalid_a: int
    samples_a: int
    invalid_b: int
    samples_b: int
    p: float

    @property
    def share_a(self) -> float:
        return self.invalid_a / self.samples_a if self.samples_a else 0.0

    @property
    def share_b(self) -> float:
        return self.invalid_b / self.samples_b if self.samples_b else 0.0

    def warning(self) -> str:
        return (
            f"{self.criterion}: {self.share_a:.1%} of the samples are invalid under "
            f"{self.condition_a} ({self.invalid_a}/{self.samples_a}) but {self.share_b:.1%} "
            f"under {self.condition_b} ({self.invalid_b}/{self.samples_b}); Fisher's exact "
            f"p = {self.p:.3g}: the comparison is made on different subsets of the answers"
        )


def share_differences(
    samples: pd.DataFrame, conditions: Sequence[str], alpha: float = 0.05
) -> list[ShareDifference]:
    """Criteria whose invalid share differs between the two conditions (Fisher's exact p < alpha).

    Args:
        samples: :func:`samples_frame`.
        conditions: the two compared conditions (others are ignored); fewer than two: none.
        alpha: the level of the test.
    """
    return ShareCounts.of(samples).differences(conditions, alpha)


_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")


def text_shape(text: str, width: int = 60) -> str:
    """The shape of an answer: numbers as "#", case and spacing folded, cut to ``width``.

    "Score: 4.5", "score: 3.5" and "SCORE:  2.5" share the shape "score: #".
    """
    shape = _SPACE.sub(" ", _DIGITS.sub("#", text.lower())).strip()
    if not shape:
        return "(empty)"
    return shape if len(shape) <= width else shape[: width - 1] + "…"


def invalid_shapes(samples: pd.DataFrame, examples: int = 2) -> pd.DataFrame:
    """Invalid answers grouped by reason and shape: count, and a few examples (record: text)."""
    invalid = samples[samples["reason"].notna()]
    columns = ["reason", "shape", "count", "criteria", "examples"]
    if invalid.empty:
        return pd.DataFrame(columns=columns)
    frame = invalid.assign(shape=invalid["text"].map(text_shape))
    rows = []
    for (reason, shape), group in frame.groupby(["reason", "shape"], sort=False):
        rows.append(
            {
                "reason": reason,
                "shape": shape,
                "count": len(group),
                "criteria": ", ".join(dict.fromkeys(group["criterion"])),
                "examples": [
                    f"{r.record_id}: {r.text!r}" for r in group.head(examples).itertuples()
                ],
            }
        )
    out = pd.DataFrame(rows, columns=columns)
    return out.sort_values(["count", "reason"], ascending=[False, True], ignore_index=True)
