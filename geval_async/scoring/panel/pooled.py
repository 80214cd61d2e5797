"""A panel's record scores, pooled from its judges' (sync, pure: numbers in, numbers out).

Per record and criterion, the panel's score pools the weighted scores of the judges that scored
it (``[panel] pool``): their mean (PoLL's average pooling, Verga et al. 2024), weighted by
``[panel] weights`` when set, or their (weighted) median. A judge that could not score a record
(no valid rating, a refusal, no answer in the cache) is left out of that record's pool, and the
record is flagged: :attr:`PanelItemScore.judges_missing` names the judges left out, and the
long table carries ``judges_scored`` and ``judges_missing``. A judge with weight 0 is in no
pool (and never flagged missing). A record no judge scored is unscored, with the status that
says why (missing before refused before no valid rating: the most actionable first), never 0.

The pooled item keeps the pool of the judges' rating distributions (weighted as the scores are)
so that the report's rating figures show the panel's ratings; for ``pool = "mean"`` its weighted
score equals the pooled score, for the median it does not and is not used as the score. Its
standard error is undefined (None): the judges' own SEs are in their outputs.

The agreement between the judges is computed from :func:`judge_matrix` (records x judges
weighted scores, NaN where a judge did not score) by :func:`panel_agreement`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ...options import PanelPool, ScoreStatus
from ...study.settings import MetaConfig, PanelConfig
from ..reading.ratings import RatingDistribution
from ..scores.scores import MISSING, NO_VALID, REFUSED, SCORED, ItemScore, PanelItemScore
from .agreement import agreement_frame, judge_agreement

__all__ = [
    "PanelItemScore",
    "judge_matrix",
    "panel_agreement",
    "pool_items",
    "pooled_score",
]


def pooled_score(
    scores: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray, pool: PanelPool
) -> float:
    """The (weighted) mean or median of ``scores`` (weights above 0, at least one score).

    The weighted median is the score where the cumulative weight, scores sorted, reaches half
    the total; where it reaches exactly half, the mean of that score and the next (so equal
    weights give numpy's median).
    """
    values = np.asarray(scores, dtype=float)
    w = np.asarray(weights, dtype=float)
    if pool == PanelPool.MEAN:
        return math.fsum(w * values) / math.fsum(w)
    order = np.argsort(values, kind="stable")
    values, w = values[order], w[order]
    half = math.fsum(w) / 2.0
    cumulative = 0.0
    for position, (value, weight) in enumerate(zip(values, w, strict=True)):
        cumulative += weight
        if math.isclose(cumulative, half, rel_tol=1e-12, abs_tol=0.0):
            return (float(value) + float(values[position + 1])) / 2.0
        if cumulative > half:
            return float(value)
    return float(values[-1])  # unreachable: the weights sum to 2 * half


def _unscored_status(statuses: Sequence[ScoreStatus]) -> ScoreStatus:
    """The panel's status of a record no judge scored: what a user can act on first."""
    for status in (MISSING, REFUSED):
        if status in statuses:
            return status
    return NO_VALID


def _pooled_distribution(
    members: Sequence[ItemScore], weights: Sequence[float]
) -> RatingDistribution | None:
    """The scoring judges' distributions pooled with their weights (None: rubric criteria)."""
    if not members or any(m.distribution is None or m.parts for m in members):
        return None
    total = math.fsum(weights)
    probs: dict[float, float] = {}
    for member, weight in zip(members, weights, strict=True):
        assert member.distribution is not None
        for rating, p in member.distribution.probs.items():
            probs[rating] = probs.get(rating, 0.0) + weight * p / total
    valid = sum(m.valid for m in members)
    invalid = sum(m.invalid for m in members)
    return RatingDistribution(probs, valid, invalid, valid / (valid + invalid) if valid else 0.0)


def pool_items(
    members: Mapping[str, Sequence[ItemScore]], panel: PanelConfig
) -> list[PanelItemScore]:
    """The panel's item scores, one per record and criterion in the first judge's order.

    Args:
        members: judge name -> that judge's item scores (one per record and criterion; the
            same records and criteria for every judge, as the judges of one study have).
        panel: the pooling and the weights.
    """
    names = list(members)
    by_judge = {
        name: {(s.record_id, s.criterion): s for s in scores} for name, scores in members.items()
    }
    first = members[names[0]]
    pooled: list[PanelItemScore] = []
    for item in first:
        key = (item.record_id, item.criterion)
        present = {name: by_judge[name].get(key) for name in names}
        scored: list[ItemScore] = []
        values: list[float] = []
        scoring: list[str] = []
        for name, member in present.items():
            if member is None or panel.weight(name) <= 0:
                continue
            value = member.weighted_score
            if value is not None and not math.isnan(value):
                scored.append(member)
                values.append(value)
                scoring.append(name)
        weights = [panel.weight(name) for name in scoring]
        score = pooled_score(values, weights, panel.pool) if scored else None
        statuses = [s.status for s in present.values() if s is not None]
        pooled.append(
            PanelItemScore(
                record_id=item.record_id,
                group=item.group,
                condition=item.condition,
                criterion=item.criterion,
                status=SCORED if score is not None else _unscored_status(statuses or [MISSING]),
                distribution=_pooled_distribution(scored, weights),
                pooled=score,
                judges_scored=tuple(scoring),
                # A judge of weight 0 is out of every pool by choice: never "missing".
                judges_missing=tuple(n for n in names if n not in scoring and panel.weight(n) > 0),
                member_valid=sum(s.valid for s in present.values() if s is not None),
                member_invalid=sum(s.invalid for s in present.values() if s is not None),
            )
        )
    return pooled


def judge_matrix(longs: Mapping[str, pd.DataFrame], criterion: str) -> tuple[np.ndarray, list[str]]:
    """One criterion's records x judges weighted scores (NaN: the judge did not score the
    record) and the records' ids, in the first judge's order."""
    columns = []
    records: list[str] = []
    for position, long in enumerate(longs.values()):
        rows = long[long["criterion"] == criterion]
        series = pd.Series(rows["score"].to_numpy(dtype=float), index=rows["record_id"].astype(str))
        if position == 0:
            records = list(series.index)
        columns.append(series.reindex(records).to_numpy(dtype=float))
    return np.column_stack(columns) if columns else np.empty((0, 0)), records


def panel_agreement(
    longs: Mapping[str, pd.DataFrame], criteria: Sequence[str], meta: MetaConfig
) -> pd.DataFrame:
    """The agreement between the judges on every criterion (``[meta]``'s bootstrap, seed and
    confidence), for ``stats/<prefix>_agreement.csv``; rubric criteria included (their scores
    are probabilities)."""
    judges = list(longs)
    agreements = []
    for criterion in criteria:
        matrix, records = judge_matrix(longs, criterion)
        agreements.append(
            judge_agreement(
                criterion,
                matrix,
                judges,
                records,
                bootstrap=meta.bootstrap,
                seed=meta.seed,
                confidence=meta.confidence,
            )
        )
    return agreement_frame(agreements)
