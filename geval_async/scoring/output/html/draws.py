"""The HTML report's "Draws spent by need" section: the draws a study that stops drawing where
ratings settle used per criterion, its requests and cost, against the fixed study of the same n.

Plain data for the template, the same rows and sentences as the Markdown report's
(:mod:`..draws_report`); None for a study of a fixed n (the section is left out).
"""

from __future__ import annotations

from typing import Any

from ...scores.results import StudyResults
from ..draws_report import DRAWS_HEADER, draws_intro, draws_rows, draws_sentences
from .overview import Table


def draws_section(results: StudyResults) -> dict[str, Any] | None:
    """The section's introduction, sentences and table (None: the study draws a fixed n)."""
    frame = results.draws_frame()
    if frame is None:
        return None
    csv_name = f"stats/{results.prefix}_draws.csv"
    return {
        "intro": draws_intro(results.config.sampling).replace("`", ""),  # code marks: Markdown
        "sentences": draws_sentences(frame),
        "table": Table(
            f"Draws, requests and cost against the fixed n, per criterion ({csv_name})",
            DRAWS_HEADER,
            draws_rows(frame),
        ),
    }
