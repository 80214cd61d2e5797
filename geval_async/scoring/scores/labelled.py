"""A study's records with their human labels beside the judge's scores: the labels drawn for use,
and each record's calibrated score and conformal interval (:mod:`..stats.calibration`).

The long table's ``calibrated``, ``lo`` and ``hi`` columns and the estimates on the human scale
(:mod:`..stats.human_scale`) are read from here. A study without ``[meta] human`` has none of them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...study.human_labels import record_labels
from ...study.plan import Study
from ...study.settings import EvalConfig, MetaConfig
from ..stats.calibration import calibrate, draw_labelled
from ..stats.human_scale import HUMAN_SCALE_COLUMNS, human_scale_frame
from .columns import ScoreColumns
from .scores import SCORED
from .tables import CALIBRATED_COLUMNS, label_rows

__all__ = [
    "CALIBRATED_COLUMNS",
    "ITEM_COLUMNS",
    "calibrated_items",
    "human_scale_estimates",
    "labelled_items",
]

ALL_RECORDS = "all records"  # the one mean of a study without conditions
ITEM_COLUMNS = [
    "record_id",
    "group",
    "condition",
    "criterion",
    "score",
    "human",
    "used",
    *CALIBRATED_COLUMNS,
]


def labelled_items(scores: ScoreColumns, study: Study) -> pd.DataFrame | None:
    """One row per row of the long table of ``scores`` (same order): the judge's score (NaN
    unless scored), the human label (NaN: unlabelled), whether it is among the labels used, the
    calibrated score and its interval. None when ``[meta] human`` names no criterion of the
    study.

    The labels used are the same records for every criterion: ``[meta] labelled`` of the
    records labelled for any of them, drawn with ``[meta] seed``.

    Raises:
        ConfigError: a human score that is not a number (naming the record and field).
    """
    meta = study.config.meta
    names = {c.name for c in study.criteria}
    human = {criterion: path for criterion, path in meta.human.items() if criterion in names}
    if not human:
        return None
    labels = record_labels(study.selected_records, human, study.config.data.path)
    # Read after the check above: a study without labels never builds its items' columns.
    long = label_rows(scores)
    items = long[["record_id", "group", "condition", "criterion", "score"]].copy()
    items["record_id"] = items["record_id"].astype(str)
    items.loc[long["status"] != SCORED, "score"] = np.nan
    items["human"] = [
        labels.get(criterion, {}).get(record, np.nan)
        for record, criterion in zip(items["record_id"], items["criterion"], strict=True)
    ]
    return calibrated_items(items, meta)


def calibrated_items(items: pd.DataFrame, meta: MetaConfig) -> pd.DataFrame:
    """``items`` (record_id, group, condition, criterion, score, human: NaN where unlabelled)
    with the labels used drawn (``used``) and each record's calibrated score and interval, for
    ``meta``'s labelled share, seed and coverage (a new frame, :data:`ITEM_COLUMNS`)."""
    items = items.copy()
    heads = items[items["human"].notna()].drop_duplicates("record_id")
    drawn = draw_labelled(
        heads["record_id"].tolist(),
        [None if pd.isna(g) else g for g in heads["group"]],
        meta.labelled,
        meta.seed,
    )
    items["used"] = items["record_id"].isin(drawn) & items["human"].notna()
    for column in CALIBRATED_COLUMNS:
        items[column] = np.nan
    for criterion in items["criterion"].unique():
        rows = np.flatnonzero((items["criterion"] == criterion).to_numpy())
        part = items.iloc[rows]
        found = calibrate(
            part["score"].to_numpy(float),
            part["human"].to_numpy(float),
            part["used"].to_numpy(bool),
            meta.coverage,
            meta.seed,
        )
        for column in CALIBRATED_COLUMNS:
            items.iloc[rows, items.columns.get_loc(column)] = getattr(found, column)
    return items[ITEM_COLUMNS].reset_index(drop=True)


def human_scale_estimates(
    items: pd.DataFrame | None, config: EvalConfig, paired: bool
) -> pd.DataFrame:
    """The estimates on the human scale of a study's labelled items (empty without them): each
    condition's mean, the ``[stats]`` conditions first, then their difference."""
    if items is None:
        return pd.DataFrame([], columns=HUMAN_SCALE_COLUMNS)
    items = items.copy()
    items["condition"] = items["condition"].where(items["condition"].notna(), ALL_RECORDS)
    compared = tuple(config.stats.conditions)
    seen = [c for c in dict.fromkeys(items["condition"]) if c not in compared]
    conditions = [c for c in compared if c in set(items["condition"])] + seen
    if paired:
        # A pair is a group under both conditions: a group holding several records of one
        # condition has no one pair, so the two means are compared as independent ones.
        twice = items.duplicated(["criterion", "condition", "group"])
        paired = not bool(twice.any())
    return human_scale_frame(items, conditions, compared, paired, config.meta.coverage)
