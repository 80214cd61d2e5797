"""Meta-evaluation of a panel: each judge's scores and the panel's, side by side.

For a config with ``[[judges]]``, each judge is meta-evaluated as its own one-judge study
(:meth:`~geval_async.study.settings.EvalConfig.for_judge`, scored from the shared cache), and
the panel is one more judge, named ``panel``: per record and criterion, the judges' weighted
scores pooled by ``[panel]`` (:func:`~geval_async.scoring.pooling.pool_record_scores`). A record
a judge could not score is pooled from the others and counted in a note; one no judge scored
is left out of the panel as of every judge (never a 0). So one ``meta`` shows whether the panel
follows the experts more closely than any single judge.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from ..scoring.pooling import judge_matrix, judges_pooled, pool_record_scores
from ..scoring.results import load_results
from ..study.records import Record, Records
from ..study.settings import EvalConfig
from .correlations import Correlation
from .inputs import judge_scores

PANEL = "panel"

__all__ = ["PANEL", "PanelScores", "panel_lead", "panel_scores"]


@dataclass
class PanelScores:
    """Each judge's scores and the panel's (record_id, criterion, judge, status, cell), in the
    config's order with ``panel`` last, where each came from, and what a reader must know."""

    scores: dict[str, pd.DataFrame]
    origins: dict[str, str]
    records: Records
    selected: Sequence[Record]
    notes: list[str] = field(default_factory=list)
    simulated: list[str] = field(default_factory=list)


def panel_scores(config: EvalConfig) -> PanelScores:
    """Score every judge of the panel from the cache (no network) and pool the panel's."""
    members: dict[str, pd.DataFrame] = {}
    origins: dict[str, str] = {}
    notes: list[str] = []
    simulated: list[str] = []
    records: Records | None = None
    selected: Sequence[Record] = ()
    for name in config.judge_names:
        member = config.for_judge(name)
        results = load_results(member)
        if records is None:
            records, selected = results.study.records, results.study.selected_records
        scores = judge_scores(results.long)
        origin = f"cache {member.cache_path}, model {member.judge.model}"
        if results.simulated:
            simulated.append(name)
            origin += " (simulated)"
        if not scores["judge"].notna().any():
            notes.append(f"{name}: the cache holds no scores of this judge (left out)")
            continue
        members[name], origins[name] = scores, origin
    assert records is not None  # a panel has at least one judge
    if members:
        members[PANEL] = _pool(config, members, notes)
        pool = config.panel.pool
        weights = ", ".join(f"{n} {config.panel.weight(n):g}" for n in config.judge_names)
        origins[PANEL] = f"{pool} of the judges' record scores (weights: {weights})"
    return PanelScores(members, origins, records, selected, notes, simulated)


def _pool(config: EvalConfig, members: dict[str, pd.DataFrame], notes: list[str]) -> pd.DataFrame:
    """The panel's rows: pooled where some judge scored the record, ``unparseable`` where the
    judges answered but none with a valid rating; records no judge answered are absent."""
    scored = {
        name: frame.rename(columns={"judge": "score"}).dropna(subset=["score"])
        for name, frame in members.items()
    }
    answered = pd.concat(
        [frame[["record_id", "criterion"]] for frame in members.values()]
    ).drop_duplicates()
    rows = []
    for criterion in pd.unique(answered["criterion"]):
        matrix = judge_matrix(scored, str(criterion))
        pooled = pool_record_scores(matrix, config.panel)
        counts = judges_pooled(matrix, config.panel)
        weighted = sum(config.panel.weight(str(name)) > 0 for name in matrix.columns)
        partial = int(((counts < weighted) & pooled.notna()).sum())
        if partial:
            notes.append(
                f"{PANEL} {criterion}: {partial} records pooled from fewer than all "
                f"{weighted} judges (the others could not score them)"
            )
        for record_id in answered.loc[answered["criterion"] == criterion, "record_id"]:
            value = pooled.get(record_id, math.nan)
            rows.append(
                {
                    "record_id": record_id,
                    "criterion": criterion,
                    "judge": value,
                    "status": "unparseable" if math.isnan(value) else "scored",
                    "cell": "",
                }
            )
    return pd.DataFrame(rows, columns=["record_id", "criterion", "judge", "status", "cell"])


def panel_lead(correlations: Sequence[Correlation], level: str, method: str) -> list[str]:
    """Per criterion, the panel's correlation at ``level`` and ``method`` beside the best
    single judge's: "coh: panel 0.412, best judge b 0.398 (the panel leads by 0.014)"."""
    lines = []
    chosen = [c for c in correlations if c.level == level and c.method == method]
    for criterion in dict.fromkeys(c.criterion for c in chosen):
        row = {c.judge: c.value for c in chosen if c.criterion == criterion}
        panel = row.pop(PANEL, math.nan)
        judges = {name: value for name, value in row.items() if not math.isnan(value)}
        if math.isnan(panel) or not judges:
            continue
        best = max(judges, key=lambda name: judges[name])
        gap = panel - judges[best]
        verdict = (
            f"the panel leads by {gap:.3f}"
            if gap > 0
            else f"{best} leads by {-gap:.3f}"
            if gap < 0
            else "a tie"
        )
        lines.append(
            f"{criterion}: panel {panel:.3f}, best judge {best} {judges[best]:.3f} ({verdict})"
        )
    return lines
