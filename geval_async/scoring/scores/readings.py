"""How every answer was read: one row per sample, invalid shares, and the shapes of bad answers.

The scoring stage keeps, for every answer it read, the rating or the reason there is none
(:class:`geval_async.scoring.reading.ratings.Reason`). This module lays them out for people:

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
from typing import Any

import numpy as np
import pandas as pd

from ...options import Reason, words
from .columns import REASONS as REASON_LIST
from .columns import ScoreColumns
from .packed import first_appearance, first_codes
from .scores import ItemScore
from .shares import ShareCounts, ShareDifference

__all__ = [
    "SAMPLE_COLUMNS",
    "ShareCounts",
    "ShareDifference",
    "invalid_shapes",
    "invalid_shares",
    "share_counts",
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


def _objects(values: list[Any], sentinel: Any = None) -> np.ndarray:
    """``values`` as an object array, with ``sentinel`` after them (read by the code -1)."""
    table = np.empty(len(values) + 1, dtype=object)
    table[:] = [*values, sentinel]
    return table


def _per_answer(columns: ScoreColumns) -> np.ndarray:
    """Per answer, the index of its item (every item's answers are rows, in item order)."""
    counts = columns.counts[0].numbers().astype(np.int64)
    return np.repeat(np.arange(len(counts)), counts)


def _samples_from_columns(columns: ScoreColumns) -> pd.DataFrame:
    """The samples frame of items held in columns (no rubric items, as many ratings, reasons
    and reasoning fields as answers): the same frame, read by code."""
    item = _per_answer(columns)
    if not len(item):
        return pd.DataFrame([], columns=SAMPLE_COLUMNS)
    record = columns.record.numbers()[item]
    counts = columns.counts[0].numbers()
    starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)[:-1]])
    rubric = columns.rubric.numbers()[item]
    texts = _objects(columns.texts.values)
    frame = {
        "record_id": _objects(columns.record_ids)[record].tolist(),
        "group": _objects(columns.record_groups)[record].tolist(),
        "condition": _objects(columns.record_conditions)[record].tolist(),
        "criterion": columns.criterion_column(item).tolist(),
        "rubric": _objects(columns.rubrics.values)[rubric].tolist(),
        "draw": np.arange(len(item), dtype=np.int64) - starts[item],
        "text": texts[columns.text.numbers()].tolist(),
        "rating": _objects(columns.ratings.values, _NAN)[columns.rating.numbers()].tolist(),
        "reason": _objects([str(r) for r in REASON_LIST])[columns.reason.numbers()].tolist(),
        "reasoning": texts[columns.reasoning.numbers()].tolist(),
    }
    return pd.DataFrame(frame, columns=SAMPLE_COLUMNS)


def share_counts(scores: Iterable[ItemScore]) -> ShareCounts:
    """The invalid samples of :func:`samples_frame`'s answers per criterion and condition, by
    reason: counted from the codes when the items are held in columns (no row per answer; a
    panel's columns carry their judges' counts), else from the samples frame."""
    if isinstance(scores, ScoreColumns) and scores.shares is not None:
        return scores.shares
    if not (isinstance(scores, ScoreColumns) and scores.simple):
        return ShareCounts.of(samples_frame(scores)[["criterion", "condition", "reason"]])
    # The records' conditions grouped as the frame's groupby groups them (None: "all").
    named = scores.record_conditions
    codes, conditions = first_codes(("all" if c is None else c for c in named), len(named))
    width = max(len(conditions), 1)
    # Per item, its (criterion, condition) as one number; per answer, its item's (4 bytes
    # each unless there are billions of pairs: a million items' arrays are a few MB).
    kind = np.int32 if len(scores.criteria.values) * width < 2**31 else np.int64
    item_key: np.ndarray = scores.criterion.numbers().astype(kind)
    np.multiply(item_key, width, out=item_key)
    np.add(item_key, codes.astype(kind)[scores.record.numbers()], out=item_key)
    answers = scores.counts[0].numbers()
    order = first_appearance(item_key[answers > 0])  # the pairs, as they first appear
    place = np.zeros(int(item_key.max()) + 1 if len(item_key) else 0, dtype=np.int32)
    place[order] = np.arange(len(order), dtype=np.int32)
    where = place[item_key]  # per item; per answer below, unless each item has one answer
    del item_key
    if not bool((answers == 1).all()):
        where = np.repeat(where, answers)
    samples = np.bincount(where, minlength=len(order))
    reason = scores.reason.numbers()  # -1: valid
    by_reason = [
        np.bincount(where[reason == r], minlength=len(order)) for r in range(len(REASON_LIST))
    ]
    out = ShareCounts()
    names = scores.criteria.values
    for k, pair in enumerate(order):
        counts: Counter[str] = Counter(
            {str(r): int(n[k]) for r, n in zip(REASON_LIST, by_reason, strict=True) if n[k]}
        )
        counts["samples"] = int(samples[k])
        counts["invalid"] = int(sum(n[k] for n in by_reason))
        criterion, condition = divmod(int(pair), width)
        out.counts[(str(names[criterion]), str(conditions[condition]))] = counts
    return out


def invalid_shares(samples: pd.DataFrame) -> pd.DataFrame:
    """Per criterion and condition: samples, invalid, share and a count per reason."""
    return ShareCounts.of(samples).shares()


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
