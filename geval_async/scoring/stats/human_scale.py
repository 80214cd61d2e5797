"""Findings on the human scale: means and comparisons corrected by a few human labels.

A t-test on judge scores has an interval that holds for the judge, not for people: the judge is
biased against human ratings. Prediction-powered inference (Angelopoulos et al., Science 2023;
PPI++, arXiv 2311.01453) corrects the judge's mean over every record by its error on the
labelled ones, and gives an interval for the human mean that covers at its nominal rate, tighter
than the labels alone give. The judge's score is the prediction: it was made without the labels,
as PPI asks. The estimates and standard errors are ``ppi-python``'s (the authors' package,
through its public functions, with its power tuning); what it lacks is owned here: a small
labelled set's t-interval (its normal interval under-covers with ten labels a condition) and a
difference of two independent estimates, combined from their standard errors.

Per criterion and condition, the mean on the human scale three ways: ``prediction-powered``,
``labels only`` (the labelled records alone) and ``judge only`` (the judge's mean, on its own
scale, with the interval a judge-only study would report); then the same for the difference
between the two ``[stats]`` conditions, over the groups' pairs when the design is paired
(a pair is labelled when both its records are), else of two independent means. Intervals are
Student's t intervals at ``[meta] coverage`` (n - 1 degrees of freedom for n labels; the judge
alone: its records); p-values test a difference of 0 with the same t.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import pandas as pd
from scipy.stats import norm, spearmanr
from scipy.stats import t as student

from ...errors import ConfigError

__all__ = [
    "HUMAN_SCALE_COLUMNS",
    "METHODS",
    "calibration_summary",
    "human_scale_frame",
    "load_ppi",
    "ppi_missing",
]

METHODS = ("prediction-powered", "labels only", "judge only")
HUMAN_SCALE_COLUMNS = [
    "criterion",
    "estimand",
    "condition",
    "method",
    "design",
    "estimate",
    "se",
    "ci_low",
    "ci_high",
    "p",
    "labelled",
    "unlabelled",
    "coverage",
    "note",
]
INSTALL = "pip install 'geval-async[human]'"


def load_ppi() -> ModuleType:
    """``ppi_py``, imported with the process's warning filters kept as they were (its import
    silences every warning of the process otherwise).

    Raises:
        ConfigError: ppi-python is not installed (one line saying how to install it).
    """
    try:
        with warnings.catch_warnings():
            import ppi_py
    except ImportError:
        raise ConfigError(f"the estimates on the human scale need ppi-python: {INSTALL}") from None
    return ppi_py


def ppi_missing() -> str:
    """Why the estimates cannot be made here ("" when ppi-python is installed)."""
    if importlib.util.find_spec("ppi_py") is None:
        return f"the estimates on the human scale need ppi-python: {INSTALL}"
    return ""


@dataclass(frozen=True)
class _Estimate:
    """An estimate, its standard error and the degrees of freedom its interval is read with."""

    estimate: float
    se: float
    labelled: int
    unlabelled: int
    note: str = ""
    df: float = math.inf


def _prediction_powered(
    ppi: ModuleType, y: np.ndarray, yhat: np.ndarray, yhat_rest: np.ndarray, alpha: float
) -> _Estimate:
    n, big_n = len(y), len(yhat_rest)
    if n < 2:
        return _Estimate(math.nan, math.nan, n, big_n, "fewer than 2 labels")
    if big_n == 0:
        return _Estimate(math.nan, math.nan, n, 0, "every record labelled: see labels only")
    # Predictions that never vary carry nothing to add: PPI++'s tuning would divide by zero.
    lam = 0.0 if np.ptp(np.concatenate([yhat, yhat_rest])) == 0 else None
    lo, hi = ppi.ppi_mean_ci(y, yhat, yhat_rest, alpha=alpha, lam=lam)
    estimate = float(np.squeeze(ppi.ppi_mean_pointestimate(y, yhat, yhat_rest, lam=lam)))
    se = float(np.squeeze(hi - lo)) / (2 * norm.ppf(1 - alpha / 2))
    # ppi-python's normal interval reads the labels' spread with ddof 0 and z: with ten labels
    # a condition it covers 85% at 90% nominal (bench/human_scale.py). Read as a t-interval is:
    # the spread with ddof 1 and Student's t on n - 1 degrees of freedom (the rectifier, the
    # labels' term, dominates; the unlabelled records' term only makes this conservative).
    return _Estimate(estimate, se * math.sqrt(n / (n - 1)), n, big_n, df=n - 1)


def _classical(values: np.ndarray, labelled: int, unlabelled: int) -> _Estimate:
    """The mean with Student's t interval (ddof 1, n - 1 degrees of freedom)."""
    if len(values) < 2:
        return _Estimate(math.nan, math.nan, labelled, unlabelled, "fewer than 2 values")
    se = float(values.std(ddof=1) / math.sqrt(len(values)))
    return _Estimate(float(values.mean()), se, labelled, unlabelled, df=len(values) - 1)


def _three(
    ppi: ModuleType, score: np.ndarray, human: np.ndarray, used: np.ndarray, alpha: float
) -> dict[str, _Estimate]:
    """The three estimates of one mean: ``score`` and ``human`` per unit, ``used`` labelled."""
    scored = ~np.isnan(score)
    used = used & scored & ~np.isnan(human)
    rest = scored & ~used
    n = int(used.sum())
    return {
        "prediction-powered": _prediction_powered(
            ppi, human[used], score[used], score[rest], alpha
        ),
        "labels only": _classical(human[used], n, 0),
        "judge only": _classical(score[scored], 0, int(scored.sum())),
    }


def human_scale_frame(
    items: pd.DataFrame,
    conditions: Sequence[str],
    compared: Sequence[str],
    paired: bool,
    coverage: float,
) -> pd.DataFrame:
    """The estimates on the human scale (columns :data:`HUMAN_SCALE_COLUMNS`).

    Args:
        items: one row per record and criterion: criterion, record_id, group, condition,
            score (the judge's weighted score), human (NaN: unlabelled), used (the label is
            among those drawn).
        conditions: the conditions, in the order the rows list them.
        compared: the two ``[stats]`` conditions (else no comparison rows).
        paired: compare over the groups' pairs (the same groups under both conditions).
        coverage: the intervals' level.
    """
    ppi = load_ppi()
    alpha = 1 - coverage
    rows: list[dict[str, object]] = []

    def add(criterion: str, estimand: str, condition: str, design: str, found: dict) -> None:
        for method in METHODS:
            e = found[method]
            z = student.ppf(1 - alpha / 2, e.df) if e.df > 0 else math.nan
            tested = estimand == "difference" and e.se > 0  # NaN se: no estimate
            p = 2 * student.sf(abs(e.estimate / e.se), e.df) if tested else math.nan
            rows.append(
                {
                    "criterion": criterion,
                    "estimand": estimand,
                    "condition": condition,
                    "method": method,
                    "design": design,
                    "estimate": e.estimate,
                    "se": e.se,
                    "ci_low": e.estimate - z * e.se,
                    "ci_high": e.estimate + z * e.se,
                    "p": p if np.isfinite(p) else math.nan,
                    "labelled": e.labelled,
                    "unlabelled": e.unlabelled,
                    "coverage": coverage,
                    "note": e.note,
                }
            )

    with np.errstate(divide="ignore", invalid="ignore"):
        for criterion, frame in items.groupby("criterion", sort=False):
            per_condition = {}
            for condition in conditions:
                part = frame[frame["condition"] == condition]
                found = _three(ppi, *_arrays(part), alpha)
                per_condition[condition] = found
                add(str(criterion), "mean", str(condition), "", found)
            if len(compared) != 2 or not all(c in per_condition for c in compared):
                continue
            a, b = compared
            name = f"{a} - {b}"
            if paired:
                add(str(criterion), "difference", name, "paired", _paired(ppi, frame, a, b, alpha))
            else:
                found = {m: _apart(per_condition[a][m], per_condition[b][m]) for m in METHODS}
                add(str(criterion), "difference", name, "independent", found)
    return pd.DataFrame(rows, columns=HUMAN_SCALE_COLUMNS)


def _arrays(part: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        part["score"].to_numpy(float),
        part["human"].to_numpy(float),
        part["used"].to_numpy(bool),
    )


def _paired(
    ppi: ModuleType, frame: pd.DataFrame, a: str, b: str, alpha: float
) -> dict[str, _Estimate]:
    """The three estimates of the mean difference over the groups under both conditions."""
    sides = [frame[frame["condition"] == c].set_index("group") for c in (a, b)]
    groups = sides[0].index.intersection(sides[1].index).dropna()
    x, y = (side.loc[groups] for side in sides)
    score = x["score"].to_numpy(float) - y["score"].to_numpy(float)
    human = x["human"].to_numpy(float) - y["human"].to_numpy(float)
    used = x["used"].to_numpy(bool) & y["used"].to_numpy(bool)
    return _three(ppi, score, human, used, alpha)


def _apart(a: _Estimate, b: _Estimate) -> _Estimate:
    """A difference of two independent estimates: their standard errors combined, with
    Welch-Satterthwaite's degrees of freedom."""
    se = math.hypot(a.se, b.se)
    parts = a.se**4 / a.df + b.se**4 / b.df
    return _Estimate(
        a.estimate - b.estimate,
        se,
        a.labelled + b.labelled,
        a.unlabelled + b.unlabelled,
        a.note or b.note,
        df=se**4 / parts if parts > 0 else math.inf,
    )


def calibration_summary(items: pd.DataFrame) -> pd.DataFrame:
    """Per criterion, what the labels say about the judge and what calibration buys: records,
    those labelled, the labels used (scored and drawn), the judge's bias on them (mean judge -
    human), the mean absolute error of the judge's and of the (cross-fitted) calibrated scores,
    both Spearman correlations with the humans, the intervals' coverage on the labelled records
    (each interval from the other folds, so a cross-validated coverage) and their mean width
    over every scored record."""
    rows = []
    for criterion, frame in items.groupby("criterion", sort=False):
        labelled = int(frame["human"].notna().sum())
        used = frame[frame["used"] & frame["score"].notna() & frame["human"].notna()]
        fitted = used[used["calibrated"].notna()]
        scored = frame[frame["calibrated"].notna()]
        inside = (fitted["lo"] <= fitted["human"]) & (fitted["human"] <= fitted["hi"])
        rows.append(
            {
                "criterion": criterion,
                "records": len(frame),
                "labelled": labelled,
                "labels": len(used),
                "bias": _mean(used["score"] - used["human"]),
                "mae_judge": _mean((used["score"] - used["human"]).abs()),
                "mae_calibrated": _mean((fitted["calibrated"] - fitted["human"]).abs()),
                "spearman_judge": _spearman(used["score"], used["human"]),
                "spearman_calibrated": _spearman(fitted["calibrated"], fitted["human"]),
                "coverage_cv": _mean(inside.astype(float)),
                "mean_width": _mean(scored["hi"] - scored["lo"]),
            }
        )
    return pd.DataFrame(rows)


def _mean(values: pd.Series) -> float:
    return float(values.mean()) if len(values) else math.nan


def _spearman(x: pd.Series, y: pd.Series) -> float:
    if len(x) < 3 or x.nunique() < 2 or y.nunique() < 2:
        return math.nan
    return float(spearmanr(x, y).statistic)
