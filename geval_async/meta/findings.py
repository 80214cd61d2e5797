"""Every judge through every level, and what a reader must know about the figures: the items
left out (not covered or unparseable), the documents skipped, and the levels that rest on fewer
than :data:`MIN_UNITS` documents or systems (a warning: such a correlation swings widely).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..study.settings import MetaStudy
from .correlations import LEVELS, METHODS, Correlation, correlate
from .inputs import pair_scores

MIN_UNITS = 10
_UNITS = {"summary": "documents", "system": "systems"}
# What "not covered" and "unparseable" mean for each kind of judge.
_GAPS = {
    "file": ("no row, or an empty cell", "a cell that is not a number"),
    "cache": ("no answer in the cache", "no valid rating in the answers"),
}


def correlate_judges(
    study: MetaStudy,
    human: pd.DataFrame,
    judges: Mapping[str, pd.DataFrame],
    kinds: Mapping[str, str],
    notes: list[str],
) -> tuple[list[Correlation], list[str]]:
    """Correlate each judge's scores with ``human`` at every level the study allows.

    Args:
        human: :func:`~geval_async.meta.inputs.human_scores` of the selected records.
        judges: judge name -> its scores (record_id, criterion, judge, status, cell).
        kinds: judge name -> ``file`` or ``cache`` (for the wording of the notes).
        notes: what was left out is appended here.

    Returns:
        The correlations and the warnings.
    """
    levels = list(LEVELS)
    if study.data.group_field is None:
        levels.remove("summary")
        notes.append("no [data] group (the document field): the summary level is left out")
    if study.data.condition_field is None:
        levels.remove("system")
        notes.append("no [data] condition (the system field): the system level is left out")
    for criterion, rows in human.groupby("criterion", sort=False):
        nulls = int(rows["human"].isna().sum())
        if nulls:
            notes.append(
                f"{criterion}: {nulls} records have no human score (null) and are left out"
            )
    human = human.dropna(subset=["human"])
    correlations: list[Correlation] = []
    thin: dict[tuple[str, str, int], list[str]] = {}
    for name, scores in judges.items():
        covered = set(scores["criterion"])
        criteria = list(pd.unique(human["criterion"]))
        absent = [c for c in criteria if c not in covered]
        if absent:
            notes.append(f"{name}: no scores for {', '.join(absent)} (left out)")
        pairs = pair_scores(human[human["criterion"].isin(covered)], scores)
        found = correlate(pairs, name, study.meta, levels=levels)
        correlations += found
        for c in found:
            if c.method != METHODS[0]:
                continue  # one note per criterion and level, not per method
            if c.level == "summary" and c.skipped:
                notes.append(
                    f"{name} {c.criterion}: {c.skipped} of {c.n + c.skipped} documents "
                    "skipped at summary level (human or judge scores all equal, or "
                    "fewer than two scored summaries)"
                )
            if c.level in _UNITS and c.n < MIN_UNITS:
                thin.setdefault((name, c.level, c.n), []).append(c.criterion)
            if c.level == levels[-1] and c.missing:
                rows = pairs[pairs["criterion"] == c.criterion]
                notes.append(_gap_note(name, c, rows, kinds.get(name, "file")))
    warnings = [
        f"{name}: the {level} level of {', '.join(criteria)} rests on {n} {_UNITS[level]} "
        f"(fewer than {MIN_UNITS}): its correlations can swing widely"
        for (name, level, n), criteria in thin.items()
    ]
    return correlations, warnings


def _gap_note(name: str, c: Correlation, rows: pd.DataFrame, kind: str) -> str:
    not_covered, unparseable = _GAPS[kind]
    parts = []
    if c.not_covered:
        parts.append(f"{c.not_covered} not covered ({not_covered})")
    if c.unparseable:
        cells = [cell for cell in rows.loc[rows["status"] == "unparseable", "cell"] if cell]
        example = f", e.g. {cells[0]}" if cells else ""
        parts.append(f"{c.unparseable} unparseable ({unparseable}{example})")
    return (
        f"{name} {c.criterion}: {c.missing} of {len(rows)} items have no judge score and "
        f"are left out: {', '.join(parts)}"
    )
