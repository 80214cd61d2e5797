"""Meta-evaluation of a study: its judge's scores (and other judges' files) against human ratings.

The levels and correlations are in :mod:`geval_async.meta.correlations`, the judge files in
:mod:`geval_async.meta.judge_files`; this module gathers the scores, runs them through every
level, says what was left out and where a level rests on too few units, and writes the tables.

A config needs a judge of its own (``[judge]`` and prompt files) only when the cache's judge is
evaluated; one with records, ``[meta] human`` and judge files is enough otherwise (see
:mod:`geval_async.study.meta_study`).
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
from ..scoring.output.writer import Output, csv_bytes, write_files
from ..scoring.scores.results import StudyResults, load_results
from ..study.config import EvalConfig
from ..study.meta_study import read_meta_study
from ..study.records import Records, load_records
from ..study.settings import JudgeFile, MetaStudy
from .correlations import Correlation, correlations_frame, format_correlations
from .findings import correlate_judges
from .inputs import human_scores, judge_scores
from .judge_files import read_judge_file
from .panel import PANEL, panel_lead, panel_scores


@dataclass
class MetaEvaluation:
    """Every judge's correlations with the human scores of one study, what was left out, and
    the warnings (levels resting on fewer than 10 documents or systems)."""

    config: MetaStudy
    judges: dict[str, str]
    correlations: list[Correlation]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The judges whose answers came from the simulated judge (synthetic ratings).
    simulated: list[str] = field(default_factory=list)

    @property
    def frame(self) -> pd.DataFrame:
        return correlations_frame(self.correlations)

    def table(self) -> str:
        return format_correlations(self.correlations)

    def panel_lead(self) -> list[str]:
        """For a panel: per criterion, the panel's summary-level Spearman (dataset level
        without documents) beside the best single judge's; empty without a panel."""
        if PANEL not in self.judges:
            return []
        levels = {c.level for c in self.correlations}
        level = "summary" if "summary" in levels else "dataset"
        return panel_lead(self.correlations, level, "spearman")

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
            "simulated": self.simulated,
            **({"panel": self._panel()} if PANEL in self.judges else {}),
            "judge_files": self.files,
            "warnings": self.warnings,
            "notes": self.notes,
            "correlations": [asdict(c) for c in self.correlations],
        }

    def _panel(self) -> dict[str, Any]:
        config = self.config.config
        assert config is not None
        return {
            "pool": str(config.panel.pool),
            "weights": {name: config.panel.weight(name) for name in config.judge_names},
            "lead": self.panel_lead(),
        }


def meta_evaluate(
    config: EvalConfig | MetaStudy | str | os.PathLike[str],
    judge_files: Mapping[str, JudgeFile | Path | str] | None = None,
    *,
    use_cache: bool | None = None,
    results: StudyResults | None = None,
    **overrides: Any,
) -> MetaEvaluation:
    """Correlate the cache's judge scores and/or judge files with the records' human scores.

    Args:
        config: the path of a TOML file (with a ``[meta] human`` table), a loaded config, or
            a study read by :func:`~geval_async.study.meta_study.read_meta_study`.
        judge_files: judge name -> its file (a path: id and criterion-named columns; a
            :class:`JudgeFile` for other columns), beside the config's ``[meta.judges]``.
        use_cache: include this tool's own judge, scored from the cache (no network). None:
            when the config has a ``[judge]`` section.
        overrides: as on the command line: bootstrap, seed, confidence (checked like
            ``[meta]``), criteria, limit, output, and cache, model, n, mode for the cache.
        results: the cache's judge already scored (``report --html`` has them): not scored
            again. They must be of this config with these overrides.

    Raises:
        ConfigError: no human scores configured, no judge to evaluate, or a bad file.
    """
    study = read_meta_study(config, overrides, use_cache=use_cache)
    files = _judge_files(study, judge_files or {})
    criteria = [c for c in study.criteria if c in study.meta.human]
    if not criteria:
        first = study.criteria[0]
        raise ConfigError(
            f"{study.source}: [meta] human names no human score for the criteria "
            f"({', '.join(study.criteria)}): add e.g. "
            f'[meta] human = {{ {first} = "scores.{first}" }}'
        )
    if study.config is None and not files:
        raise ConfigError(
            f"no judge to meta-evaluate: add [meta.judges.NAME] path = ... to {study.source} "
            "or --judge-file NAME=PATH"
            + ("" if use_cache is False else " (the config has no [judge] of its own)")
        )
    notes: list[str] = []
    judges: dict[str, pd.DataFrame] = {}
    origins: dict[str, str] = {}
    kinds: dict[str, str] = {}
    simulated: list[str] = []
    if study.config is not None and study.config.is_panel:
        panel = panel_scores(study.config)
        records, selected, simulated = panel.records, panel.selected, panel.simulated
        notes += panel.notes
        if not panel.scores and not files:
            raise ConfigError(
                f"the cache {study.config.cache_path} holds no scores of any judge of the "
                f"panel: run `geval-async run {study.source}` first"
            )
        for name, scores in panel.scores.items():
            judges[name], origins[name], kinds[name] = scores, panel.origins[name], "cache"
    elif study.config is not None:
        if results is None:
            results = load_results(study.config)
        records, selected = results.study.records, results.study.selected_records
        own = judge_scores(results.long)
        cache = study.config.cache_path
        if own["judge"].notna().any():
            name = study.config.judge.model + (" (simulated)" if results.simulated else "")
            judges[name], origins[name], kinds[name] = own, f"cache {cache}", "cache"
            simulated = [name] if results.simulated else []
        elif not files:
            raise ConfigError(
                f"the cache {cache} holds no scores for this study: run "
                f"`geval-async run {study.source}` first, or meta-evaluate a judge file "
                "with --judge-file NAME=PATH --no-cache"
            )
        else:
            notes.append(
                f"the cache {cache} holds no scores for this study: "
                "only the judge files are evaluated"
            )
    else:
        records = _records(study)
        selected = records if study.limit is None else records[: study.limit]
    human_map = {c: study.meta.human[c] for c in criteria}
    human = human_scores(selected, human_map, study.data.path)
    digests: dict[str, dict[str, Any]] = {}
    for name, judge in files.items():
        if name in judges:
            raise ConfigError(f"two judges are named {name!r}: give each judge file its own NAME")
        read = read_judge_file(
            judge, records=records, id_field=study.data.id_field, criteria=criteria
        )
        judges[name], origins[name], kinds[name] = read.frame, str(read.path), "file"
        digests[name] = {
            "path": str(read.path),
            "sha256": read.sha256,
            "keys": read.keys,
            "scores": read.scores,
        }
    correlations, warnings = correlate_judges(study, human, judges, kinds, notes)
    return MetaEvaluation(study, origins, correlations, notes, warnings, digests, simulated)


def _records(study: MetaStudy) -> Records:
    data = study.data
    return load_records(
        data.path,
        id_field=data.id_field,
        group_field=data.group_field,
        condition_field=data.condition_field,
    )


def _judge_files(
    study: MetaStudy, given: Mapping[str, JudgeFile | Path | str]
) -> dict[str, JudgeFile]:
    files = dict(study.meta.judges)
    for name, judge in given.items():
        if name in files:
            raise ConfigError(
                f"two judges are named {name!r} ({study.source} [meta.judges.{name}] and "
                "--judge-file): give each its own NAME"
            )
        files[name] = judge if isinstance(judge, JudgeFile) else JudgeFile(Path(judge))
    return files


def meta_paths(config: MetaStudy | EvalConfig) -> tuple[Path, Path]:
    """Where :func:`write_meta` writes: ``meta/<prefix>_meta.csv`` and ``.json``."""
    folder, prefix = config.output.path / "meta", config.output.prefix
    return folder / f"{prefix}_meta.csv", folder / f"{prefix}_meta.json"


def write_meta(evaluation: MetaEvaluation) -> list[Path]:
    """Write the correlations as CSV (one row per judge, criterion, level and method) and the
    whole evaluation as JSON, each atomically; returns the paths."""
    csv_path, json_path = meta_paths(evaluation.config)
    document = orjson.dumps(evaluation.to_json(), option=orjson.OPT_INDENT_2)
    return write_files(
        [Output(csv_path, csv_bytes(evaluation.frame, index=False)), Output(json_path, document)]
    )
