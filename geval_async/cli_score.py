"""Scoring-stage commands (filled in by the scoring stage)."""

from __future__ import annotations

from typing import Any


def add_score_commands(commands: Any, study_arguments: Any) -> None:
    """Register score/average/ttest/report/demo."""
