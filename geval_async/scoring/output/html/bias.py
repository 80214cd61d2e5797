"""The report's "What the judge may be reacting to" section: each flag with what to do, the
notes on checks not made, and the whole bias table (:meth:`StudyResults.bias`).

Plain data for the template; the sentences and numbers are the Markdown report's
(:func:`..report.bias_flags`), so the two reports say the same.
"""

from __future__ import annotations

from typing import Any

from ...scores.bias_checks import JudgeReactions
from ..report import bias_flags
from .overview import Table, number


def bias_section(reactions: JudgeReactions, csv_name: str) -> dict[str, Any]:
    """The section's flags, notes and table (``csv_name``: the bias table's file)."""
    frame = reactions.frame
    rows = [
        [
            str(row.check),
            str(row.criterion),
            str(row.condition),
            str(row.measure),
            number(row.value),
            "" if row.ci_low != row.ci_low else f"[{number(row.ci_low)}, {number(row.ci_high)}]",
            str(row.n),
            "yes" if row.flagged else "no",
            str(row.note),
        ]
        for row in frame.itertuples()
    ]
    table = Table(
        f"Every check ({csv_name})",
        ["check", "criterion", "condition", "measure", "value", "interval", "n", "flagged", "note"],
        rows,
        numeric=False,
    )
    return {
        "flags": bias_flags(reactions),
        "notes": [f"{note}." for note in reactions.notes],
        "table": table,
    }
