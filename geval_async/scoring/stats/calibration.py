"""The judge's scores on the human scale: isotonic calibration on a few human labels, cross-fitted,
with a conformal interval per record.

A judge rates on its own scale and with its own bias; where some records carry a human score
(``[meta] human``), a monotone map from the judge's weighted score to the human score is fitted
on them (isotonic regression: it keeps the judge's order and assumes nothing else).

- **Which labels.** ``[meta] labelled`` is the share of the labelled records used, drawn with
  ``[meta] seed``. The draw takes whole groups when the records have groups (a document's
  summaries, a participant's questionnaires), as people label them, so that a paired comparison
  keeps both sides of its labelled pairs.
- **Cross-fitted.** The labelled records are split into folds; a labelled record's calibrated
  score comes from the map fitted on the other folds, so no record's calibrated score uses its
  own label, and the residuals on the labelled records are honest. Every other record's comes
  from the map fitted on all the labels used.
- **Conformal intervals.** Split-conformal on the calibrated scores: the interval is the
  calibrated score plus or minus the ``ceil((m + 1) coverage)``-th smallest of m cross-fitted
  residuals |human - calibrated| (a labelled record's from the other folds' residuals). Where
  the human scale is discrete (a 1-5 rating, or the mean of three such: steps of 1/3) the ends
  are moved inwards to the nearest possible human score, which keeps every score the interval
  held and drops only values no person could give.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import isotonic_regression

__all__ = [
    "FOLDS",
    "MIN_LABELS",
    "Calibration",
    "calibrate",
    "conformal_quantile",
    "draw_labelled",
    "human_grid",
    "isotonic_map",
]

FOLDS = 5
MIN_LABELS = 4  # fewer labels fit no map worth the name (and leave no residuals to spare)
_EDGE = 1e-9  # a calibrated score a rounding error off a possible human score is on it


def draw_labelled(
    record_ids: Sequence[str], groups: Sequence[object], share: float, seed: int
) -> set[str]:
    """The labelled records used: ``share`` of them, whole groups at a time when the records
    have groups (a group of None stands alone), drawn with ``seed``; all of them at share 1.

    The draw depends on the ids and groups only, never on the labels' values.
    """
    ids = sorted(set(record_ids))
    if share >= 1:
        return set(ids)
    group_of = dict(zip(record_ids, groups, strict=True))
    units: dict[str, list[str]] = {}
    for record in ids:
        group = group_of[record]
        units.setdefault(record if group is None else f"group:{group}", []).append(record)
    names = sorted(units)
    take = max(1, round(share * len(names)))
    chosen = np.random.default_rng(seed).choice(len(names), size=take, replace=False)
    return {record for i in sorted(chosen) for record in units[names[i]]}


def isotonic_map(score: np.ndarray, human: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The non-decreasing map from judge score to human score that fits the pairs best (least
    squares): its knots (the distinct scores) and their fitted human scores. Between knots it
    is read linearly, beyond them it stays at the ends (:func:`apply_map`)."""
    knots, inverse, counts = np.unique(score, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=human) / counts
    fitted = isotonic_regression(means, weights=counts.astype(float), increasing=True).x
    return knots, fitted


def apply_map(fitted: tuple[np.ndarray, np.ndarray], score: np.ndarray) -> np.ndarray:
    """Scores read through a fitted :func:`isotonic_map`."""
    knots, values = fitted
    return np.interp(score, knots, values)


def conformal_quantile(residuals: np.ndarray, coverage: float) -> float:
    """The split-conformal radius: the ``ceil((m + 1) coverage)``-th smallest of m residuals
    (infinite when m is too small for the coverage asked)."""
    m = len(residuals)
    rank = math.ceil((m + 1) * coverage)
    if rank > m:
        return math.inf
    return float(np.sort(residuals)[rank - 1])


def human_grid(values: np.ndarray) -> np.ndarray | None:
    """The possible human scores when the labels lie on a lattice (integer ratings, or means
    of a few: steps of 1/2, 1/3), from the smallest label seen to the largest; None when they
    do not (a continuous scale)."""
    distinct = np.unique(values)
    if len(distinct) < 2:
        return None
    step = float(np.min(np.diff(distinct)))
    offsets = (distinct - distinct[0]) / step
    if step <= 0 or not np.allclose(offsets, np.round(offsets), atol=1e-6):
        return None
    count = int(round(offsets[-1])) + 1
    if count > 200:  # not a rating scale a person uses
        return None
    grid = distinct[0] + step * np.arange(count)
    # The scores seen, exactly as people gave them (1 + 12 * (1/3) is 4.999999999999999, not
    # 5): an interval's end compares equal to the label it means.
    seen = np.searchsorted(grid, distinct - 1e-6)
    grid[seen] = distinct
    return grid


@dataclass(frozen=True)
class Calibration:
    """One criterion's records on the human scale, aligned with the scores given.

    Attributes:
        calibrated: each record's score on the human scale (NaN: no score, or too few labels).
        lo, hi: its conformal interval at ``coverage``.
        used: whether the record's label was used (drawn and present).
        residual: |human - calibrated| of the labels used (cross-fitted), NaN elsewhere.
        grid: the possible human scores, when the scale is discrete.
    """

    calibrated: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    used: np.ndarray
    residual: np.ndarray
    coverage: float
    grid: np.ndarray | None = None

    @property
    def labels(self) -> int:
        """How many labels were used."""
        return int(self.used.sum())


def calibrate(
    score: np.ndarray, human: np.ndarray, used: np.ndarray, coverage: float, seed: int
) -> Calibration:
    """Cross-fitted isotonic calibration and conformal intervals for one criterion.

    Args:
        score: the judge's weighted score per record (NaN: not scored).
        human: the human score per record (NaN: unlabelled).
        used: which records' labels to use (drawn); a record without score or label is not.
        coverage: the intervals' level.
        seed: splits the labels into folds (the split never depends on their values).
    """
    score, human = np.asarray(score, float), np.asarray(human, float)
    used = np.asarray(used, bool) & ~np.isnan(score) & ~np.isnan(human)
    size = len(score)
    calibrated, lo, hi, residual = (np.full(size, np.nan) for _ in range(4))
    grid = human_grid(human[used]) if used.any() else None
    labelled = np.flatnonzero(used)
    if len(labelled) < MIN_LABELS:
        return Calibration(calibrated, lo, hi, used, residual, coverage, grid)
    folds = np.empty(len(labelled), dtype=int)
    order = np.random.default_rng(seed).permutation(len(labelled))
    folds[order] = np.arange(len(labelled)) % min(FOLDS, len(labelled))
    for fold in np.unique(folds):
        held, fit = labelled[folds == fold], labelled[folds != fold]
        calibrated[held] = apply_map(isotonic_map(score[fit], human[fit]), score[held])
    residual[labelled] = np.abs(human[labelled] - calibrated[labelled])
    radius = np.full(size, conformal_quantile(residual[labelled], coverage))
    for fold in np.unique(folds):
        # A labelled record's interval from the other folds' residuals, not its own.
        others = residual[labelled[folds != fold]]
        radius[labelled[folds == fold]] = conformal_quantile(others, coverage)
    rest = ~used & ~np.isnan(score)
    calibrated[rest] = apply_map(isotonic_map(score[labelled], human[labelled]), score[rest])
    lo, hi = calibrated - radius, calibrated + radius
    if grid is not None:
        lo, hi = _onto(grid, lo, hi, calibrated)
    return Calibration(calibrated, lo, hi, used, residual, coverage, grid)


def _onto(
    grid: np.ndarray, lo: np.ndarray, hi: np.ndarray, calibrated: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Interval ends moved inwards to the nearest possible human score (an interval holding
    none keeps the one nearest its centre)."""
    top = len(grid) - 1
    start = np.clip(np.searchsorted(grid, lo - _EDGE, side="left"), 0, top)
    stop = np.clip(np.searchsorted(grid, hi + _EDGE, side="right") - 1, 0, top)
    nearest = np.abs(grid[None, :] - np.nan_to_num(calibrated)[:, None]).argmin(axis=1)
    empty = start > stop
    start, stop = np.where(empty, nearest, start), np.where(empty, nearest, stop)
    ends = ~np.isnan(calibrated)
    return np.where(ends, grid[start], np.nan), np.where(ends, grid[stop], np.nan)
