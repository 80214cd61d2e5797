"""A study's scores joined onto its records: one row a record, ready to plot or filter.

The long table has a row per record and criterion; a notebook wants its own DataFrame back
with the scores beside the texts. Each criterion adds three columns, ``<criterion>_score``
(the weighted score; NaN when the item has none), ``<criterion>_se`` (its standard error) and
``<criterion>_status`` (``ok``, ``missing``, ``refused``, ...), joined on the record's id: the
id column as text, or the row's index where the frame has no id column (as a study built in
code reads them).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ...study.code_study import id_text

__all__ = ["JOINED", "join_scores", "record_ids"]

# The long table's column behind each joined column's suffix.
JOINED = {"score": "score", "se": "se", "status": "status"}


def record_ids(records: pd.DataFrame, id_field: str) -> list[str]:
    """Each row's record id: its ``id_field`` as text, or its index where there is none."""
    values = records[id_field] if id_field in records.columns else records.index
    return [id_text(value) for value in values]


def join_scores(long: pd.DataFrame, records: pd.DataFrame, ids: Sequence[str]) -> pd.DataFrame:
    """``records`` (a copy; ``ids`` its rows' record ids) with each criterion of ``long``
    joined on as ``<criterion>_score``, ``_se`` and ``_status``; a record the long table lacks
    gets NaN."""
    joined = records.copy()
    keys = pd.Index(ids)
    for criterion, rows in long.groupby("criterion", sort=False):
        by_id = rows.set_index("record_id")
        for suffix, column in JOINED.items():
            joined[f"{criterion}_{suffix}"] = by_id[column].reindex(keys).to_numpy()
    return joined
