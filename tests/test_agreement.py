"""Agreement between judges, checked against independent computations and published examples.

Every statistic of :mod:`geval_async.scoring.panel.agreement` is recomputed here another way and
must
agree to 1e-9: Krippendorff's alpha from the coincidence matrix as Krippendorff (2011,
"Computing Krippendorff's Alpha-Reliability") lays it out, and by the ``krippendorff`` package;
the ICC from the two-way ANOVA's sums of squares; Spearman by ``scipy.stats.spearmanr`` on the
records both judges scored; the participation ratio from ``numpy.linalg.eigvalsh``. Published
worked examples pin the formulas themselves: Krippendorff (2011) 4 coders x 12 units (alpha
nominal 0.743, ordinal 0.815, interval 0.849), Shrout & Fleiss (1979) Table 2 (ICC(2,1) 0.29,
ICC(2,k) 0.62), and R's ``ICC`` on McGraw & Wong (1996) Table 6 for the F interval.
"""

from __future__ import annotations

import math
from itertools import combinations, permutations

import krippendorff
import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from geval_async.scoring.panel.agreement import (
    AGREEMENT_COLUMNS,
    JudgeAgreement,
    Statistic,
    agreement_frame,
    judge_agreement,
)
from geval_async.scoring.panel.alpha import alpha_interval, alpha_ordinal, bootstrap_alpha
from geval_async.scoring.panel.icc import icc

NAN = math.nan
# Krippendorff (2011), p. 8: 4 coders (rows) x 12 units (columns), "." missing.
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
        [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
    ]
)
# Shrout & Fleiss (1979) Table 2: 6 targets x 4 judges.
SHROUT_FLEISS = np.array(
    [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]],
    dtype=float,
)
# McGraw & Wong (1996) Table 6: 10 targets x 2 judges.
MCGRAW_WONG = np.array(
    [[103, 119], [82, 65], [116, 106], [102, 102], [99, 105], [98, 100], [104, 107], [62, 85]]
    + [[97, 101], [107, 110]],
    dtype=float,
)


# --- independent computations ----------------------------------------------------------------


def _coincidence_alpha(coders_by_units: np.ndarray, metric: str) -> float:
    """Krippendorff (2011): the coincidence matrix o_ck of the pairable units, n_c its margins,
    alpha = 1 - (n - 1) * sum o_ck delta_ck / sum n_c n_k delta_ck. NaN when undefined."""
    units = [[v for v in unit if not math.isnan(v)] for unit in coders_by_units.T.tolist()]
    units = [unit for unit in units if len(unit) >= 2]
    domain = sorted({v for unit in units for v in unit})
    if len(domain) < 2:
        return NAN
    where = {v: i for i, v in enumerate(domain)}
    o = np.zeros((len(domain), len(domain)))
    for unit in units:
        for a, b in permutations(unit, 2):
            o[where[a], where[b]] += 1 / (len(unit) - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()

    def delta(c: int, k: int) -> float:
        if metric == "nominal":
            return float(c != k)
        if metric == "interval":
            return (domain[c] - domain[k]) ** 2
        lo, hi = min(c, k), max(c, k)  # ordinal
        return (n_c[lo : hi + 1].sum() - (n_c[c] + n_c[k]) / 2) ** 2

    cells = [(c, k) for c in range(len(domain)) for k in range(len(domain))]
    observed = sum(o[c, k] * delta(c, k) for c, k in cells)
    expected = sum(n_c[c] * n_c[k] * delta(c, k) for c, k in cells)
    return 1 - (n - 1) * observed / expected


def _anova_icc(x: np.ndarray) -> tuple[float, float]:
    """ICC(2,1) and ICC(2,k) from the sums of squares (total minus rows minus columns)."""
    n, k = x.shape
    grand = x.sum() / (n * k)
    sst = sum((v - grand) ** 2 for v in x.ravel())
    ssr = k * sum((x[i].sum() / k - grand) ** 2 for i in range(n))
    ssc = n * sum((x[:, j].sum() / n - grand) ** 2 for j in range(k))
    msr, msc = ssr / (n - 1), ssc / (k - 1)
    mse = (sst - ssr - ssc) / ((n - 1) * (k - 1))
    single = (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n)
    average = (msr - mse) / (msr + (msc - mse) / n)
    return single, average


def _agree(x: np.ndarray, **options: object) -> JudgeAgreement:
    judges = [f"j{j}" for j in range(x.shape[1])]
    records = [f"r{i}" for i in range(x.shape[0])]
    return judge_agreement("coherence", x, judges, records, **options)  # type: ignore[arg-type]


def _spearman(x: np.ndarray, a: int, b: int) -> tuple[int, float]:
    both = ~np.isnan(x[:, a]) & ~np.isnan(x[:, b])
    return int(both.sum()), float(scipy_stats.spearmanr(x[both, a], x[both, b]).statistic)


# Weighted scores: a mean of up to 20 ratings on 1..5 (ties likely) or any 1..5 float.
GRID = st.integers(20, 100).map(lambda v: v / 20)
SCORE = st.one_of(GRID, st.floats(1, 5).map(lambda v: round(v, 6)))


@st.composite
def panels(draw: st.DrawFn, min_records: int = 2, missing: bool = True) -> np.ndarray:
    """Records x judges weighted scores, some NaN (a judge that could not score a record)."""
    records = draw(st.integers(min_records, 14))
    judges = draw(st.integers(2, 4))
    cells = st.one_of(st.just(NAN), SCORE) if missing else SCORE
    values = draw(st.lists(cells, min_size=records * judges, max_size=records * judges))
    return np.array(values, dtype=float).reshape(records, judges)


# --- Krippendorff's alpha --------------------------------------------------------------------


def test_alpha_matches_krippendorff_2011_worked_example() -> None:
    assert round(_coincidence_alpha(KRIPPENDORFF_2011, "nominal"), 3) == 0.743
    assert round(_coincidence_alpha(KRIPPENDORFF_2011, "ordinal"), 3) == 0.815
    assert round(_coincidence_alpha(KRIPPENDORFF_2011, "interval"), 3) == 0.849
    units = KRIPPENDORFF_2011.T  # records x judges, as the panel hands it over
    assert alpha_interval(units) == pytest.approx(
        _coincidence_alpha(KRIPPENDORFF_2011, "interval"), abs=1e-9
    )
    assert alpha_ordinal(units) == pytest.approx(
        _coincidence_alpha(KRIPPENDORFF_2011, "ordinal"), abs=1e-9
    )
    agreement = _agree(units)
    assert agreement.alpha_interval.value == pytest.approx(0.849, abs=5e-4)
    assert agreement.alpha_ordinal.value == pytest.approx(0.815, abs=5e-4)
    assert agreement.alpha_interval.records == 11  # unit 12 has one value: it pairs with none


@settings(max_examples=150, deadline=None)
@given(panels())
def test_alpha_equals_the_coincidence_matrix_and_the_package(x: np.ndarray) -> None:
    coders = x.T
    for level, ours in (("interval", alpha_interval(x)), ("ordinal", alpha_ordinal(x))):
        hand = _coincidence_alpha(coders, level)
        if math.isnan(hand):
            assert math.isnan(ours), f"{level}: alpha is undefined here, got {ours}"
            continue
        assert ours == pytest.approx(hand, abs=1e-9), level
        package = krippendorff.alpha(reliability_data=coders, level_of_measurement=level)
        assert ours == pytest.approx(float(package), abs=1e-9), level


@settings(max_examples=40, deadline=None)
@given(panels(), st.integers(0, 5))
def test_ordinal_alpha_is_the_same_on_the_whole_rating_grid(x: np.ndarray, shift: int) -> None:
    """The docstring's value domain: unused values of a wider domain change nothing."""
    hand = _coincidence_alpha(x.T, "ordinal")
    if math.isnan(hand) or not np.isin(x[~np.isnan(x)], np.arange(20, 101) / 20).all():
        return
    grid = np.arange(20 - shift, 101 + shift) / 20
    wide = krippendorff.alpha(x.T, value_domain=grid, level_of_measurement="ordinal")
    assert alpha_ordinal(x) == pytest.approx(float(wide), abs=1e-9)


def test_alpha_bootstrap_is_the_documented_percentile_bootstrap() -> None:
    """Pairable records resampled with numpy's default_rng(seed).integers(0, U, U) per round;
    the interval is the percentiles of the alphas, each computed here from its coincidence
    matrix."""
    rng = np.random.default_rng(5)
    truth = rng.normal(3, 1, 30)
    x = np.stack([truth + rng.normal(0, 0.6, 30) for _ in range(3)], axis=1).round(2)
    x[rng.random(x.shape) < 0.2] = NAN
    pairable = x[(~np.isnan(x)).sum(axis=1) >= 2]
    draws = np.random.default_rng(11)
    hand = {"interval": [], "ordinal": []}
    for _ in range(60):
        sample = pairable[draws.integers(0, len(pairable), size=len(pairable))]
        for level in hand:
            hand[level].append(_coincidence_alpha(sample.T, level))
    ours = bootstrap_alpha(x, bootstrap=60, seed=11, confidence=0.9)
    for level, interval in (("interval", ours.interval), ("ordinal", ours.ordinal)):
        expected = np.quantile(hand[level], [0.05, 0.95])
        assert interval == pytest.approx(tuple(expected), abs=1e-9), level
    assert ours.undefined_interval == ours.undefined_ordinal == 0


def test_alpha_bootstrap_is_reproducible_with_a_seed() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(3, 1, (40, 3))
    x[rng.random(x.shape) < 0.15] = NAN
    first, again = _agree(x, bootstrap=300, seed=7), _agree(x, bootstrap=300, seed=7)
    other = _agree(x, bootstrap=300, seed=8)
    for name in ("alpha_interval", "alpha_ordinal"):
        one, two, three = (getattr(a, name) for a in (first, again, other))
        assert (one.ci_low, one.ci_high) == (two.ci_low, two.ci_high)
        assert (one.ci_low, one.ci_high) != (three.ci_low, three.ci_high)
        assert one.ci_low < one.value < one.ci_high
        assert "300 resamples, seed 7" in one.method


# --- ICC -------------------------------------------------------------------------------------


def test_icc_matches_shrout_and_fleiss_table_2() -> None:
    result = icc(SHROUT_FLEISS, confidence=0.95)
    assert round(result.single, 2) == 0.29
    assert round(result.average, 2) == 0.62
    assert (result.single, result.average) == pytest.approx(_anova_icc(SHROUT_FLEISS), abs=1e-9)


def test_icc_interval_matches_r_on_mcgraw_and_wong_table_6() -> None:
    """R's ``ICC`` (DescTools/psych) prints ICC2 0.720 [0.228, 0.922], ICC2k 0.837 [0.371,
    0.959] for these data (McGraw & Wong 1996's F interval, Table 7 case 2A)."""
    result = icc(MCGRAW_WONG, confidence=0.95)
    assert round(result.single, 3) == 0.720
    assert [round(v, 3) for v in result.single_interval] == [0.228, 0.922]
    assert round(result.average, 3) == 0.837
    assert [round(v, 3) for v in result.average_interval] == [0.371, 0.959]


@settings(max_examples=100, deadline=None)
@given(panels(min_records=3))
@example(np.array([[2.0, 1.0], [np.nan, np.nan], [1.0, 2.0]]))
def test_icc_equals_the_anova_on_the_records_every_judge_scored(x: np.ndarray) -> None:
    agreement = _agree(x, bootstrap=0)
    complete = ~np.isnan(x).any(axis=1)
    expected_dropped = tuple(f"r{i}" for i in np.nonzero(~complete)[0])
    scored = ~np.isnan(x).all(axis=0)
    if scored.sum() < x.shape[1]:
        return  # a judge without scores is left out: its own test below
    assert agreement.incomplete == expected_dropped
    kept = x[complete]
    single, average = agreement.icc_single, agreement.icc_average
    if len(kept) < 2 or np.ptp(kept) == 0:
        assert math.isnan(single.value) and single.note
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        hand_single, hand_average = _anova_icc(kept)
    if not math.isfinite(hand_single):
        # The ANOVA's denominator is zero (no variation between records or judges beyond the
        # residual): the ICC is undefined, reported as NaN with the reason, never as -inf.
        assert math.isnan(single.value) and "no variation" in single.note
        return
    assert single.value == pytest.approx(hand_single, abs=1e-9)
    if hand_single <= -1 / (x.shape[1] - 1) + 1e-9:  # Spearman-Brown's pole and beyond
        assert math.isnan(average.value) and "ICC(2,k) undefined" in average.note
    else:
        # Near Spearman-Brown's pole ICC(2,k) is large: 1e-9 of it, or 1e-9.
        assert average.value == pytest.approx(hand_average, rel=1e-9, abs=1e-9)
    assert single.records == average.records == len(kept)
    if expected_dropped:
        assert f"{len(expected_dropped)} record(s) not scored by every judge" in single.note
    if not math.isnan(single.ci_low):
        assert single.ci_low <= single.value <= single.ci_high


# --- Spearman and the effective number of judges ---------------------------------------------


@settings(max_examples=100, deadline=None)
@given(panels())
def test_pairwise_spearman_equals_scipy_on_the_records_both_scored(x: np.ndarray) -> None:
    agreement = _agree(x, bootstrap=0)
    pairs = {(p.judge_a, p.judge_b): p for p in agreement.pairs}
    assert len(pairs) == math.comb(x.shape[1], 2)
    for a, b in combinations(range(x.shape[1]), 2):
        pair = pairs[(f"j{a}", f"j{b}")]
        both = ~np.isnan(x[:, a]) & ~np.isnan(x[:, b])
        assert pair.records == both.sum()
        if both.sum() < 2 or np.ptp(x[both, a]) == 0 or np.ptp(x[both, b]) == 0:
            assert math.isnan(pair.spearman) and pair.note
            continue
        assert pair.spearman == pytest.approx(_spearman(x, a, b)[1], abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(panels(min_records=4, missing=False))
def test_effective_judges_are_kish_and_the_participation_ratio(x: np.ndarray) -> None:
    agreement = _agree(x, bootstrap=0)
    k = x.shape[1]
    if any(np.ptp(x[:, j]) == 0 for j in range(k)):
        assert math.isnan(agreement.effective_judges.value)
        assert agreement.effective_judges.note
        return
    r = np.eye(k)
    for a, b in combinations(range(k), 2):
        r[a, b] = r[b, a] = _spearman(x, a, b)[1]
    mean = r[np.triu_indices(k, 1)].mean()
    assert agreement.mean_spearman.value == pytest.approx(mean, abs=1e-9)
    kish = k / (1 + (k - 1) * max(mean, 0))
    assert agreement.effective_judges.value == pytest.approx(kish, abs=1e-9)
    eigen = np.linalg.eigvalsh(r)
    ratio = eigen.sum() ** 2 / (eigen**2).sum()
    assert agreement.effective_judges_eigen.value == pytest.approx(ratio, abs=1e-9)
    assert 1 - 1e-9 <= agreement.effective_judges_eigen.value <= k + 1e-9


def test_judges_that_rank_alike_count_as_one() -> None:
    truth = np.arange(10, dtype=float)
    x = np.stack([truth, truth * 2 + 1, truth / 3], axis=1)  # same ranking, other scales
    agreement = _agree(x, bootstrap=0)
    assert agreement.effective_judges.value == pytest.approx(1.0, abs=1e-12)
    assert agreement.effective_judges_eigen.value == pytest.approx(1.0, abs=1e-12)
    # Same ranking, far apart in value: ordinal alpha (one ranking of every judge's scores)
    # sees more agreement than interval, if not all of it.
    assert agreement.alpha_interval.value < agreement.alpha_ordinal.value < 1


# --- edge cases ------------------------------------------------------------------------------


def test_one_judge_gives_no_agreement_and_says_so() -> None:
    agreement = _agree(np.array([[3.0], [4.0], [2.5]]))
    for estimate in (agreement.alpha_interval, agreement.icc_single, agreement.icc_average):
        assert math.isnan(estimate.value)
        assert "one judge" in estimate.note
    assert agreement.pairs == ()
    assert agreement.effective_judges.value == 1.0


def test_a_judge_without_scores_is_left_out_and_named() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(3, 1, (12, 3))
    x[:, 1] = NAN
    agreement = judge_agreement("fluency", x, ["gpt", "silent", "llama"], list("abcdefghijkl"))
    without = judge_agreement("fluency", x[:, [0, 2]], ["gpt", "llama"], list("abcdefghijkl"))
    assert agreement.silent == ("silent",)
    for name in ("alpha_interval", "alpha_ordinal", "icc_single", "icc_average"):
        ours, reference = getattr(agreement, name), getattr(without, name)
        assert ours.value == pytest.approx(reference.value, abs=1e-12)
        assert ours.judges == 2
        assert "silent" in ours.note
    assert agreement.incomplete == ()  # the ICC does not drop every record for it
    pairs = {(p.judge_a, p.judge_b): p for p in agreement.pairs}
    assert pairs[("gpt", "silent")].records == 0
    assert math.isnan(pairs[("gpt", "silent")].spearman)
    assert agreement.effective_judges.value == pytest.approx(without.effective_judges.value)


def test_the_same_score_everywhere_is_undefined_not_perfect_or_zero() -> None:
    agreement = _agree(np.full((8, 3), 4.0))
    for estimate in (
        agreement.alpha_interval,
        agreement.alpha_ordinal,
        agreement.icc_single,
        agreement.icc_average,
        agreement.effective_judges,
    ):
        assert math.isnan(estimate.value)
        assert estimate.note
    assert "no variation" in agreement.alpha_interval.note
    assert "no variation" in agreement.icc_single.note
    assert all(math.isnan(p.spearman) and "one score" in p.note for p in agreement.pairs)


def test_fewer_than_two_records() -> None:
    for x in (np.empty((0, 3)), np.array([[3.0, 4.0, 5.0]])):
        agreement = _agree(x)
        frame = agreement_frame([agreement])
        panel = frame[frame["statistic"] != "spearman"]
        assert panel["value"].isna().all()
        assert panel["note"].str.contains("record").all()


def test_judges_that_share_no_record() -> None:
    x = np.array([[3.0, NAN], [4.0, NAN], [NAN, 2.0], [NAN, 5.0]])
    agreement = _agree(x)
    assert math.isnan(agreement.alpha_interval.value)
    assert "no record was scored by two judges" in agreement.alpha_interval.note
    assert agreement.pairs[0].records == 0
    assert "4 record(s) not scored by every judge" in agreement.icc_single.note


def test_bootstrap_zero_gives_a_value_without_an_interval() -> None:
    agreement = _agree(KRIPPENDORFF_2011.T, bootstrap=0)
    assert agreement.alpha_interval.value == pytest.approx(0.849, abs=5e-4)
    assert math.isnan(agreement.alpha_interval.ci_low)
    assert "bootstrap = 0" in agreement.alpha_interval.note


def test_a_matrix_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"coherence: scores are \(3, 2\), expected"):
        judge_agreement("coherence", np.zeros((3, 2)), ["a", "b", "c"], ["r1", "r2", "r3"])


# --- the table -------------------------------------------------------------------------------


def test_agreement_frame_has_one_row_per_criterion_and_statistic() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(3, 1, (20, 3))
    results = [_agree(x, bootstrap=50), _agree(x[:, :2], bootstrap=50)]
    results[1] = judge_agreement(
        "relevance", x[:, :2], ["j0", "j1"], [f"r{i}" for i in range(20)], bootstrap=50
    )
    frame = agreement_frame(results)
    assert list(frame.columns) == AGREEMENT_COLUMNS
    counts = frame.groupby(["criterion", "statistic"]).size()
    assert counts[("coherence", "spearman")] == 3
    assert counts[("relevance", "spearman")] == 1
    others = counts.drop("spearman", level="statistic")
    assert (others == 1).all() and len(others) == 2 * (len(Statistic) - 1)
    row = frame.set_index(["criterion", "statistic"]).loc[("coherence", "alpha_interval")]
    assert row["value"] == results[0].alpha_interval.value
    assert row["ci_low"] == results[0].alpha_interval.ci_low
    assert row["confidence"] == 0.95
    kish = frame[frame["statistic"] == "effective_judges"]["method"].iloc[0]
    assert "Kish" in kish and "mean pairwise Spearman" in kish
    eigen = frame[frame["statistic"] == "effective_judges_eigen"]["method"].iloc[0]
    assert "participation ratio" in eigen and "Bretherton" in eigen
    pair = frame[(frame["statistic"] == "spearman") & (frame["judge_b"] == "j2")].iloc[0]
    assert pair["judge_a"] == "j0"
    assert pair["value"] == pytest.approx(_spearman(x, 0, 2)[1], abs=1e-9)
    # Text columns are text, never NaN: the CSV and the HTML print them as they are.
    assert not frame[["judge_a", "judge_b", "method", "note"]].isna().any().any()
    assert isinstance(frame, pd.DataFrame)
