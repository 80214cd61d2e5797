"""The reports' "On the human scale" section: what a few human labels say about the judge, and
the study's means and comparison on the human scale (:mod:`..stats.human_scale`,
:mod:`..stats.calibration`).

Plain text and rows: the Markdown report joins the lines, the HTML report puts the same rows in
its tables, so the two say the same thing.
"""

from __future__ import annotations

import math

import pandas as pd

from ...study.settings import MetaConfig
from ..stats.human_scale import METHODS

__all__ = [
    "ESTIMATE_HEADER",
    "SUMMARY_HEADER",
    "estimate_cell",
    "estimate_rows",
    "human_scale_markdown",
    "human_scale_sentences",
    "summary_rows",
]

SUMMARY_HEADER = [
    "criterion",
    "labels used",
    "judge bias",
    "MAE judge",
    "MAE calibrated",
    "Spearman judge",
    "Spearman calibrated",
    "coverage (cross-validated)",
    "mean width",
]

ESTIMATE_HEADER = ["", *METHODS, "p (PPI)", "p (labels)", "p (judge)"]


def _number(value: object, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "" if value is None or math.isnan(value) else f"{value:g}"  # type: ignore[arg-type]
    return f"{float(value):.{digits}f}"  # type: ignore[arg-type]


def summary_rows(summary: pd.DataFrame) -> list[list[str]]:
    """One row per criterion under :data:`SUMMARY_HEADER`."""
    return [
        [
            str(r.criterion),
            f"{r.labels} of {r.labelled}",
            f"{r.bias:+.3f}" if math.isfinite(r.bias) else "",
            _number(r.mae_judge),
            _number(r.mae_calibrated),
            _number(r.spearman_judge),
            _number(r.spearman_calibrated),
            _number(r.coverage_cv),
            _number(r.mean_width),
        ]
        for r in summary.itertuples()
    ]


def estimate_cell(row: object) -> str:
    """``3.412 [3.201, 3.623]``, or the row's note when it has no estimate."""
    estimate = float(row.estimate)  # type: ignore[attr-defined]
    if not math.isfinite(estimate):
        return str(row.note)  # type: ignore[attr-defined]
    low, high = float(row.ci_low), float(row.ci_high)  # type: ignore[attr-defined]
    return f"{estimate:.3f} [{low:.3f}, {high:.3f}]"


def estimate_rows(frame: pd.DataFrame) -> dict[str, list[list[str]]]:
    """Per criterion, one row per mean or difference under :data:`ESTIMATE_HEADER`: its name,
    each method's cell, then a difference's p-values (prediction-powered, labels only, judge
    only; empty for a mean)."""
    tables: dict[str, list[list[str]]] = {}
    for (criterion, estimand, condition), rows in frame.groupby(
        ["criterion", "estimand", "condition"], sort=False
    ):
        by_method = {r.method: r for r in rows.itertuples()}
        name = f"{condition} ({by_method[METHODS[0]].design})" if estimand == "difference" else ""
        cells = [name or str(condition), *(estimate_cell(by_method[m]) for m in METHODS)]
        cells += [_p(by_method[m].p) for m in METHODS]
        tables.setdefault(str(criterion), []).append(cells)
    return tables


def _p(value: float) -> str:
    return "" if not math.isfinite(value) else f"{value:.3g}"


def human_scale_sentences(summary: pd.DataFrame, meta: MetaConfig, prefix: str) -> list[str]:
    """What was done and with how many labels, in a few sentences."""
    share = (
        "every labelled record"
        if meta.labelled >= 1
        else (
            f"a share of {meta.labelled:g} of the labelled records (drawn with seed {meta.seed}, "
            "whole groups at a time)"
        )
    )
    level = f"{meta.coverage:.0%}"
    return [
        f"Human scores from `[meta] human`; used: {share}. The judge's bias is its mean score "
        "minus the human score on the labels used (on the judge's own scale).",
        f"Each record's `calibrated` score (`scores/{prefix}_long.csv`) is its judge score mapped "
        "to the human scale by isotonic regression fitted on the labels, cross-fitted (no "
        f"labelled record's calibrated score uses its own label); `lo` and `hi` are its {level} "
        "split-conformal interval, moved onto the possible human scores where the scale is "
        "discrete. Its coverage is measured on the labelled records, each interval from the "
        "other folds' residuals.",
        f"The means and the comparison below are at {level}: prediction-powered (the judge's "
        "mean over every record, corrected by its error on the labels; ppi-python), the labels "
        "alone, and the judge alone, whose interval holds for the judge, not for people "
        f"(`stats/{prefix}_human_scale.csv`).",
    ]


def human_scale_markdown(
    frame: pd.DataFrame | None, summary: pd.DataFrame, meta: MetaConfig, prefix: str, note: str = ""
) -> str:
    """The Markdown section (``frame`` None: the estimates could not be made, ``note`` says
    why)."""
    header = " | ".join(SUMMARY_HEADER)
    out = ["", "## On the human scale", "", *human_scale_sentences(summary, meta, prefix), ""]
    out += [f"| {header} |", "|---" + "|---:" * (len(SUMMARY_HEADER) - 1) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in summary_rows(summary)]
    if frame is None:
        return "\n".join([*out, "", f"Note: {note}"]) + "\n"
    for criterion, rows in estimate_rows(frame).items():
        out += ["", f"### {criterion}", ""]
        out += ["| " + " | ".join(ESTIMATE_HEADER) + " |"]
        out += ["|---" + "|---:" * (len(ESTIMATE_HEADER) - 1) + "|"]
        out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out) + "\n"
