"""Statistics: does a criterion's score differ between two conditions?

One :class:`Comparison` per criterion and pair of conditions, from one of three tests:
:func:`welch` (independent samples, unequal variances), :func:`paired` (paired t) or
:func:`wilcoxon` (signed-rank, paired). Each carries Hedges' g with a confidence interval.
:func:`adjust_fdr` then controls the false discovery rate across the comparisons
(Benjamini-Hochberg), and :func:`comparisons_frame` / :func:`format_table` present them.

Degenerate data (fewer than two values, no variance) does not raise: the comparison comes
back with NaN statistics and a ``note`` that says why, for the caller to report. Missing
values (NaN) are dropped first, pairwise for the paired tests, and the ``note`` says so.

Everything here is pure: no I/O, no asyncio.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from ...errors import ConfigError
from ...options import StatTest

__all__ = [
    "Comparison",
    "adjust_fdr",
    "comparisons_frame",
    "format_table",
    "hedges_g",
    "paired",
    "welch",
    "wilcoxon",
]

_NAN = float("nan")

# Scores of one condition: any sequence of floats, NaN for a missing score.
Sample = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class Comparison:
    """One criterion compared between condition A and condition B.

    Attributes:
        sd_a, sd_b: sample standard deviations (ddof=1).
        test: "welch", "paired-t" or "wilcoxon".
        statistic: t, or for wilcoxon W = the smaller of the positive and negative rank
            sums (scipy's two-sided statistic).
        df: Welch-Satterthwaite df for welch, n - 1 for paired-t, None for wilcoxon.
        p: two-sided p-value; NaN when the test cannot be computed (see ``note``).
        p_adj, reject: Benjamini-Hochberg adjusted p and decision, set by :func:`adjust_fdr`.
        hedges_g, g_ci_low, g_ci_high: Hedges' g of A minus B and its (1 - alpha) CI.
        note: why a result is NaN or unusual, and any warning scipy gave; "" when all is well.
    """

    criterion: str
    condition_a: str
    condition_b: str
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    sd_a: float
    sd_b: float
    test: StatTest
    statistic: float
    df: float | None
    p: float
    p_adj: float | None
    reject: bool | None
    hedges_g: float
    g_ci_low: float
    g_ci_high: float
    note: str = ""


def hedges_g(a: Sample, b: Sample, alpha: float = 0.05) -> tuple[float, float, float]:
    """Hedges' g of ``a`` minus ``b`` and its (1 - alpha) confidence interval.

    g = J * (mean_a - mean_b) / pooled sd, with J = 1 - 3 / (4 (n1 + n2) - 9). The interval is
    g -/+ z * sqrt(var), var = (n1 + n2) / (n1 n2) + g^2 / (2 (n1 + n2)) (Hedges & Olkin).

    Returns:
        (g, low, high); all NaN with fewer than two values on a side or no variance at all.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n1, n2 = len(x), len(y)
    if n1 < 2 or n2 < 2:
        return _NAN, _NAN, _NAN
    pooled_var = ((n1 - 1) * x.var(ddof=1) + (n2 - 1) * y.var(ddof=1)) / (n1 + n2 - 2)
    if pooled_var == 0:
        return _NAN, _NAN, _NAN
    j = 1 - 3 / (4 * (n1 + n2) - 9)
    g = float(j * (x.mean() - y.mean()) / math.sqrt(pooled_var))
    se = math.sqrt((n1 + n2) / (n1 * n2) + g**2 / (2 * (n1 + n2)))
    z = float(sps.norm.ppf(1 - alpha / 2))
    return g, g - z * se, g + z * se


def welch(
    criterion: str,
    a: Sample,
    b: Sample,
    cond_a: str,
    cond_b: str,
    alpha: float = 0.05,
) -> Comparison:
    """Welch's t-test of independent samples ``a`` and ``b`` (scipy ``ttest_ind``).

    ``df`` is the Welch-Satterthwaite approximation; ``alpha`` sets the g interval.
    """
    return _compare(StatTest.WELCH, _welch_t, criterion, (a, b), (cond_a, cond_b), alpha)


def paired(
    criterion: str,
    a: Sample,
    b: Sample,
    cond_a: str,
    cond_b: str,
    alpha: float = 0.05,
) -> Comparison:
    """Paired t-test (scipy ``ttest_rel``): ``a[i]`` and ``b[i]`` are the same item.

    Hedges' g is the between-condition g of :func:`hedges_g`, comparable with welch's; its
    interval ignores the pairing.

    Raises:
        ConfigError: ``a`` and ``b`` differ in length.
    """
    return _compare(StatTest.PAIRED_T, _paired_t, criterion, (a, b), (cond_a, cond_b), alpha)


def wilcoxon(
    criterion: str,
    a: Sample,
    b: Sample,
    cond_a: str,
    cond_b: str,
    alpha: float = 0.05,
) -> Comparison:
    """Wilcoxon signed-rank test of the differences ``a[i] - b[i]`` (scipy ``wilcoxon``).

    Zero differences are dropped (scipy's default). When every difference is zero there is
    no evidence of a difference: W = 0, p = 1.0, and the note says so.

    Raises:
        ConfigError: ``a`` and ``b`` differ in length.
    """
    return _compare(StatTest.WILCOXON, _signed_rank, criterion, (a, b), (cond_a, cond_b), alpha)


# A test's statistic, df and p of the values left once the missing ones are dropped; it adds
# to the notes why a result is NaN and what scipy warned of.
_Statistic = Callable[[np.ndarray, np.ndarray, list[str]], tuple[float, float | None, float]]


def _welch_t(x: np.ndarray, y: np.ndarray, notes: list[str]) -> tuple[float, float, float]:
    n1, n2 = len(x), len(y)
    if n1 < 2 or n2 < 2:
        notes.append("fewer than 2 values on a side")
        return _NAN, _NAN, _NAN
    if _constant(x) and _constant(y):
        notes.append("no variance on either side")
        return _NAN, _NAN, _NAN
    # scipy warns about "catastrophic cancellation" for any constant sample, though Welch
    # is well defined when only one side is constant.
    result, caught = _quietly(
        sps.ttest_ind, x, y, equal_var=False, expected=_constant(x) or _constant(y)
    )
    va, vb = x.var(ddof=1) / n1, y.var(ddof=1) / n2
    df = float((va + vb) ** 2 / (va**2 / (n1 - 1) + vb**2 / (n2 - 1)))
    notes += caught
    return float(result.statistic), df, float(result.pvalue)


def _paired_t(x: np.ndarray, y: np.ndarray, notes: list[str]) -> tuple[float, float, float]:
    n = len(x)
    if n < 2:
        notes.append("fewer than 2 pairs")
        return _NAN, _NAN, _NAN
    if _constant(x - y):
        notes.append("the differences have no variance")
        return _NAN, n - 1, _NAN
    result, caught = _quietly(sps.ttest_rel, x, y)
    notes += caught
    return float(result.statistic), n - 1, float(result.pvalue)


def _signed_rank(x: np.ndarray, y: np.ndarray, notes: list[str]) -> tuple[float, None, float]:
    if len(x) < 2:
        notes.append("fewer than 2 pairs")
        return _NAN, None, _NAN
    if not np.any(x - y):
        notes.append("all differences are zero: p set to 1")
        return 0.0, None, 1.0
    flips, caught = _quietly(_signed_rank_flips, x - y)
    if flips is None:
        result, caught = _quietly(sps.wilcoxon, x, y)
        flips = float(result.statistic), float(result.pvalue)
    notes += caught
    return flips[0], None, flips[1]


#: Up to this many pairs, scipy's ``wilcoxon`` tests tied or zero differences by an exact
#: permutation test over all 2**n sign flips (2**13 is below its 9,999 resamples).
_ALL_FLIPS_MAX_PAIRS = 13


def _signed_rank_flips(d: np.ndarray) -> tuple[float, float] | None:
    """W and the two-sided p of scipy's ``wilcoxon`` where it enumerates the sign flips (at
    most 13 differences, some tied or zero), or None where it does not.

    The same test scipy runs, every flip at once: scipy evaluates its statistic once per flip
    in Python, about a second of CPU for 12 pairs (a paired study of 12 users, three tests a
    report), where this takes milliseconds. A flip changes no ``|d|``, so the ranks are fixed
    (average ranks of the non-zero ``|d|``; a zero counts on neither side, as scipy's default
    ``zero_method="wilcox"`` drops it) and the statistic of a flip is the rank sum of its
    positive differences: the flips, the statistic and so the p are scipy's.
    """
    nonzero = d != 0
    magnitudes = np.abs(d[nonzero])
    tied = len(np.unique(magnitudes)) < len(magnitudes)
    if len(d) > _ALL_FLIPS_MAX_PAIRS or nonzero.all() and not tied:
        return None
    ranks = np.zeros(len(d))
    ranks[nonzero] = sps.rankdata(magnitudes)

    def positive_rank_sum(flipped: np.ndarray, axis: int) -> np.ndarray:
        return np.sum((flipped > 0) * ranks, axis=axis)

    result = sps.permutation_test(
        (d,), positive_rank_sum, permutation_type="samples", vectorized=True, axis=-1
    )
    r_plus, r_minus = float(np.sum(ranks[d > 0])), float(np.sum(ranks[d < 0]))
    return min(r_plus, r_minus), float(result.pvalue)


def adjust_fdr(comparisons: list[Comparison], alpha: float = 0.05) -> list[Comparison]:
    """New comparisons with Benjamini-Hochberg ``p_adj`` and ``reject`` (statsmodels).

    Comparisons whose p is NaN take no part in the correction (they would poison it): they
    get ``p_adj`` NaN and ``reject`` None. The order is kept.
    """
    tested = [i for i, c in enumerate(comparisons) if math.isfinite(c.p)]
    adjusted = [dataclasses.replace(c, p_adj=_NAN, reject=None) for c in comparisons]
    if tested:
        reject, p_adj, _, _ = multipletests(
            [comparisons[i].p for i in tested], alpha=alpha, method="fdr_bh"
        )
        for i, r, q in zip(tested, reject, p_adj, strict=True):
            adjusted[i] = dataclasses.replace(comparisons[i], p_adj=float(q), reject=bool(r))
    return adjusted


def comparisons_frame(comparisons: Sequence[Comparison]) -> pd.DataFrame:
    """One row per comparison, one column per :class:`Comparison` field, in field order."""
    columns = [f.name for f in dataclasses.fields(Comparison)]
    return pd.DataFrame([dataclasses.asdict(c) for c in comparisons], columns=columns)


def format_table(comparisons: Sequence[Comparison]) -> str:
    """A fixed-width table for the terminal; notes follow as numbered footnotes."""
    header = ["criterion", "A", "mean±sd", "B", "mean±sd", "n", "test", "stat", "df", "p"]
    header += ["p_adj", "reject", "g [CI]"]
    rows = [header]
    footnotes: list[str] = []
    for c in comparisons:
        criterion = c.criterion
        if c.note:
            footnotes.append(f"[{len(footnotes) + 1}] {c.criterion}: {c.note}")
            criterion += f" [{len(footnotes)}]"
        reject = "-" if c.reject is None else ("yes" if c.reject else "no")
        rows.append(
            [
                criterion,
                c.condition_a,
                f"{c.mean_a:.2f}±{c.sd_a:.2f}",
                c.condition_b,
                f"{c.mean_b:.2f}±{c.sd_b:.2f}",
                f"{c.n_a}/{c.n_b}",
                c.test,
                f"{c.statistic:.2f}",
                "-" if c.df is None else f"{c.df:.1f}",
                _format_p(c.p),
                _format_p(c.p_adj),
                reject,
                f"{c.hedges_g:.2f} [{c.g_ci_low:.2f}, {c.g_ci_high:.2f}]",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    # Text columns read best left-aligned, numbers right-aligned.
    left = {0, 1, 3, 6}
    lines = [
        "  ".join(
            cell.ljust(w) if i in left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + footnotes)


def _format_p(p: float | None) -> str:
    if p is None:
        return "-"
    if math.isnan(p):
        return "nan"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _drop_missing(
    a: Sample, b: Sample, *, paired: bool
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if paired:
        if len(x) != len(y):
            raise ConfigError(f"paired samples differ in length: {len(x)} vs {len(y)}")
        keep = ~(np.isnan(x) | np.isnan(y))
        dropped = int((~keep).sum())
        x, y = x[keep], y[keep]
        notes = [f"dropped {dropped} pairs with a missing value"] if dropped else []
    else:
        nan_x, nan_y = np.isnan(x), np.isnan(y)
        dropped = int(nan_x.sum() + nan_y.sum())
        x, y = x[~nan_x], y[~nan_y]
        notes = [f"dropped {dropped} missing values"] if dropped else []
    return x, y, notes


def _constant(values: np.ndarray) -> bool:
    return bool(np.ptp(values) == 0)


def _quietly(
    fn: Callable[..., Any], *args: Any, expected: bool = False, **kwargs: Any
) -> tuple[Any, list[str]]:
    """Call ``fn``; return its result and its warnings as notes (none if ``expected``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args, **kwargs)
    messages = [] if expected else list(dict.fromkeys(f"scipy: {w.message}" for w in caught))
    return result, messages


def _compare(
    test: StatTest,
    statistic: _Statistic,
    criterion: str,
    samples: tuple[Sample, Sample],
    conditions: tuple[str, str],
    alpha: float,
) -> Comparison:
    """The frame of the three tests: the missing values dropped (pairwise for the paired
    tests), the test's statistic, the samples' means and sds, Hedges' g and the notes."""
    x, y, notes = _drop_missing(*samples, paired=test != StatTest.WELCH)
    value, df, p = statistic(x, y, notes)
    g, low, high = hedges_g(x, y, alpha)
    return Comparison(
        criterion=criterion,
        condition_a=conditions[0],
        condition_b=conditions[1],
        n_a=len(x),
        n_b=len(y),
        mean_a=float(x.mean()) if len(x) else _NAN,
        mean_b=float(y.mean()) if len(y) else _NAN,
        sd_a=float(x.std(ddof=1)) if len(x) > 1 else _NAN,
        sd_b=float(y.std(ddof=1)) if len(y) > 1 else _NAN,
        test=test,
        statistic=value,
        df=df,
        p=p,
        p_adj=None,
        reject=None,
        hedges_g=g,
        g_ci_low=low,
        g_ci_high=high,
        note="; ".join(notes),
    )
