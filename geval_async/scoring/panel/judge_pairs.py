"""Judges in pairs: Spearman between two judges, and the effective number of judges.

Each pair of judges is ranked on the records both scored (scores equal to ``TIES`` decimals are
ties), with that count. From the pairwise Spearman matrix ``R`` of the ``k`` judges, the
effective number of judges, twice:

- Kish's design effect (Kish 1965, *Survey Sampling*; Spearman-Brown's formula),
  ``k / (1 + (k - 1) * mean r)``, the mean of the off-diagonal Spearman clipped at 0
  (disagreeing judges are not more than k);
- the eigenvalue participation ratio ``(sum lambda)^2 / sum lambda^2`` of ``R`` (Bretherton
  et al. 1999, J. Climate 12, 1990), which is ``k^2 / sum_ij r_ij^2`` (the traces of ``R``
  and ``R^2``).

Both are 1 when the judges rank the records alike and k when they are uncorrelated: their
votes are correlated, so k judges count as fewer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .alpha import TIES

KISH = (
    "k / (1 + (k - 1) * mean pairwise Spearman, clipped at 0): Kish (1965) design effect, "
    "Spearman-Brown"
)
PARTICIPATION = (
    "(sum lambda)^2 / sum lambda^2 of the judges' Spearman matrix: eigenvalue participation "
    "ratio, Bretherton et al. (1999)"
)


@dataclass(frozen=True)
class Estimate:
    """One statistic: its value, interval (NaN: none), what it was computed on, and why a
    value is NaN (``note``)."""

    value: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    records: int = 0
    judges: int = 0
    method: str = ""
    note: str = ""


@dataclass(frozen=True)
class PairSpearman:
    """Spearman's rank correlation of two judges on the records both scored."""

    judge_a: str
    judge_b: str
    records: int
    spearman: float
    note: str = ""


def join_notes(*notes: str) -> str:
    """The notes that say something, joined with "; "."""
    return "; ".join(note for note in notes if note)


def pair_spearman(matrix: np.ndarray, judges: Sequence[str], a: int, b: int) -> PairSpearman:
    """Spearman of columns ``a`` and ``b`` of records x judges ``matrix`` on the records both
    scored; NaN, with a note, below two such records or when one side is constant."""
    both = ~np.isnan(matrix[:, a]) & ~np.isnan(matrix[:, b])
    n = int(both.sum())
    if n < 2:
        return PairSpearman(judges[a], judges[b], n, math.nan, f"{n} record(s) scored by both")
    x = pd.Series(np.round(matrix[both, a], TIES))
    y = pd.Series(np.round(matrix[both, b], TIES))
    for name, side in ((judges[a], x), (judges[b], y)):
        if side.nunique() < 2:
            return PairSpearman(
                judges[a], judges[b], n, math.nan, f"{name} gave every shared record one score"
            )
    ranks_x, ranks_y = x.rank().to_numpy(), y.rank().to_numpy()
    return PairSpearman(judges[a], judges[b], n, float(np.corrcoef(ranks_x, ranks_y)[0, 1]))


def effective_judges(
    pairs: Sequence[PairSpearman], names: Sequence[str], units: int, reason: str, left_out: str
) -> tuple[Estimate, Estimate, Estimate]:
    """The mean pairwise Spearman and the effective number of judges (both formulas, see the
    module) of the judges ``names``, from their ``pairs``; ``units`` is the records count the
    rows carry, ``reason`` why nothing is defined ("" when it may be), ``left_out`` a note on
    judges without scores."""
    k = len(names)
    mean_method = "mean of the pairwise Spearman"
    if k == 1:
        note = join_notes("one judge", left_out)
        return (
            Estimate(math.nan, records=units, judges=1, method=mean_method, note=note),
            Estimate(1.0, records=units, judges=1, method=KISH, note=note),
            Estimate(1.0, records=units, judges=1, method=PARTICIPATION, note=note),
        )
    missing = [p for p in pairs if math.isnan(p.spearman)]
    if reason or missing or not pairs:
        note = join_notes(
            reason or f"no Spearman for {', '.join(f'{p.judge_a}-{p.judge_b}' for p in missing)}",
            left_out,
        )
        no_mean, no_kish, no_eigen = (
            Estimate(math.nan, records=units, judges=k, method=method, note=note)
            for method in (mean_method, KISH, PARTICIPATION)
        )
        return no_mean, no_kish, no_eigen
    rho = np.array([p.spearman for p in pairs])
    mean = float(rho.mean())
    clipped = "mean Spearman below 0, clipped to 0" if mean < 0 else ""
    kish = k / (1 + (k - 1) * max(mean, 0.0))
    # trace(R) = k and trace(R^2) = sum of the squared entries: k + 2 * sum over pairs.
    eigen = k * k / (k + 2 * float((rho**2).sum()))
    return (
        Estimate(mean, records=units, judges=k, method=mean_method, note=left_out),
        Estimate(kish, records=units, judges=k, method=KISH, note=join_notes(clipped, left_out)),
        Estimate(eigen, records=units, judges=k, method=PARTICIPATION, note=left_out),
    )
