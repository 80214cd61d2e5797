"""The HTML report's "On the human scale" section: the labels' verdict on the judge and the
study's means and comparison on the human scale, as tables for the template.

The same sentences and cells as the Markdown report (:mod:`..human_scale_report`), from
:attr:`StudyResults.calibration_summary` and :attr:`StudyResults.human_scale`.
"""

from __future__ import annotations

from typing import Any

from ...scores.results import StudyResults
from ...stats.human_scale import ppi_missing
from ..human_scale_report import (
    ESTIMATE_HEADER,
    SUMMARY_HEADER,
    estimate_rows,
    human_scale_sentences,
    summary_rows,
)
from .overview import Table

__all__ = ["human_scale_view"]


def human_scale_view(results: StudyResults) -> dict[str, Any] | None:
    """The section's sentences and tables (None: the study has no ``[meta] human``)."""
    if results.labelled is None:
        return None
    prefix = results.prefix
    summary = results.calibration_summary
    section: dict[str, Any] = {
        # The Markdown's code marks dropped: the page shows names as plain text.
        "sentences": [
            s.replace("`", "") for s in human_scale_sentences(summary, results.config.meta, prefix)
        ],
        "summary": Table(
            f"What the labels say about the judge (calibrated scores in scores/{prefix}_long.csv)",
            SUMMARY_HEADER,
            summary_rows(summary),
        ),
        "estimates": [],
        "missing": ppi_missing(),
    }
    if section["missing"]:
        return section
    level = f"{results.config.meta.coverage:.0%}"
    for criterion, rows in estimate_rows(results.human_scale).items():
        caption = f"{criterion}: means and comparison at {level} (stats/{prefix}_human_scale.csv)"
        section["estimates"].append(Table(caption, ESTIMATE_HEADER, rows))
    return section
