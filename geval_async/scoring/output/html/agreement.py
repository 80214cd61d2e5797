"""The report's "Agreement between the judges" section (a panel's report): the summary table
per criterion, a small judges x judges Spearman matrix per criterion, one sentence per
statistic on how to read it, and the notes.

Plain data for the template from the agreement frame (``stats/<prefix>_agreement.csv``), through
the same cells as the Markdown report (:mod:`..agreement_view`), so both show the same numbers.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...panel.agreement_view import DOCS, HOW_TO_READ, SUMMARY_HEADER, view
from .overview import Table


def agreement_section(frame: pd.DataFrame, prefix: str) -> dict[str, Any]:
    """The section's tables and sentences; ``prefix`` names the CSV in the captions."""
    shown = view(frame)
    csv_name = f"stats/{prefix}_agreement.csv"
    matrices = [
        {
            "criterion": criterion,
            "table": Table(
                f"Pairwise Spearman between the judges, {criterion}",
                ["judge", *judges],
                matrix,
            ),
        }
        for criterion, (judges, matrix) in shown.matrices.items()
        if judges
    ]
    return {
        "table": Table(
            f"Agreement per criterion ({csv_name}); brackets: {shown.confidence:.0%} intervals "
            "(alpha: bootstrap over records; ICC: F interval)",
            list(SUMMARY_HEADER),
            shown.rows,
            note="; ".join(shown.notes),
        ),
        "matrices": matrices,
        "how_to_read": HOW_TO_READ,
        "docs": DOCS,
    }
