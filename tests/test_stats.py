"""Tests for scoring.stats against scipy/statsmodels called directly and formulas by hand."""

from __future__ import annotations

import dataclasses
import math
import statistics
import warnings
from statistics import NormalDist

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from geval_async.errors import ConfigError
from geval_async.scoring.stats.comparisons import (
    Comparison,
    adjust_fdr,
    comparisons_frame,
    format_table,
    hedges_g,
    paired,
    welch,
    wilcoxon,
)

# Weighted G-Eval scores of two conditions; A has 12 items, B 10.
A = [3.2, 3.9, 4.1, 2.8, 3.6, 4.4, 3.0, 3.7, 4.0, 3.3, 2.9, 3.8]
B = [3.9, 4.3, 4.6, 3.5, 4.1, 4.8, 3.6, 4.2, 4.7, 3.4]
# Paired: the same 10 items under both conditions.
PA = A[:10]
PB = B

TOL = 1e-12


def _hedges_by_hand(a: list[float], b: list[float], alpha: float) -> tuple[float, float, float]:
    n1, n2 = len(a), len(b)
    s1, s2 = statistics.variance(a), statistics.variance(b)
    pooled_sd = math.sqrt(((n1 - 1) * s1 + (n2 - 1) * s2) / (n1 + n2 - 2))
    j = 1 - 3 / (4 * (n1 + n2) - 9)
    g = j * (statistics.fmean(a) - statistics.fmean(b)) / pooled_sd
    se = math.sqrt((n1 + n2) / (n1 * n2) + g**2 / (2 * (n1 + n2)))
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return g, g - z * se, g + z * se


# --- Welch ---------------------------------------------------------------------------------


def test_welch_matches_scipy_and_the_welch_satterthwaite_df() -> None:
    c = welch("coherence", A, B, "base", "new")
    expected = sps.ttest_ind(A, B, equal_var=False)
    assert c.statistic == pytest.approx(expected.statistic, abs=TOL)
    assert c.p == pytest.approx(expected.pvalue, abs=TOL)

    v1, v2 = statistics.variance(A) / len(A), statistics.variance(B) / len(B)
    df = (v1 + v2) ** 2 / (v1**2 / (len(A) - 1) + v2**2 / (len(B) - 1))
    assert c.df == pytest.approx(df, abs=TOL)
    assert c.df == pytest.approx(expected.df, abs=TOL)

    assert (c.criterion, c.condition_a, c.condition_b, c.test) == (
        "coherence",
        "base",
        "new",
        "welch",
    )
    assert (c.n_a, c.n_b) == (12, 10)
    assert c.mean_a == pytest.approx(statistics.fmean(A), abs=TOL)
    assert c.mean_b == pytest.approx(statistics.fmean(B), abs=TOL)
    assert c.sd_a == pytest.approx(statistics.stdev(A), abs=TOL)
    assert c.sd_b == pytest.approx(statistics.stdev(B), abs=TOL)
    assert (c.p_adj, c.reject, c.note) == (None, None, "")
    # A scores lower than B, so t and g are both negative.
    assert c.statistic < 0 and c.hedges_g < 0


def test_welch_with_one_constant_side_is_still_a_welch_test() -> None:
    a, b = [3.0, 3.0, 3.0, 3.0], [3.5, 4.0, 4.5, 4.0]
    c = welch("fluency", a, b, "base", "new")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's "nearly identical" warning about `a`
        expected = sps.ttest_ind(a, b, equal_var=False)
    assert c.statistic == pytest.approx(expected.statistic, abs=TOL)
    assert c.p == pytest.approx(expected.pvalue, abs=TOL)
    assert c.df == pytest.approx(3.0, abs=TOL)  # all variance is in b: df = n_b - 1
    assert c.note == ""


@pytest.mark.parametrize(
    ("a", "b", "note"),
    [
        ([3.0], [3.0, 4.0, 5.0], "fewer than 2"),
        ([], [3.0, 4.0], "fewer than 2"),
        ([3.0, 3.0, 3.0], [4.0, 4.0], "no variance"),
        ([3.0, 3.0], [3.0, 3.0], "no variance"),
    ],
)
def test_welch_on_degenerate_data_is_nan_with_a_note(a, b, note: str) -> None:
    c = welch("relevance", a, b, "base", "new")
    assert math.isnan(c.statistic) and math.isnan(c.p) and math.isnan(c.hedges_g)
    assert note in c.note


def test_welch_drops_missing_scores_and_says_so() -> None:
    c = welch("coherence", [*A, float("nan")], [float("nan"), *B], "base", "new")
    clean = welch("coherence", A, B, "base", "new")
    assert (c.n_a, c.n_b, c.statistic, c.p) == (clean.n_a, clean.n_b, clean.statistic, clean.p)
    assert "dropped 2 missing values" in c.note


# --- Hedges' g -----------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_hedges_g_matches_the_formula_by_hand(alpha: float) -> None:
    got = hedges_g(A, B, alpha=alpha)
    want = _hedges_by_hand(A, B, alpha)
    assert got == pytest.approx(want, abs=TOL)


def test_hedges_g_on_a_worked_example() -> None:
    # Means 3 and 2, both variances 1, n = 4 + 4: d = 1, J = 1 - 3/23 = 20/23.
    g, low, high = hedges_g([2, 3, 3, 4], [1, 2, 2, 3])
    assert statistics.variance([2, 3, 3, 4]) == pytest.approx(2 / 3)  # pooled var = 2/3
    d = 1 / math.sqrt(2 / 3)
    assert g == pytest.approx(20 / 23 * d, abs=TOL)
    half = NormalDist().inv_cdf(0.975) * math.sqrt(8 / 16 + g**2 / 16)
    assert (low, high) == pytest.approx((g - half, g + half), abs=TOL)


def test_hedges_g_is_nan_without_variance_or_data() -> None:
    assert all(math.isnan(v) for v in hedges_g([2, 2], [2, 2]))
    assert all(math.isnan(v) for v in hedges_g([2], [1, 3]))


# --- paired t and Wilcoxon -----------------------------------------------------------------


def test_paired_matches_scipy_ttest_rel() -> None:
    c = paired("coherence", PA, PB, "base", "new")
    expected = sps.ttest_rel(PA, PB)
    assert c.statistic == pytest.approx(expected.statistic, abs=TOL)
    assert c.p == pytest.approx(expected.pvalue, abs=TOL)
    assert c.df == 9
    assert (c.test, c.n_a, c.n_b) == ("paired-t", 10, 10)
    assert (c.hedges_g, c.g_ci_low, c.g_ci_high) == pytest.approx(_hedges_by_hand(PA, PB, 0.05))


def test_paired_drops_incomplete_pairs() -> None:
    c = paired("coherence", [*PA, 4.0, float("nan")], [*PB, float("nan"), 3.0], "base", "new")
    clean = paired("coherence", PA, PB, "base", "new")
    assert (c.n_a, c.statistic, c.p) == (10, clean.statistic, clean.p)
    assert "dropped 2 pairs" in c.note


@pytest.mark.parametrize("test", [paired, wilcoxon])
def test_paired_tests_need_equal_lengths(test) -> None:
    with pytest.raises(ConfigError):
        test("coherence", [1.0, 2.0, 3.0], [1.0, 2.0], "base", "new")


@pytest.mark.parametrize(
    ("a", "b"),
    [([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]), ([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])],
    ids=["all-zero-differences", "constant-differences"],
)
def test_paired_t_without_variance_in_the_differences_is_nan(a, b) -> None:
    c = paired("coherence", a, b, "base", "new")
    assert math.isnan(c.statistic) and math.isnan(c.p)
    assert c.df == 2
    assert "no variance" in c.note


def test_wilcoxon_matches_scipy() -> None:
    c = wilcoxon("coherence", PA, PB, "base", "new")
    expected = sps.wilcoxon(PA, PB)
    assert c.statistic == pytest.approx(expected.statistic, abs=TOL)
    assert c.p == pytest.approx(expected.pvalue, abs=TOL)
    assert (c.test, c.df, c.note) == ("wilcoxon", None, "")


def test_wilcoxon_with_some_zero_differences_matches_scipy() -> None:
    a, b = [1, 2, 3, 4, 5, 6, 7, 8], [1, 3, 2, 5, 9, 3, 9, 10]
    c = wilcoxon("coherence", a, b, "base", "new")
    expected = sps.wilcoxon(a, b)
    assert (c.statistic, c.p) == pytest.approx((expected.statistic, expected.pvalue), abs=TOL)


# Scores of a small paired study: means of a few draws on a 1-5 scale, so tied and zero
# differences are the rule (where scipy enumerates every sign flip and ours does too, at once).
_DRAW_MEANS = st.sampled_from([1.0 + k / 3 for k in range(13)])


@settings(max_examples=20)  # scipy's own answer costs about a second of CPU an example
@given(st.lists(st.tuples(_DRAW_MEANS, _DRAW_MEANS), min_size=2, max_size=15))
def test_wilcoxon_of_small_tied_samples_is_scipys_to_the_last_bit(
    pairs: list[tuple[float, float]],
) -> None:
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    c = wilcoxon("coherence", a, b, "base", "new")
    if a == b:
        assert (c.statistic, c.p) == (0.0, 1.0)
        return
    expected = sps.wilcoxon(a, b)
    assert (c.statistic, c.p) == (float(expected.statistic), float(expected.pvalue))
    assert (c.test, c.df, c.note) == ("wilcoxon", None, "")


def test_wilcoxon_with_all_zero_differences_is_p_one_and_says_so() -> None:
    c = wilcoxon("coherence", [3.0, 4.0, 4.5], [3.0, 4.0, 4.5], "base", "new")
    assert (c.statistic, c.p, c.df) == (0.0, 1.0, None)
    assert "all differences are zero" in c.note
    assert c.hedges_g == 0.0


# --- Benjamini-Hochberg --------------------------------------------------------------------


def _with_p(*ps: float) -> list[Comparison]:
    base = welch("c", A, B, "base", "new")
    return [dataclasses.replace(base, criterion=f"c{i}", p=p) for i, p in enumerate(ps)]


def test_adjust_fdr_leaves_nan_out_of_the_correction() -> None:
    comparisons = _with_p(0.01, float("nan"), 0.04, 0.03, 0.5)
    adjusted = adjust_fdr(comparisons, alpha=0.05)

    # By hand over the 4 real p-values: sorted 0.01, 0.03, 0.04, 0.5 -> p * 4 / rank =
    # 0.04, 0.06, 0.0533.., 0.5, then the running minimum from the top:
    # 0.04, 0.0533.., 0.0533.., 0.5.
    assert [c.p_adj for c in adjusted][0] == pytest.approx(0.04, abs=TOL)
    assert [c.p_adj for c in adjusted][2:] == pytest.approx([0.16 / 3, 0.16 / 3, 0.5], abs=TOL)
    assert [c.reject for c in adjusted] == [True, None, False, False, False]
    assert math.isnan(adjusted[1].p_adj)

    reject, p_adj, _, _ = multipletests([0.01, 0.04, 0.03, 0.5], alpha=0.05, method="fdr_bh")
    kept = [adjusted[i] for i in (0, 2, 3, 4)]
    assert [c.p_adj for c in kept] == pytest.approx(list(p_adj), abs=TOL)
    assert [c.reject for c in kept] == list(reject)


def test_adjust_fdr_returns_new_objects_in_order() -> None:
    comparisons = _with_p(0.2, 0.001)
    adjusted = adjust_fdr(comparisons)
    assert [c.criterion for c in adjusted] == ["c0", "c1"]
    assert all(c.p_adj is None for c in comparisons)
    assert adjust_fdr([]) == []


def test_adjust_fdr_with_only_nan_p_values() -> None:
    adjusted = adjust_fdr(_with_p(float("nan"), float("nan")))
    assert all(math.isnan(c.p_adj) and c.reject is None for c in adjusted)


# --- presentation --------------------------------------------------------------------------


def test_comparisons_frame_has_one_row_per_comparison_and_the_field_columns() -> None:
    comparisons = adjust_fdr(
        [welch("coherence", A, B, "base", "new"), paired("fluency", PA, PB, "base", "new")]
    )
    frame = comparisons_frame(comparisons)
    assert list(frame.columns) == [f.name for f in dataclasses.fields(Comparison)]
    assert list(frame["criterion"]) == ["coherence", "fluency"]
    assert frame.loc[1, "df"] == 9
    assert list(comparisons_frame([]).columns) == list(frame.columns)


def test_format_table_aligns_columns_and_footnotes_notes() -> None:
    comparisons = adjust_fdr(
        [
            welch("coherence", A, B, "base", "new"),
            welch("relevance", [3.0, 3.0], [3.0, 3.0], "base", "new"),
            wilcoxon("fluency", PA, PB, "base-long-name", "new"),
        ]
    )
    lines = format_table(comparisons).splitlines()
    header, rows, footnotes = lines[0], lines[2:5], lines[5:]
    # Every row's test name starts under the "test" header.
    column = header.index("test")
    assert [row[column:].split()[0] for row in rows] == ["welch", "welch", "wilcoxon"]
    assert "relevance [1]" in rows[1]
    assert footnotes == ["[1] relevance: no variance on either side"]
    assert " yes " in rows[0] and " - " in rows[1]
