"""Meta-evaluation of a panel: each judge's scores and the panel's, side by side.

For a config with ``[[judges]]``, each judge is meta-evaluated as its own one-judge study
(:meth:`~geval_async.study.settings.EvalConfig.for_judge`, scored from the shared cache), and
the panel is one more judge, named ``panel``: per record and criterion, the pooled scores of the
panel's own results (:func:`~geval_async.scoring.panel.results.load_panel`, the one pooling of
:func:`~geval_async.scoring.panel.pooled.pool_items` that ``score`` writes too). A record a judge
could
not score is pooled from the others and counted in a note; one no judge scored is left out of
the panel as of every judge (never a 0); a judge whose cache holds no score at all is left out,
with a note. So one ``meta`` shows whether the panel follows the experts more closely than any
single judge.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from ..scoring.panel.results import load_panel
from ..study.records import Record, Records
from ..study.settings import EvalConfig, PanelConfig
from .correlations import Correlation
from .inputs import judge_scores

PANEL = "panel"
# Decimals kept of a pooled score, as of the system level's means (meta.correlations): scores
# equal in exact arithmetic then tie for the rank correlations, whatever order the judges'
# scores were summed in ((4 + 2 + 3) / 3 against (3 + 4 + 2) / 3).
DIGITS = 12

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
    """Score every judge of the panel from the cache (no network), and read the panel's
    pooled scores from the panel's results."""
    results = load_panel(config)
    members: dict[str, pd.DataFrame] = {}
    origins: dict[str, str] = {}
    notes: list[str] = []
    simulated: list[str] = []
    for name, judged in results.judges.items():
        member = judged.config
        scores = judge_scores(judged.long)
        origin = f"cache {member.cache_path}, model {member.judge.model}"
        if judged.simulated:
            simulated.append(name)
            origin += " (simulated)"
        if not scores["judge"].notna().any():
            notes.append(f"{name}: the cache holds no scores of this judge (left out)")
            continue
        members[name], origins[name] = scores, origin
    if members:
        members[PANEL] = _panel_rows(results.panel.long, members, config.panel, notes)
        pool = config.panel.pool
        weights = ", ".join(f"{n} {config.panel.weight(n):g}" for n in config.judge_names)
        origins[PANEL] = f"{pool} of the judges' record scores (weights: {weights})"
    study = next(iter(results.judges.values())).study
    return PanelScores(members, origins, study.records, study.selected_records, notes, simulated)


def _panel_rows(
    pooled: pd.DataFrame, members: dict[str, pd.DataFrame], panel: PanelConfig, notes: list[str]
) -> pd.DataFrame:
    """The panel's rows from its pooled long table: scored where some judge scored the record,
    ``unparseable`` where the judges meta reads (``members``) answered but none with a valid
    rating; records none of them answered are absent (not covered)."""
    answered = pd.concat(
        [frame[["record_id", "criterion"]] for frame in members.values()]
    ).drop_duplicates()
    # A judge left out (no score at all) does not make a record "pooled from fewer".
    counted = [name for name in members if panel.weight(name) > 0]
    rows = []
    for criterion in pd.unique(answered["criterion"]):
        own = pooled[pooled["criterion"] == criterion]
        scores = pd.Series(own["score"].to_numpy(dtype=float), index=own["record_id"])
        scores = scores.round(DIGITS)
        short = [
            any(name in missing.split(",") for name in counted) for missing in own["judges_missing"]
        ]
        partial = int((pd.Series(short, index=own.index) & own["score"].notna()).sum())
        if partial:
            notes.append(
                f"{PANEL} {criterion}: {partial} records pooled from fewer than all "
                f"{len(counted)} judges (the others could not score them)"
            )
        for record_id in answered.loc[answered["criterion"] == criterion, "record_id"]:
            value = float(scores.get(record_id, math.nan))
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
