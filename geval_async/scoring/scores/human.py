"""Judge-vs-human data for a study with human scores: what the meta-evaluation stage hands the
HTML report (scatter plots, correlations). A data type of its own, below results, outputs and
the view, so that none of them imports another for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class HumanComparison:
    """Judge-vs-human data for a study with human scores (from the meta-evaluation stage).

    Attributes:
        pairs: one row per record and criterion: record_id, criterion, human, judge.
        correlations: objects with judge, criterion, level, method, value, ci_low, ci_high, n
            (``geval_async.meta.correlations.Correlation``).
    """

    pairs: pd.DataFrame
    correlations: Sequence[Any]
