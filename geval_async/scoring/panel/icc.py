"""The intraclass correlation between judges: two-way random effects, absolute agreement.

On a complete records x judges matrix (every judge scored every record; the caller drops the
others), the two-way ANOVA without replication gives the mean squares of records (``MSR``,
``n - 1`` df), judges (``MSC``, ``k - 1`` df) and the residual (``MSE``,
``(n - 1)(k - 1)`` df). Then (Shrout & Fleiss 1979 ICC(2,1) and ICC(2,k); McGraw & Wong 1996
ICC(A,1) and ICC(A,k), the same numbers)::

    ICC(2,1) = (MSR - MSE) / (MSR + (k - 1) MSE + k (MSC - MSE) / n)
    ICC(2,k) = (MSR - MSE) / (MSR + (MSC - MSE) / n)

ICC(2,1) is how far one judge's scores can stand for the truth; ICC(2,k) how far the mean of
these k judges can (the panel's pooled score). The confidence interval is McGraw & Wong's
(1996, Table 7, case 2A) F interval with Satterthwaite's degrees of freedom ``v`` for the
judge-and-residual denominator; the ICC(2,k) bounds are those of ICC(2,1) stepped up by
Spearman-Brown, ``k L / (1 + (k - 1) L)``, which is the same as M&W's ICC(A,k) row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .alpha import TIES

_NAN_PAIR = (math.nan, math.nan)


@dataclass(frozen=True)
class Icc:
    """ICC(2,1) and ICC(2,k) with their F intervals, and the mean squares they come from.

    ``note`` says why a value is NaN (or why only the interval is); ``average_note`` the same
    for ICC(2,k), which can be undefined alone.
    """

    single: float
    average: float
    single_interval: tuple[float, float]
    average_interval: tuple[float, float]
    records: int
    judges: int
    msr: float
    msc: float
    mse: float
    note: str = ""
    average_note: str = ""


def mean_squares(scores: np.ndarray) -> tuple[float, float, float]:
    """MSR, MSC and MSE of the two-way ANOVA of a complete records x judges matrix."""
    n, k = scores.shape
    grand = scores.mean()
    rows = scores.mean(axis=1)
    columns = scores.mean(axis=0)
    ssr = k * float(((rows - grand) ** 2).sum())
    ssc = n * float(((columns - grand) ** 2).sum())
    residual = scores - rows[:, None] - columns[None, :] + grand
    sse = float((residual**2).sum())
    return ssr / (n - 1), ssc / (k - 1), sse / ((n - 1) * (k - 1))


def icc(scores: np.ndarray, *, confidence: float) -> Icc:
    """ICC(2,1) and ICC(2,k) of complete records x judges ``scores`` (no NaN)."""
    n, k = scores.shape
    if k < 2:
        return _undefined(n, k, "one judge: the ICC needs two or more")
    if n < 2:
        return _undefined(n, k, f"{n} record(s) scored by every judge: the ICC needs two")
    rounded = np.round(scores, TIES)
    if rounded.min() == rounded.max():
        return _undefined(n, k, "no variation: every judge gave every record the same score")
    msr, msc, mse = mean_squares(scores)
    # Written as a sum of non-negative terms (k - 1 - k / n >= 0), so nothing cancels: 0 only
    # when records and judges do not vary and n = k = 2.
    single_denominator = msr + (k - 1 - k / n) * mse + k * msc / n
    if single_denominator <= 0:
        return _undefined(n, k, "no variation between records or judges, only residual")
    single = (msr - mse) / single_denominator
    # ICC(2,k) is ICC(2,1) stepped up by Spearman-Brown: singular at ICC(2,1) = -1 / (k - 1)
    # and above 1 (or below -inf) past it, where the judges disagree more than records differ.
    average_denominator = msr + (msc - mse) / n
    average, average_note = math.nan, ""
    if average_denominator > 1e-12 * (msr + (msc + mse) / n):
        average = (msr - mse) / average_denominator
    else:
        average_note = (
            f"ICC(2,k) undefined: ICC(2,1) = {single:.3g} is at or below -1 / (k - 1), "
            "the judges disagree as much as the records differ"
        )
    low, high, note = _f_interval(single, msr, msc, mse, n, k, confidence)
    average_interval = (
        (math.nan, math.nan) if average_note else (_step_up(low, k), _step_up(high, k))
    )
    return Icc(
        single,
        average,
        (low, high),
        average_interval,
        n,
        k,
        msr,
        msc,
        mse,
        note,
        average_note or note,
    )


def _f_interval(
    single: float, msr: float, msc: float, mse: float, n: int, k: int, confidence: float
) -> tuple[float, float, str]:
    """McGraw & Wong (1996) Table 7, case 2A: the interval of ICC(A,1)."""
    if single >= 1:
        return math.nan, math.nan, "ICC(2,1) = 1 (no judge or residual variance): no F interval"
    if single <= -1 / (k - 1):
        return math.nan, math.nan, f"ICC(2,1) = {single:.3g} <= -1 / (k - 1): no F interval"
    a = k * single / (n * (1 - single))
    b = 1 + k * single * (n - 1) / (n * (1 - single))
    numerator = (a * msc + b * mse) ** 2
    denominator = (a * msc) ** 2 / (k - 1) + (b * mse) ** 2 / ((n - 1) * (k - 1))
    if denominator <= 0 or not math.isfinite(numerator / denominator):
        return math.nan, math.nan, "no F interval: its degrees of freedom are undefined"
    v = numerator / denominator
    upper_tail = 1 - (1 - confidence) / 2
    f_star = float(stats.f.ppf(upper_tail, n - 1, v))
    f_lower = float(stats.f.ppf(upper_tail, v, n - 1))
    spread = k * msc + (k * n - k - n) * mse
    low = n * (msr - f_star * mse) / (f_star * spread + n * msr)
    high = n * (f_lower * msr - mse) / (spread + n * f_lower * msr)
    if not low <= single <= high:
        # Only with almost no degrees of freedom (v near 0), where the F quantiles fall below 1.
        return math.nan, math.nan, f"no F interval: Satterthwaite's df v = {v:.2g} is too small"
    return low, high, ""


def _step_up(single: float, k: int) -> float:
    """Spearman-Brown: the reliability of the mean of k judges from that of one."""
    if math.isnan(single):
        return math.nan
    denominator = 1 + (k - 1) * single
    return k * single / denominator if denominator != 0 else math.nan


def _undefined(n: int, k: int, note: str) -> Icc:
    nan = math.nan
    return Icc(nan, nan, _NAN_PAIR, _NAN_PAIR, n, k, nan, nan, nan, note, note)
