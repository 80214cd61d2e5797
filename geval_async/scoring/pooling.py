"""The panel's record scores: the judges' weighted scores of a record pooled by ``[panel]``.

``pool = "mean"`` is PoLL's average pooling (Verga et al. 2024), a weighted mean when
``[panel] weights`` are set; ``pool = "median"`` the (weighted) median. A record a judge could
not score (no answer, no valid rating) is pooled from the judges that did, over their weights
alone, and :func:`judges_pooled` counts them so the record can be flagged; a record no judge of
weight above 0 scored has no panel score (NaN, never 0). Pooled scores are rounded to
:data:`DIGITS` decimals so that equal ones tie. Pure: frames in, frames out.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..options import PanelPool
from ..study.settings import PanelConfig
from .panel import pooled_score

DIGITS = 12  # decimals kept of a pooled score (as the system level's means: meta.correlations)

__all__ = ["judge_matrix", "judges_pooled", "pool_record_scores", "weighted_median"]


def pool_record_scores(frame: pd.DataFrame, panel: PanelConfig) -> pd.Series:
    """The panel's score of each record: ``frame``'s row (records x judges, NaN where a judge
    could not score the record) pooled by ``panel.pool`` with ``panel.weight(judge)``.

    Returns:
        A float Series on ``frame``'s index named ``panel``; NaN where no judge of weight above
        0 scored the record.
    """
    weights = np.array([panel.weight(str(judge)) for judge in frame.columns], dtype=float)
    values = frame.to_numpy(dtype=float)
    pooled = np.full(len(frame), np.nan)
    for row, scores in enumerate(values):
        scored = ~np.isnan(scores) & (weights > 0)
        if scored.any():  # the one pooling rule, as the panel's results pool
            pooled[row] = pooled_score(scores[scored], weights[scored], panel.pool)
    # Rounded so that scores equal in exact arithmetic tie for the rank correlations, whatever
    # order the judges' scores were summed in ((4 + 2 + 3) / 3 against (3 + 4 + 2) / 3).
    return pd.Series(pooled, index=frame.index, name="panel", dtype=float).round(DIGITS)


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The weighted median of :func:`~.panel.pooled_score` (equal weights: the median)."""
    return pooled_score(values, weights, PanelPool.MEDIAN)


def judges_pooled(frame: pd.DataFrame, panel: PanelConfig) -> pd.Series:
    """How many judges (of weight above 0) each record's panel score was pooled from: fewer
    than the panel's means the record was scored by the others and is flagged."""
    weighted = [judge for judge in frame.columns if panel.weight(str(judge)) > 0]
    return frame[weighted].notna().sum(axis=1).rename("judges")


def judge_matrix(scores: Mapping[str, pd.DataFrame], criterion: str) -> pd.DataFrame:
    """One criterion's records x judges frame from each judge's scores (rows of record_id,
    criterion and ``score``), in the mapping's order; NaN where a judge has no score."""
    columns = {
        judge: frame.loc[frame["criterion"] == criterion].set_index("record_id")["score"]
        for judge, frame in scores.items()
    }
    matrix = pd.concat(columns, axis=1, sort=False) if columns else pd.DataFrame()
    matrix.index.name = "record_id"
    return matrix.astype(float)
