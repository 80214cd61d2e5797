"""Krippendorff's alpha between judges, interval and ordinal, in closed form (sync, pure).

Records are the units and judges the coders; a missing score (NaN) is a missing value, and a
record fewer than two judges scored pairs with nothing and drops out (Krippendorff 2011,
"Computing Krippendorff's Alpha-Reliability"). For the pairable values ``v`` (``n`` of them,
``m_u`` in record ``u``)::

    alpha = 1 - (n - 1) * sum_u S_u / (2 * n * sum_a (v_a - mean v)^2)
    S_u   = sum over ordered pairs i != j of record u of (v_i - v_j)^2 / (m_u - 1)

which is ``1 - D_o / D_e`` with the coincidence matrix summed out for the interval metric
(``delta = (c - k)^2``). The ordinal metric, ``delta_ck = (sum_{g=c..k} n_g - (n_c + n_k)/2)^2``,
is the squared difference of the two values' *mid-ranks* among all pairable values, so ordinal
alpha is interval alpha on those mid-ranks.

Value domain of the ordinal level: weighted scores are continuous (a mean of ratings, or of a
probability distribution), so the domain is the distinct observed values, rounded to
:data:`TIES` decimals so that two means equal but for the last bit are one value. A value of a
wider domain that nobody used has ``n_g = 0`` and changes no distance, so any superset (the
rating scale's grid, say) gives the same alpha.

Why not ``krippendorff.alpha`` itself (used for the draws in :mod:`.trust`, where values are
whole ratings): it builds a records x values x values array, and continuous scores have about
as many distinct values as scores. On 300 records x 3 judges it took 63 s and 5.4 GB
(krippendorff 0.9.0), and the bootstrap calls it a thousand times. The closed form is
O(records x judges^2) and equals the package to 1e-9 (tests/test_agreement.py).

The bootstrap interval is a seeded percentile bootstrap over the pairable records:
``bootstrap`` resamples of them with replacement (``numpy.random.default_rng(seed)``, one
``integers(0, U, U)`` draw per resample, the same resample for both levels); a resample on
which alpha is undefined (no spread) is left out and counted. ``scipy.stats.bootstrap`` is not
used: its vectorised statistic would hand over every resample at once, and it has no way to
leave out the undefined ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Weighted scores equal to this many decimals are one value (ties) at the ordinal level.
TIES = 9


@dataclass(frozen=True)
class AlphaBootstrap:
    """The percentile interval of each level, and how many resamples had no alpha."""

    interval: tuple[float, float]
    ordinal: tuple[float, float]
    undefined_interval: int
    undefined_ordinal: int


def pairable(scores: np.ndarray) -> np.ndarray:
    """The records (rows) of ``scores`` (records x judges, NaN missing) with two or more scores."""
    return (~np.isnan(scores)).sum(axis=1) >= 2


def alpha_interval(scores: np.ndarray) -> float:
    """Krippendorff's alpha, interval level, of records x judges ``scores`` (NaN: missing).

    NaN when no record has two scores or the pairable scores do not vary (no expected
    disagreement: alpha is 0 / 0).
    """
    units = _Units(scores[pairable(scores)])
    return units.alpha(units.interval, np.ones(units.count))


def alpha_ordinal(scores: np.ndarray) -> float:
    """Krippendorff's alpha, ordinal level: the interval formula on mid-ranks (see module)."""
    units = _Units(scores[pairable(scores)])
    weights = np.ones(units.count)
    return units.alpha(units.ranked(weights), weights)


def bootstrap_alpha(
    scores: np.ndarray, *, bootstrap: int, seed: int, confidence: float
) -> AlphaBootstrap:
    """Percentile intervals of both alphas over resamples of the pairable records."""
    units = _Units(scores[pairable(scores)])
    if bootstrap <= 0 or units.count == 0:
        return AlphaBootstrap((math.nan, math.nan), (math.nan, math.nan), 0, 0)
    rng = np.random.default_rng(seed)
    interval = np.empty(bootstrap)
    ordinal = np.empty(bootstrap)
    for round_ in range(bootstrap):
        # A record drawn w times counts w times; one not drawn, 0 times.
        picks = rng.integers(0, units.count, size=units.count)
        weights = np.bincount(picks, minlength=units.count).astype(float)
        interval[round_] = units.alpha(units.interval, weights)
        ordinal[round_] = units.alpha(units.ranked(weights), weights)
    return AlphaBootstrap(
        _percentile(interval, confidence),
        _percentile(ordinal, confidence),
        int(np.isnan(interval).sum()),
        int(np.isnan(ordinal).sum()),
    )


@dataclass(frozen=True)
class _Level:
    """Per value (flat, record by record) the number alpha compares, and per record the sum
    of its squared deviations from the record's own mean."""

    values: np.ndarray
    within: np.ndarray


class _Units:
    """The pairable records as flat values (which record each belongs to, its place among the
    distinct values equal to :data:`TIES` decimals), shared by every resample: a resample only
    reweighs records, so nothing is sorted again."""

    def __init__(self, scores: np.ndarray) -> None:
        present = ~np.isnan(scores)
        self.count = len(scores)
        self.record = np.nonzero(present)[0]
        self.m = present.sum(axis=1).astype(float)
        flat = scores[present]
        distinct, group = np.unique(np.round(flat, TIES), return_inverse=True)
        self.distinct = len(distinct)
        self.group = group.ravel()
        self.interval = self._level(flat)

    def _level(self, values: np.ndarray) -> _Level:
        sums = np.bincount(self.record, weights=values, minlength=self.count)
        means = sums / np.maximum(self.m, 1.0)
        deviation = values - means[self.record]
        within = np.bincount(self.record, weights=deviation**2, minlength=self.count)
        return _Level(values, within)

    def _value_counts(self, weights: np.ndarray) -> np.ndarray:
        return np.bincount(self.group, weights=weights[self.record], minlength=self.distinct)

    def ranked(self, weights: np.ndarray) -> _Level:
        """Each value's mid-rank among all values, record ``u``'s counted ``weights[u]`` times."""
        n_g = self._value_counts(weights)
        # sum_{h < g} n_h + (n_g + 1) / 2, the average of the ranks value g occupies.
        midrank = np.cumsum(n_g) - n_g + (n_g + 1) / 2
        return self._level(midrank[self.group])

    def alpha(self, level: _Level, weights: np.ndarray) -> float:
        """Alpha of one level, record ``u`` counted ``weights[u]`` times (a resample)."""
        n = _dot(weights, self.m)
        if n < 2 or (self._value_counts(weights) > 0).sum() < 2:
            return math.nan  # nothing pairs, or one value only: expected disagreement 0
        per_value = weights[self.record]
        mean = _dot(per_value, level.values) / n
        spread = _dot(per_value, (level.values - mean) ** 2)
        # sum over ordered pairs i != j of (v_i - v_j)^2 = 2 * m_u * sum_i (v_i - mean_u)^2.
        observed = _dot(weights, 2 * self.m * level.within / np.maximum(self.m - 1, 1.0))
        return 1.0 - (n - 1) * observed / (2 * n * spread)


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    # Not ``a @ b``: BLAS starts its threads for each call, and on a busy machine they wait
    # for cores; the bootstrap calls this thousands of times.
    return float(np.multiply(a, b).sum())


def _percentile(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    defined = draws[~np.isnan(draws)]
    if len(defined) == 0:
        return math.nan, math.nan
    tail = (1 - confidence) / 2
    low, high = np.quantile(defined, [tail, 1 - tail])
    return float(low), float(high)
