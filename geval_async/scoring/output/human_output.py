"""The human scale's outputs: ``stats/<prefix>_human_scale.csv`` and the Markdown report's
section, for :mod:`.writer` (the one writer) to write."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..stats.human_scale import ppi_missing
from .csv_cells import spreadsheet_safe
from .files import Output
from .human_scale_report import human_scale_markdown

if TYPE_CHECKING:
    from ..scores.results import StudyResults

__all__ = ["human_outputs", "human_scale_section"]

SIGNIFICANT = 6  # as the test tables


def human_outputs(results: StudyResults, path: Path) -> list[Output]:
    """The means and the comparison on the human scale, to ``path`` (a study with ``[meta]
    human``; needs ppi-python)."""
    if results.labelled is None:
        return []
    frame = spreadsheet_safe(results.human_scale)
    text = frame.to_csv(index=False, float_format=f"%.{SIGNIFICANT}g")
    return [Output(path, text.encode())]


def human_scale_section(results: StudyResults) -> str:
    """The report's "On the human scale" ("" without ``[meta] human``; without ppi-python, the
    calibration alone and a line saying how to install it)."""
    if results.labelled is None:
        return ""
    missing = ppi_missing()
    return human_scale_markdown(
        None if missing else results.human_scale,
        results.calibration_summary,
        results.config.meta,
        results.prefix,
        missing,
    )
