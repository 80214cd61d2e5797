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
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..study.config import MetaConfig

METHODS = ("spearman", "kendall", "pearson")
LEVELS = ("summary", "system", "dataset")

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
        missing: items with a human score but no judge score, left out: the sum of
        not_covered: items the judge did not rate (no row or an empty cell of its file,
            absent from the cache), and
        unparseable: items whose judge output is not a number (a file's text cell, answers
            with no valid rating).
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
    not_covered: int = 0
    unparseable: int = 0


# --- the correlations (pure) ---------------------------------------------------------------


def correlation(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, method: str
) -> float:
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


def _gaps(pairs: pd.DataFrame) -> dict[str, int]:
    """The items left out: missing, split into not covered and unparseable (by ``status``)."""
    missing = len(pairs) - len(_scored(pairs))
    unparseable = 0
    if "status" in pairs:
        unparseable = int((pairs["judge"].isna() & (pairs["status"] == "unparseable")).sum())
    return {"missing": missing, "not_covered": missing - unparseable, "unparseable": unparseable}


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


def bootstrap_interval(
    values: np.ndarray, *, rounds: int, seed: int, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
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


def summary_level(
    pairs: pd.DataFrame, judge: str, criterion: str, meta: MetaConfig | None = None
) -> list[Correlation]:
    """Per-document correlations averaged over documents, with bootstrap intervals
    (``meta``: bootstrap rounds, seed and confidence; the defaults when None)."""
    meta = meta or MetaConfig()
    documents, skipped = document_correlations(pairs)
    gaps = _gaps(pairs)
    values = documents.to_numpy(dtype=float)
    point = values.mean(axis=0) if len(values) else np.full(len(METHODS), _NAN)
    low, high = bootstrap_interval(
        values, rounds=meta.bootstrap, seed=meta.seed, confidence=meta.confidence
    )
    return [
        Correlation(
            judge,
            criterion,
            "summary",
            method,
            float(point[i]),
            float(low[i]),
            float(high[i]),
            n=len(values),
            skipped=skipped,
            **gaps,
        )
        for i, method in enumerate(METHODS)
    ]


def system_level(pairs: pd.DataFrame, judge: str, criterion: str) -> list[Correlation]:
    """The per-system (condition) means of the human and judge scores, correlated."""
    scored = _scored(pairs)
    # Rounded so that means equal in exact arithmetic tie for the rank correlations, whatever
    # order the floating-point sums ran in (0.1 + 0.2 + 0.3 != 0.6 + 0 + 0).
    means = scored.groupby("condition", sort=False)[["human", "judge"]].mean().round(_DIGITS)
    return _points_level(pairs, judge, criterion, "system", means)


def dataset_level(pairs: pd.DataFrame, judge: str, criterion: str) -> list[Correlation]:
    """Every scored item pooled."""
    return _points_level(pairs, judge, criterion, "dataset", _scored(pairs))


def _points_level(
    pairs: pd.DataFrame, judge: str, criterion: str, level: str, points: pd.DataFrame
) -> list[Correlation]:
    """The correlations of ``points``' human and judge columns (a row a point of ``level``),
    by each method, with the gaps of ``pairs``."""
    gaps = _gaps(pairs)
    return [
        Correlation(
            judge,
            criterion,
            level,
            method,
            correlation(points["human"], points["judge"], method),
            n=len(points),
            **gaps,
        )
        for method in METHODS
    ]


def correlate(
    pairs: pd.DataFrame,
    judge: str,
    meta: MetaConfig | None = None,
    *,
    levels: Iterable[str] = LEVELS,
) -> list[Correlation]:
    """Every level's correlations for one judge, criterion by criterion.

    Args:
        pairs: rows of :data:`~.inputs.PAIR_COLUMNS` (one per record and criterion; NaN = missing).
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
    return pd.DataFrame(
        [asdict(c) for c in correlations],
        columns=[f.name for f in Correlation.__dataclass_fields__.values()],
    )


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
        parts = [
            c.ljust(w) if i < 3 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(parts).rstrip())
        if number == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
