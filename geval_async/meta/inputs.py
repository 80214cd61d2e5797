"""Scores in, for meta-evaluation: human scores from record fields and this tool's judge scores
from the cache, paired per record and criterion with any judge's (files: :mod:`.judge_files`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from ..scoring.scores.scores import NO_VALID, SCORED
from ..study.human_labels import check_found, field_value, human_number
from ..study.records import Record

PAIR_COLUMNS = ["record_id", "group", "condition", "criterion", "human", "judge"]
NOT_COVERED = "not covered"


def human_scores(
    records: Iterable[Record], human: Mapping[str, str], source: Path | str
) -> pd.DataFrame:
    """The human score of every record on every criterion ``human`` maps to a field path.

    Returns:
        Columns record_id, group, condition, criterion, human (NaN where the record has no
        such field, or a null one: it is unlabelled).

    Raises:
        ConfigError: no record has the field (a mistyped path), or a value is not a number.
    """
    rows = []
    first: Record | None = None
    found: set[str] = set()
    for record in records:
        first = first or record
        for criterion, path in human.items():
            label = f"{source}: {record.where}, record {record.id!r}"
            try:
                value = field_value(record.fields, path)
            except KeyError:
                value = None
            else:
                found.add(criterion)
            rows.append(
                {
                    "record_id": record.id,
                    "group": record.group,
                    "condition": record.condition,
                    "criterion": criterion,
                    "human": human_number(value, f"{label}: field {path!r}"),
                }
            )
    check_found(first, found, human, source)
    return pd.DataFrame(rows, columns=PAIR_COLUMNS[:5])


def judge_scores(long: pd.DataFrame) -> pd.DataFrame:
    """This tool's weighted scores (``StudyResults.long``) as record_id, criterion, judge and
    status: ``scored``, or ``unparseable`` for an item whose answers hold no valid rating.
    Items the cache lacks (or holds refused) are left out: they are not covered."""
    answered = long[long["status"].isin([SCORED, NO_VALID])]
    frame = answered[["record_id", "criterion", "score"]].rename(columns={"score": "judge"})
    frame["status"] = ["scored" if s == SCORED else "unparseable" for s in answered["status"]]
    frame["cell"] = ""
    return frame.reset_index(drop=True)


def pair_scores(human: pd.DataFrame, judge: pd.DataFrame) -> pd.DataFrame:
    """Human and judge scores side by side, one row per record and criterion of ``human``
    (the judge score NaN where the judge has none), with the judge's ``status``: ``scored``,
    ``unparseable`` or ``not covered`` (no row, or an empty cell), and ``cell`` (what an
    unparseable cell held)."""
    pairs = human.merge(judge, on=["record_id", "criterion"], how="left", validate="one_to_one")
    if "status" not in pairs:
        pairs["status"] = pairs["judge"].notna().map({True: "scored", False: NOT_COVERED})
    pairs["status"] = pairs["status"].fillna(NOT_COVERED)
    pairs["cell"] = pairs["cell"].fillna("") if "cell" in pairs else ""
    return pairs[[*PAIR_COLUMNS, "status", "cell"]]
