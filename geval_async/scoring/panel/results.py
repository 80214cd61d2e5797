"""A panel's results: each judge's, the panel's pooled ones, and the judges' agreement.

    >>> panel = load_panel("examples/summeval/panel.toml")
    >>> panel.judges["gpt"].table("coh")   # one judge: exactly its one-judge results
    >>> panel.panel.table("coh")           # the panel: pooled record scores, same tables
    >>> panel.agreement                    # alpha, ICC, Spearman per criterion
    >>> panel.long                         # every judge's and the panel's long table, `judge`

Each judge's results are :func:`~.results.load_results` of its one-judge study
(:meth:`EvalConfig.for_judge`): its outputs are named ``<prefix>-judge-<name>`` and equal a
one-judge run's byte for byte. The panel's results are a :class:`StudyResults` whose item scores
are pooled (:mod:`.panel`), so every table, the composite, the tests, the plots and the reports
come from the same code as one judge's, under the study's own prefix. What belongs to one judge
and not to a pool is left to the judges' own outputs: the raw exports, the self-consistency over
draws and the n curve (the panel's frames are empty, and its outputs leave them out).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import pandas as pd

from ...errors import ConfigError
from ...study.config import EvalConfig, apply_overrides, load_config
from ..scores.columns import collect_scores
from ..scores.readings import ShareCounts, share_counts
from ..scores.results import StudyResults, load_results
from ..scores.scores import PanelItemScore
from ..scores.trust import CONSISTENCY_COLUMNS, N_CURVE_COLUMNS
from .pooled import panel_agreement, pool_items

__all__ = ["PANEL", "PanelResults", "PanelStudyResults", "load_panel"]

PANEL = "panel"  # the `judge` of the panel's rows in PanelResults.long


@dataclass
class PanelStudyResults(StudyResults):
    """The panel's pooled results, with the judges' results they were pooled from.

    ``scores`` are :class:`~.scores.PanelItemScore`, held in columns as one judge's are, with
    their flags (:class:`~.panel_columns.PanelColumns`): ``long`` adds ``judges_scored`` and
    ``judges_missing``; ``samples`` and the invalid shares are every judge's answers (with a
    ``judge`` column first in ``samples``).
    """

    members: dict[str, StudyResults] = field(default_factory=dict)

    @property
    def pooled(self) -> list[PanelItemScore]:
        """The pooled item scores (``scores``, typed as they are)."""
        return [s for s in self.scores if isinstance(s, PanelItemScore)]

    @cached_property
    def samples(self) -> pd.DataFrame:
        frames = [m.samples.assign(judge=name) for name, m in self.members.items()]
        frame = pd.concat(frames, ignore_index=True)
        return frame[["judge", *frame.columns.drop("judge")]]

    @cached_property
    def consistency(self) -> pd.DataFrame:
        return pd.DataFrame(columns=CONSISTENCY_COLUMNS)

    @cached_property
    def n_curve(self) -> pd.DataFrame:
        return pd.DataFrame(columns=N_CURVE_COLUMNS)

    @cached_property
    def agreement(self) -> pd.DataFrame:
        """The judges' agreement per criterion (``stats/<prefix>_agreement.csv``)."""
        longs = {name: m.long for name, m in self.members.items()}
        names = [c.name for c in self.study.criteria]
        return panel_agreement(longs, names, self.config.meta)

    def flagged(self) -> pd.DataFrame:
        """Per criterion: records scored, those scored by only some judges (``flagged``) and
        those no judge scored, and per judge the records it did not score."""
        long = self.long
        rows = []
        for criterion, group in long.groupby("criterion", sort=False):
            scored = group["score"].notna()
            row: dict[str, Any] = {
                "criterion": criterion,
                "records": len(group),
                "scored": int(scored.sum()),
                "flagged": int((scored & (group["judges_missing"] != "")).sum()),
                "unscored": int((~scored).sum()),
            }
            left_out = [set(text.split(",")) for text in group["judges_missing"]]
            for name in self.members:
                row[f"not_{name}"] = sum(name in names for names in left_out)
            rows.append(row)
        return pd.DataFrame(rows)


@dataclass
class PanelResults:
    """A panel study's results: per judge, the panel's, and how far the judges agree."""

    judges: dict[str, StudyResults]
    panel: PanelStudyResults

    @property
    def agreement(self) -> pd.DataFrame:
        """Per criterion x statistic (and judge pair): the table of the agreement CSV."""
        return self.panel.agreement.copy()

    @cached_property
    def long(self) -> pd.DataFrame:
        """Every judge's long table and the panel's (``judge`` = "panel"), ``judge`` first;
        the panel's own columns are empty on the judges' rows."""
        frames = [r.long.assign(judge=name) for name, r in self.judges.items()]
        frames.append(self.panel.long.assign(judge=PANEL))
        frame = pd.concat(frames, ignore_index=True)
        return frame[["judge", *frame.columns.drop("judge")]]


def panel_results(judges: dict[str, StudyResults], config: EvalConfig) -> PanelStudyResults:
    """The panel's results pooled from its judges' (``config``: the panel study)."""
    first = next(iter(judges.values()))
    pooled = pool_items({name: r.scores for name, r in judges.items()}, config.panel)
    arrived = [r.judged for r in judges.values() if r.judged is not None]
    # The first judge's study (its generated steps read from the cache) as the panel's.
    study = replace(first.study, config=config)
    columns = collect_scores(study, pooled)
    # The panel's answers are its judges': so are its invalid shares.
    columns.shares = ShareCounts.merged(share_counts(r.scores) for r in judges.values())
    return PanelStudyResults(
        study,
        columns,
        simulated=any(r.simulated for r in judges.values()),
        corrupted=sum(r.corrupted for r in judges.values()),
        variant=first.variant,
        judged=(min(a[0] for a in arrived), max(a[1] for a in arrived)) if arrived else None,
        members=judges,
    )


def load_panel(
    config: EvalConfig | str | os.PathLike[str], *, strict: bool = False, **overrides: Any
) -> PanelResults:
    """Score every judge of a panel study from the cache, and pool them (no network).

    Args:
        config: a loaded config with ``[[judges]]`` or the path of its TOML file.
        strict: raise ConfigError when any judge lacks an answer for any item.
        overrides: as on the command line (cache, output, criteria, limit, ...).

    Raises:
        ConfigError: the config has one ``[judge]``, not a panel.
    """
    if not isinstance(config, EvalConfig):
        config = load_config(config)
    config = apply_overrides(config, **overrides)
    if not config.is_panel:
        raise ConfigError(
            f"{config.source}: one [judge], not a panel: load_results scores it; a panel "
            "lists its judges as [[judges]] tables"
        )
    judges = {
        name: load_results(config.for_judge(name), strict=strict) for name in config.judge_names
    }
    return PanelResults(judges, panel_results(judges, config))
