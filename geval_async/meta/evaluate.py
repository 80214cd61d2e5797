"""Meta-evaluation of a study: its judge's scores (and other judges' files) against human ratings.

The levels and correlations are in :mod:`geval_async.meta.correlations`; this module gathers
the scores, runs them through every level, and writes the tables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from ..errors import ConfigError
from ..judging.plan import prepare_study
from ..scoring.report import write_atomic, write_csv
from ..scoring.results import load_results
from ..study.config import EvalConfig, apply_overrides, load_config
from .correlations import (
    LEVELS,
    METHODS,
    Correlation,
    correlate,
    correlations_frame,
    format_correlations,
)
from .inputs import (
    human_scores,
    judge_scores,
    pair_scores,
    read_judge_file,
)


@dataclass
class MetaEvaluation:
    """Every judge's correlations with the human scores of one study, and what was left out."""

    config: EvalConfig
    judges: dict[str, str]
    correlations: list[Correlation]
    notes: list[str] = field(default_factory=list)

    @property
    def frame(self) -> pd.DataFrame:
        return correlations_frame(self.correlations)

    def table(self) -> str:
        return format_correlations(self.correlations)

    def to_json(self) -> dict[str, Any]:
        meta = self.config.meta
        return {
            "config": str(self.config.source),
            "records": str(self.config.data.path),
            "human": dict(meta.human),
            "bootstrap": meta.bootstrap,
            "seed": meta.seed,
            "confidence": meta.confidence,
            "judges": self.judges,
            "notes": self.notes,
            "correlations": [asdict(c) for c in self.correlations],
        }


def meta_evaluate(
    config: EvalConfig | str | os.PathLike[str],
    judge_files: Mapping[str, Path | str] | None = None,
    *,
    use_cache: bool = True,
    **overrides: Any,
) -> MetaEvaluation:
    """Correlate the cache's judge scores and/or judge files with the records' human scores.

    Args:
        config: a loaded config or the path of its TOML file (with a ``[meta] human`` table).
        judge_files: judge name -> CSV/JSONL file of that judge's scores.
        use_cache: include this tool's own judge, scored from the cache (no network).
        overrides: as on the command line (cache, criteria, limit, model, n, ...).

    Raises:
        ConfigError: no human scores configured, no judge to evaluate, or a bad file.
    """
    if not isinstance(config, EvalConfig):
        config = load_config(config)
    config = apply_overrides(config, **overrides)
    judge_files = dict(judge_files or {})
    criteria = [c.name for c in config.criteria if c.name in config.meta.human]
    if not criteria:
        first = config.criteria[0].name
        raise ConfigError(
            f"{config.source}: [meta] human names no human score for the criteria "
            f"({', '.join(c.name for c in config.criteria)}): add e.g. "
            f'[meta] human = {{ {first} = "scores.{first}" }}'
        )
    if not use_cache and not judge_files:
        raise ConfigError(
            "no judge to meta-evaluate: --no-cache leaves out the cache, so add "
            "--judge-file NAME=PATH"
        )
    notes: list[str] = []
    judges: dict[str, pd.DataFrame] = {}
    origins: dict[str, str] = {}
    if use_cache:
        results = load_results(config)
        study = results.study
        own = judge_scores(results.long)
        if own["judge"].notna().any():
            name = config.judge.model + (" (simulated)" if results.simulated else "")
            judges[name], origins[name] = own, f"cache {config.cache_path}"
        elif not judge_files:
            raise ConfigError(
                f"the cache {config.cache_path} holds no scores for this study: run "
                f"`geval-async run {config.source}` first, or meta-evaluate a judge file "
                "with --judge-file NAME=PATH --no-cache"
            )
        else:
            notes.append(
                f"the cache {config.cache_path} holds no scores for this study: "
                "only the judge files are evaluated"
            )
    else:
        study = prepare_study(config)
    human_map = {c: config.meta.human[c] for c in criteria}
    human = human_scores(study.selected_records, human_map, config.data.path)
    for name, path in judge_files.items():
        if name in judges:
            raise ConfigError(f"two judges are named {name!r}: give each --judge-file its own NAME")
        judges[name] = read_judge_file(
            path,
            id_field=config.data.id_field,
            criteria=criteria,
            record_ids=[r.id for r in study.records],
        )
        origins[name] = str(path)
    correlations = _correlate_all(study.config, human, judges, notes)
    return MetaEvaluation(config, origins, correlations, notes)


def _correlate_all(
    config: EvalConfig, human: pd.DataFrame, judges: Mapping[str, pd.DataFrame], notes: list[str]
) -> list[Correlation]:
    levels = list(LEVELS)
    if config.data.group_field is None:
        levels.remove("summary")
        notes.append("no [data] group (the document field): the summary level is left out")
    if config.data.condition_field is None:
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
    for name, scores in judges.items():
        covered = set(scores["criterion"])
        absent = [c for c in pd.unique(human["criterion"]) if c not in covered]
        if absent:
            notes.append(f"{name}: no scores for {', '.join(absent)} (left out)")
        pairs = pair_scores(human[human["criterion"].isin(covered)], scores)
        items = pairs["criterion"].value_counts()
        found = correlate(pairs, name, config.meta, levels=levels)
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
            if c.level == levels[-1] and c.missing:
                notes.append(
                    f"{name} {c.criterion}: {c.missing} of {items[c.criterion]} items "
                    "have no judge score and are left out"
                )
    return correlations


def meta_paths(config: EvalConfig) -> tuple[Path, Path]:
    """Where :func:`write_meta` writes: ``meta/<prefix>_meta.csv`` and ``.json``."""
    folder, prefix = config.output.path / "meta", config.output.prefix
    return folder / f"{prefix}_meta.csv", folder / f"{prefix}_meta.json"


def write_meta(evaluation: MetaEvaluation) -> list[Path]:
    """Write the correlations as CSV (one row per judge, criterion, level and method) and the
    whole evaluation as JSON, each atomically; returns the paths."""
    csv_path, json_path = meta_paths(evaluation.config)
    document = orjson.dumps(evaluation.to_json(), option=orjson.OPT_INDENT_2)
    return [write_csv(csv_path, evaluation.frame, index=False), write_atomic(json_path, document)]
