"""Statistics of pairwise verdicts: win rates, the sign test, position bias, Bradley-Terry.

Per criterion and pair of conditions (``a``, ``b``), from the pairs' combined verdicts (one per
group: a win for ``a`` or ``b``, or a tie, ties counting half):

- ``a_win_rate`` with a Wilson interval over the groups (each group one pair);
- an exact sign test of ``a_wins`` against ``b_wins`` (ties left out), its p adjusted by
  Benjamini-Hochberg across the criteria that compare the same pair;
- ``first_shown_wins``: of the verdicts that chose a side, each order asked counted once, the
  share won by the text shown first, with a Wilson interval. 0.5 is no position bias; a judge
  that favours the first text lies above it, one that favours the last below.

With more than two conditions, Bradley-Terry strengths per criterion (log-strengths centred on
0; a higher one wins more), fitted by ``choix`` (a tie counts as half a win each way), with
percentile intervals from refits on groups drawn again with replacement.

Pure and sync: numpy, scipy, statsmodels and choix; no I/O.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

__all__ = [
    "OUTCOME_COLUMNS",
    "PAIRWISE_COLUMNS",
    "STRENGTH_COLUMNS",
    "VERDICT_COLUMNS",
    "bradley_terry",
    "pairwise_frame",
    "strengths_frame",
    "wilson",
]

# One row per order asked (scoring/scores/pairs.py makes it): ``shown_first_won`` is True when
# the verdict chose the text shown first, False the second, None for a tie or no verdict.
VERDICT_COLUMNS = [
    "criterion",
    "group",
    "a",
    "b",
    "first",
    "verdict",
    "winner",
    "first_share",
    "valid",
    "invalid",
    "reason",
    "shown_first_won",
]
# One row per pair (group, criterion, a, b) with its orders combined: ``winner`` is a, b,
# "tie" or None (an order without a verdict); ``inconsistent``: the orders disagreed.
OUTCOME_COLUMNS = ["criterion", "group", "a", "b", "winner", "inconsistent", "orders"]
PAIRWISE_COLUMNS = [
    "criterion",
    "a",
    "b",
    "pairs",
    "a_wins",
    "b_wins",
    "ties",
    "inconsistent",
    "invalid",
    "a_win_rate",
    "ci_low",
    "ci_high",
    "p",
    "p_adj",
    "first_shown_wins",
    "first_ci_low",
    "first_ci_high",
    "first_shown_verdicts",
]
STRENGTH_COLUMNS = ["criterion", "condition", "strength", "ci_low", "ci_high", "rank", "pairs"]
CONFIDENCE = 0.95
BOOTSTRAP = 500  # refits for the strengths' intervals
SEED = 0


def wilson(successes: float, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of a share (NaN, NaN with no trials)."""
    if trials <= 0:
        return math.nan, math.nan
    low, high = proportion_confint(successes, trials, alpha=1 - confidence, method="wilson")
    return float(low), float(high)


def pairwise_frame(
    outcomes: pd.DataFrame, verdicts: pd.DataFrame, confidence: float = CONFIDENCE
) -> pd.DataFrame:
    """One row per criterion and pair of conditions (:data:`PAIRWISE_COLUMNS`).

    Args:
        outcomes: one row per pair with its orders combined (:data:`OUTCOME_COLUMNS`).
        verdicts: one row per order asked (:data:`VERDICT_COLUMNS`), for the first-shown share.
        confidence: of the intervals.
    """
    rows = []
    for (criterion, a, b), pairs in outcomes.groupby(["criterion", "a", "b"], sort=False):
        valid = pairs[pairs["winner"].notna()]
        a_wins = int((valid["winner"] == a).sum())
        b_wins = int((valid["winner"] == b).sum())
        ties = int((valid["winner"] == "tie").sum())
        count = a_wins + b_wins + ties
        rate = (a_wins + ties / 2) / count if count else math.nan
        low, high = wilson(a_wins + ties / 2, count, confidence)
        decided = a_wins + b_wins
        p = stats.binomtest(a_wins, decided, 0.5).pvalue if decided else math.nan
        shown = verdicts[
            (verdicts["criterion"] == criterion) & (verdicts["a"] == a) & (verdicts["b"] == b)
        ]["shown_first_won"].dropna()
        first = int(shown.astype(bool).sum())
        first_low, first_high = wilson(first, len(shown), confidence)
        rows.append(
            {
                "criterion": criterion,
                "a": a,
                "b": b,
                "pairs": count,
                "a_wins": a_wins,
                "b_wins": b_wins,
                "ties": ties,
                "inconsistent": int(valid["inconsistent"].astype(bool).sum()),
                "invalid": int(pairs["winner"].isna().sum()),
                "a_win_rate": rate,
                "ci_low": low,
                "ci_high": high,
                "p": float(p),
                "p_adj": math.nan,
                "first_shown_wins": first / len(shown) if len(shown) else math.nan,
                "first_ci_low": first_low,
                "first_ci_high": first_high,
                "first_shown_verdicts": len(shown),
            }
        )
    frame = pd.DataFrame(rows, columns=PAIRWISE_COLUMNS)
    # Benjamini-Hochberg across the criteria that compare the same two conditions.
    for _, same in frame.groupby(["a", "b"], sort=False):
        tested = same["p"].notna()
        if tested.any():
            adjusted = multipletests(same.loc[tested, "p"], method="fdr_bh")[1]
            frame.loc[same.index[tested], "p_adj"] = adjusted
    return frame


def _comparisons(
    a: Sequence[str], b: Sequence[str], winners: Sequence[str], index: dict[str, int]
) -> list[tuple[int, int]]:
    """(winner, loser) per pair, each win twice and each tie once each way (half a win)."""
    data: list[tuple[int, int]] = []
    for first, second, winner in zip(a, b, winners, strict=True):
        i, j = index[first], index[second]
        if winner == first:
            data += [(i, j), (i, j)]
        elif winner == second:
            data += [(j, i), (j, i)]
        elif winner == "tie":
            data += [(i, j), (j, i)]
    return data


def bradley_terry(conditions: Sequence[str], pairs: pd.DataFrame) -> np.ndarray:
    """Bradley-Terry log-strengths of ``conditions`` (centred on 0) from combined verdicts
    (rows with ``a``, ``b``, ``winner``); NaN when they cannot be fitted (a condition that
    never wins or never loses has no finite strength)."""
    index = {c: k for k, c in enumerate(conditions)}
    data = _comparisons(list(pairs["a"]), list(pairs["b"]), list(pairs["winner"]), index)
    return _fit(len(conditions), data)


def _fit(
    count: int,
    data: list[tuple[int, int]],
    start: np.ndarray | None = None,
    tol: float = 1e-12,
) -> np.ndarray:
    """choix's ILSR maximum-likelihood fit (``start``: where the iteration begins)."""
    import choix

    if not data:
        return np.full(count, math.nan)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # choix warns before it raises on no convergence
            params = choix.ilsr_pairwise(
                count, data, alpha=0.0, initial_params=start, max_iter=10_000, tol=tol
            )
    except (RuntimeError, ValueError, np.linalg.LinAlgError):
        return np.full(count, math.nan)
    if not np.all(np.isfinite(params)):
        return np.full(count, math.nan)
    return np.asarray(params - params.mean(), dtype=float)


def strengths_frame(
    outcomes: pd.DataFrame,
    confidence: float = CONFIDENCE,
    bootstrap: int = BOOTSTRAP,
    seed: int = SEED,
) -> pd.DataFrame:
    """Bradley-Terry strengths per criterion and condition (:data:`STRENGTH_COLUMNS`), for the
    criteria that compare more than two conditions; empty otherwise."""
    rows = []
    rng = np.random.default_rng(seed)
    tail = (1 - confidence) / 2
    for criterion, pairs in outcomes.groupby("criterion", sort=False):
        valid = pairs[pairs["winner"].notna()]
        conditions = list(dict.fromkeys([*valid["a"], *valid["b"]]))
        if len(conditions) <= 2:
            continue
        strengths = bradley_terry(conditions, valid)
        index = {c: k for k, c in enumerate(conditions)}
        # Each group's comparisons, made once: a refit joins the groups drawn.
        by_group = [
            _comparisons(list(part["a"]), list(part["b"]), list(part["winner"]), index)
            for _, part in valid.groupby("group", sort=False)
        ]
        draws = []
        for _ in range(bootstrap if np.all(np.isfinite(strengths)) else 0):
            chosen = rng.integers(0, len(by_group), len(by_group))
            sample = [c for k in chosen for c in by_group[k]]
            # From the fit on all groups, to a looser tolerance: an interval's ends need
            # three digits, and each refit walks every comparison in Python.
            draws.append(_fit(len(conditions), sample, strengths, tol=1e-8))
        fitted = np.array([d for d in draws if np.all(np.isfinite(d))])
        ranks = pd.Series(-strengths).rank(method="min").to_numpy()
        for k, condition in enumerate(conditions):
            low = float(np.quantile(fitted[:, k], tail)) if len(fitted) else math.nan
            high = float(np.quantile(fitted[:, k], 1 - tail)) if len(fitted) else math.nan
            rows.append(
                {
                    "criterion": criterion,
                    "condition": condition,
                    "strength": float(strengths[k]),
                    "ci_low": low,
                    "ci_high": high,
                    "rank": int(ranks[k]) if np.isfinite(ranks[k]) else None,
                    "pairs": int(((valid["a"] == condition) | (valid["b"] == condition)).sum()),
                }
            )
    return pd.DataFrame(rows, columns=STRENGTH_COLUMNS)
