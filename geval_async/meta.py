"""Meta-evaluation: how closely do a judge's scores follow human scores?

The records of a study may carry human ratings (SummEval's expert scores, say); ``[meta] human``
names the field that holds each criterion's. A judge's weighted scores, from this tool's cache
or from a file of another judge's outputs, are correlated with them at three levels, as the
summarisation literature (SummEval, G-Eval) reports them:

- **summary**: within each document (the config's group field), the correlation over its
  summaries, then the mean over documents. A document whose human or judge scores are all
  equal, or that has fewer than two scored summaries, has no correlation: it is skipped and
  counted (G-Eval's meta-evaluation script does the same). A percentile bootstrap over documents
  gives the confidence interval.
- **system**: the mean human and judge score of each system (the condition field), correlated
  across systems.
- **dataset**: every summary pooled.

Each level gives Spearman's rho, Kendall's tau-b and Pearson's r. An item without a judge score
(absent from the cache, no valid rating, an empty cell of a judge file) is left out of every
level and counted. Everything here is sync; the correlations are pure functions of a frame.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
from scipy import stats as sps

from .config import EvalConfig, MetaConfig, apply_overrides, load_config
from .errors import ConfigError
from .meta_inputs import (
    PAIR_COLUMNS,
    field_value,
    human_scores,
    judge_scores,
    pair_scores,
    read_judge_file,
)
from .plan import prepare_study
from .report import write_atomic, write_csv
from .results import load_results

METHODS = ("spearman", "kendall", "pearson")
LEVELS = ("summary", "system", "dataset")
__all__ = [
    "LEVELS",
    "METHODS",
    "PAIR_COLUMNS",
    "Correlation",
    "MetaEvaluation",
    "bootstrap_interval",
    "correlate",
    "correlation",
    "correlations_frame",
    "dataset_level",
    "document_correlations",
    "field_value",
    "format_correlations",
    "human_scores",
    "judge_scores",
    "meta_evaluate",
    "meta_paths",
    "pair_scores",
    "read_judge_file",
    "summary_level",
    "system_level",
    "write_meta",
]

_NAN = float("nan")
_DIGITS = 12


@dataclass(frozen=True)
class Correlation:
    """One judge's agreement with the human scores on one criterion, level and method.

    Attributes:
        value: the correlation (NaN when it cannot be computed: fewer than two documents,
            systems or items with a correlation, or all scores equal).
        ci_low, ci_high: the percentile bootstrap interval over documents (summary level
            only; NaN elsewhere or with ``bootstrap = 0``).
        n: documents averaged (summary), systems (system) or summaries (dataset).
        skipped: summary level: documents without a correlation (constant human or judge
            scores, or fewer than two scored summaries).
        missing: items with a human score but no judge score, left out.
    """

    judge: str
    criterion: str
    level: str
    method: str
    value: float
    ci_low: float = _NAN
    ci_high: float = _NAN
    n: int = 0
    skipped: int = 0
    missing: int = 0


# --- the correlations (pure) ---------------------------------------------------------------


def correlation(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray,
                method: str) -> float:
    """Spearman's rho, Kendall's tau-b or Pearson's r; NaN for fewer than two points or
    constant input (where each is undefined)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) < 2 or _constant(a) or _constant(b):
        return _NAN
    if method == "spearman":
        return float(sps.spearmanr(a, b).statistic)
    if method == "kendall":
        return float(sps.kendalltau(a, b).statistic)  # tau-b, scipy's default
    if method == "pearson":
        return float(sps.pearsonr(a, b).statistic)
    raise ValueError(f"unknown correlation method {method!r}")


def _constant(values: np.ndarray) -> bool:
    # Exact equality, as G-Eval's len(set(scores)) <= 1.
    return bool(len(values) == 0 or np.all(values == values[0]))


def _scored(pairs: pd.DataFrame) -> pd.DataFrame:
    return pairs.dropna(subset=["human", "judge"])


def document_correlations(pairs: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Per document (group): the three correlations over its scored summaries.

    Args:
        pairs: one criterion's rows with ``group``, ``human`` and ``judge`` (NaN = missing).

    Returns:
        A frame indexed by document with one column per method, holding only the documents
        that have a correlation, and the number of documents skipped.
    """
    rows: dict[Any, list[float]] = {}
    skipped = 0
    for document, rows_of_document in pairs.groupby("group", sort=False):
        scored = _scored(rows_of_document)
        human = scored["human"].to_numpy(dtype=float)
        judge = scored["judge"].to_numpy(dtype=float)
        if len(scored) < 2 or _constant(human) or _constant(judge):
            skipped += 1
            continue
        rows[document] = [correlation(human, judge, m) for m in METHODS]
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(METHODS), dtype=float)
    frame.index.name = "group"
    return frame, skipped


def bootstrap_interval(values: np.ndarray, *, rounds: int, seed: int,
                       confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of the column means of ``values`` (documents x methods).

    Documents are resampled with replacement, the same resample for every column, from a
    generator seeded with ``seed``, so the interval is reproducible.
    """
    k = len(values)
    width = values.shape[1] if values.ndim == 2 else 1
    if rounds <= 0 or k == 0:
        return np.full(width, _NAN), np.full(width, _NAN)
    rng = np.random.default_rng(seed)
    means = np.empty((rounds, width))
    step = max(1, 2_000_000 // k)  # bound the index matrix for very many documents
    for start in range(0, rounds, step):
        stop = min(rounds, start + step)
        picks = rng.integers(0, k, size=(stop - start, k))
        means[start:stop] = values[picks].reshape(stop - start, k, width).mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail], axis=0)
    return low, high


def summary_level(pairs: pd.DataFrame, judge: str, criterion: str,
                  meta: MetaConfig | None = None) -> list[Correlation]:
    """Per-document correlations averaged over documents, with bootstrap intervals
    (``meta``: bootstrap rounds, seed and confidence; the defaults when None)."""
    meta = meta or MetaConfig()
    documents, skipped = document_correlations(pairs)
    missing = len(pairs) - len(_scored(pairs))
    values = documents.to_numpy(dtype=float)
    point = values.mean(axis=0) if len(values) else np.full(len(METHODS), _NAN)
    low, high = bootstrap_interval(values, rounds=meta.bootstrap, seed=meta.seed,
                                   confidence=meta.confidence)
    return [
        Correlation(judge, criterion, "summary", method, float(point[i]), float(low[i]),
                    float(high[i]), n=len(values), skipped=skipped, missing=missing)
        for i, method in enumerate(METHODS)
    ]


def system_level(pairs: pd.DataFrame, judge: str, criterion: str) -> list[Correlation]:
    """The per-system (condition) means of the human and judge scores, correlated."""
    scored = _scored(pairs)
    # Rounded so that means equal in exact arithmetic tie for the rank correlations, whatever
    # order the floating-point sums ran in (0.1 + 0.2 + 0.3 != 0.6 + 0 + 0).
    means = scored.groupby("condition", sort=False)[["human", "judge"]].mean().round(_DIGITS)
    missing = len(pairs) - len(scored)
    return [
        Correlation(judge, criterion, "system", method,
                    correlation(means["human"], means["judge"], method), n=len(means),
                    missing=missing)
        for method in METHODS
    ]


def dataset_level(pairs: pd.DataFrame, judge: str, criterion: str) -> list[Correlation]:
    """Every scored item pooled."""
    scored = _scored(pairs)
    missing = len(pairs) - len(scored)
    return [
        Correlation(judge, criterion, "dataset", method,
                    correlation(scored["human"], scored["judge"], method), n=len(scored),
                    missing=missing)
        for method in METHODS
    ]


def correlate(pairs: pd.DataFrame, judge: str, meta: MetaConfig | None = None, *,
              levels: Iterable[str] = LEVELS) -> list[Correlation]:
    """Every level's correlations for one judge, criterion by criterion.

    Args:
        pairs: rows of :data:`PAIR_COLUMNS` (one per record and criterion; NaN = missing).
        judge: the judge's name, carried into each :class:`Correlation`.
        meta: the bootstrap settings (the defaults when None).
        levels: which of :data:`LEVELS` to compute (summary needs groups, system conditions).
    """
    wanted = set(levels)
    out: list[Correlation] = []
    for criterion, rows in pairs.groupby("criterion", sort=False):
        name = str(criterion)
        if "summary" in wanted:
            out += summary_level(rows, judge, name, meta)
        if "system" in wanted:
            out += system_level(rows, judge, name)
        if "dataset" in wanted:
            out += dataset_level(rows, judge, name)
    return out


def correlations_frame(correlations: Iterable[Correlation]) -> pd.DataFrame:
    """One row per judge, criterion, level and method."""
    return pd.DataFrame([asdict(c) for c in correlations],
                        columns=[f.name for f in Correlation.__dataclass_fields__.values()])


def format_correlations(correlations: Sequence[Correlation]) -> str:
    """The terminal table: judge x criterion x level, one column per method, ``value [CI]``."""
    cells: dict[tuple[str, str, str], dict[str, str]] = {}
    sizes: dict[tuple[str, str, str], int] = {}
    for c in correlations:
        key = (c.judge, c.criterion, c.level)
        text = "n/a" if math.isnan(c.value) else f"{c.value:.3f}"
        if not math.isnan(c.ci_low):
            text += f" [{c.ci_low:.3f}, {c.ci_high:.3f}]"
        cells.setdefault(key, {})[c.method] = text
        sizes[key] = c.n
    header = ["judge", "criterion", "level", "n", *METHODS]
    rows = [[*key, str(sizes[key]), *(cells[key].get(m, "") for m in METHODS)] for key in cells]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for number, row in enumerate([header, *rows]):
        parts = [c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in
                 enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(parts).rstrip())
        if number == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# --- the whole meta-evaluation of a study ----------------------------------------------------


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


def meta_evaluate(config: EvalConfig | str | os.PathLike[str],
                  judge_files: Mapping[str, Path | str] | None = None, *,
                  use_cache: bool = True, **overrides: Any) -> MetaEvaluation:
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
            f"[meta] human = {{ {first} = \"scores.{first}\" }}"
        )
    if not use_cache and not judge_files:
        raise ConfigError("no judge to meta-evaluate: --no-cache leaves out the cache, so add "
                          "--judge-file NAME=PATH")
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
            notes.append(f"the cache {config.cache_path} holds no scores for this study: "
                         "only the judge files are evaluated")
    else:
        study = prepare_study(config)
    human_map = {c: config.meta.human[c] for c in criteria}
    human = human_scores(study.selected_records, human_map, config.data.path)
    for name, path in judge_files.items():
        if name in judges:
            raise ConfigError(f"two judges are named {name!r}: give each --judge-file its own "
                              "NAME")
        judges[name] = read_judge_file(path, id_field=config.data.id_field, criteria=criteria,
                                       record_ids=[r.id for r in study.records])
        origins[name] = str(path)
    correlations = _correlate_all(study.config, human, judges, notes)
    return MetaEvaluation(config, origins, correlations, notes)


def _correlate_all(config: EvalConfig, human: pd.DataFrame, judges: Mapping[str, pd.DataFrame],
                   notes: list[str]) -> list[Correlation]:
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
            notes.append(f"{criterion}: {nulls} records have no human score (null) and are "
                         "left out")
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
                notes.append(f"{name} {c.criterion}: {c.skipped} of {c.n + c.skipped} documents "
                             "skipped at summary level (human or judge scores all equal, or "
                             "fewer than two scored summaries)")
            if c.level == levels[-1] and c.missing:
                notes.append(f"{name} {c.criterion}: {c.missing} of {items[c.criterion]} items "
                             "have no judge score and are left out")
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
    return [write_csv(csv_path, evaluation.frame, index=False),
            write_atomic(json_path, document)]
