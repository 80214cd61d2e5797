"""How far to trust a judge's scores, from the draws already cached (sync, no I/O, no calls).

- **Self-consistency**: Krippendorff's alpha over the judge's own draws, per criterion, with
  records as units and draws as coders (draw 1 of every record is one coder, draw 2 another),
  at the interval and the ordinal level (the ``krippendorff`` package). An invalid answer is a
  missing value; a record with fewer than two valid draws pairs with nothing and drops out.
  Rubric criteria use each record's rubrics as units and yes/no (1/0) as values.
- **The n curve**: for k = 1..n, every record scored from its first k draws only: the mean
  standard error of those scores and the Spearman correlation of the n = k scores with the
  n = n scores, per criterion ("n = 5 keeps Spearman 0.97 with n = 10"). Likert criteria only:
  a rubric's combined score is a verdict, not a mean.

Both need several draws per record: in logprobs mode (one draw) they are not computed, and
every row says so in its ``note``. The per-record standard error itself is each score's
``se`` (:mod:`.distributions`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from ...options import SamplingMode
from ...study.plan import Study
from .columns import ScoreColumns
from .scores import SCORED, ItemScore

CONSISTENCY_COLUMNS = [
    "criterion",
    "draws",
    "units",
    "values",
    "alpha_interval",
    "alpha_ordinal",
    "note",
]
N_CURVE_COLUMNS = ["criterion", "k", "n", "records", "mean_se", "records_with_se", "spearman"]
ONE_DRAW = (
    "logprobs mode has one draw per record: agreement across draws needs samples mode (n >= 2)"
)
# Scores equal to this many decimals are ties when ranked.
TIES = 9
# The Spearman a report sentence asks the smaller n to keep.
KEEPS = 0.95


def reliability_matrix(scores: Sequence[ItemScore], draws: int) -> np.ndarray:
    """Draws (coders, rows) x units (columns) of the valid ratings, NaN where invalid or absent.

    Units are the records of one criterion (for a rubric criterion: each record's rubrics).
    """
    columns = []
    for score in scores:
        for part in score.parts or (score,):
            if not part.ratings:
                continue  # missing or refused: no draw at all
            ratings = [math.nan if r is None else float(r) for r in part.ratings[:draws]]
            columns.append(ratings + [math.nan] * (draws - len(ratings)))
    if not columns:
        return np.empty((draws, 0))
    return np.array(columns, dtype=float).T


def _alpha(data: np.ndarray, level: Literal["interval", "ordinal"]) -> float:
    import krippendorff

    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    kept = data[:, pairable]
    if kept.size == 0 or len(np.unique(kept[~np.isnan(kept)])) < 2:
        return math.nan  # nothing pairs, or one value only: no expected disagreement
    return float(krippendorff.alpha(reliability_data=kept, level_of_measurement=level))


def consistency_frame(study: Study, scores: Sequence[ItemScore]) -> pd.DataFrame:
    """Per criterion, Krippendorff's alpha over the judge's draws (interval and ordinal)."""
    sampling = study.config.sampling
    rows = []
    for name in _criteria(study, scores):
        row: dict[str, object] = {"criterion": name, "draws": sampling.choices_per_item}
        if sampling.mode == SamplingMode.LOGPROBS or sampling.choices_per_item < 2:
            note = ONE_DRAW if sampling.mode == SamplingMode.LOGPROBS else "n = 1: one draw"
            rows.append({**row, "units": 0, "values": 0, "note": note})
            continue
        found = _draws(scores, name, sampling.choices_per_item, scored=False)
        assert found is not None  # None only for scored=True
        data = found[0].T
        pairable = (~np.isnan(data)).sum(axis=0) >= 2
        interval, ordinal = _alpha(data, "interval"), _alpha(data, "ordinal")
        note = ""
        if math.isnan(interval):
            note = "undefined: fewer than two distinct valid ratings in records with two draws"
        rows.append(
            {
                **row,
                "units": int(pairable.sum()),
                "values": int((~np.isnan(data[:, pairable])).sum()),
                "alpha_interval": interval,
                "alpha_ordinal": ordinal,
                "note": note,
            }
        )
    return pd.DataFrame(rows, columns=CONSISTENCY_COLUMNS)


def n_curve_frame(study: Study, scores: Sequence[ItemScore]) -> pd.DataFrame:
    """Per Likert criterion and k = 1..n: the records scored from their first k draws, the
    mean standard error of those scores (over the records where it is defined; none at k = 1)
    and the Spearman correlation of the k-draw scores with the n-draw scores."""
    sampling = study.config.sampling
    n = sampling.choices_per_item
    if sampling.mode == SamplingMode.LOGPROBS:
        return pd.DataFrame(columns=N_CURVE_COLUMNS)
    rows = []
    for name in _criteria(study, scores):
        if study.config.criterion(name).is_rubric:
            continue
        # Records x draws, NaN where invalid: every k at once, as a study has 10,000 records.
        found = _draws(scores, name, n, scored=True)
        if found is None:
            continue  # a rubric criterion's combined items
        draws, scores_of = found
        full = pd.Series(scores_of, dtype=float)
        valid = ~np.isnan(draws)
        for k in range(1, n + 1):
            partial, errors = _first_draws(draws[:, :k], valid[:, :k])
            partial_series = pd.Series(partial, index=full.index)
            both = partial_series.notna() & full.notna()
            rows.append(
                {
                    "criterion": name,
                    "k": k,
                    "n": n,
                    "records": int(both.sum()),
                    "mean_se": float(np.mean(errors[~np.isnan(errors)]))
                    if (~np.isnan(errors)).any()
                    else math.nan,
                    "records_with_se": int((~np.isnan(errors)).sum()),
                    "spearman": _spearman(partial_series[both], full[both]),
                }
            )
    return pd.DataFrame(rows, columns=N_CURVE_COLUMNS)


def n_curve_sentences(curve: pd.DataFrame) -> list[str]:
    """Per criterion, the smallest n from which on Spearman with the full n stays at or
    above :data:`KEEPS`."""
    out = []
    for name, rows in curve.groupby("criterion", sort=False):
        n = int(rows["n"].iloc[0])
        if n < 2:
            continue
        # The smallest k from which on every k' < n keeps it (not one lucky k).
        holds = (rows["spearman"] >= KEEPS)[::-1].cummin()[::-1]
        below = rows[(rows["k"] < n) & holds]
        if below.empty:
            last = rows[rows["k"] == n - 1].iloc[0]
            out.append(
                f"{name}: no n below {n} keeps Spearman {KEEPS} with n = {n} on this study "
                f"(n = {n - 1}: {_fixed(last['spearman'])}); more draws may still move "
                "the ranking"
            )
            continue
        first = below.iloc[0]
        out.append(
            f"{name}: n = {int(first['k'])} keeps Spearman {_fixed(first['spearman'])} with "
            f"n = {n} on this study (mean SE {_fixed(first['mean_se'])} at n = "
            f"{int(first['k'])}, {_fixed(rows['mean_se'].iloc[-1])} at n = {n})"
        )
    return out


def _criteria(study: Study, scores: Sequence[ItemScore]) -> list[str]:
    """The study's criteria, then any other the scores name, in order."""
    names = dict.fromkeys(c.name for c in study.criteria)
    if isinstance(scores, ScoreColumns):
        names.update(dict.fromkeys(scores.criteria.values))
    else:
        names.update(dict.fromkeys(s.criterion for s in scores))
    return list(names)


def _draws(
    scores: Sequence[ItemScore], name: str, draws: int, *, scored: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """Records (or a rubric criterion's rubrics) x the first ``draws`` ratings of criterion
    ``name``, and the records' weighted scores; None for ``scored`` with combined rubric
    items. Read from the columns when the scores are held so (a million items)."""
    if isinstance(scores, ScoreColumns):
        found = scores.draw_matrix(name, draws, scored=scored)
        if found is not None:
            return found
        items = list(scores.items(name))
    else:
        items = [s for s in scores if s.criterion == name]
    if scored:
        if any(s.parts for s in items):
            return None
        items = [s for s in items if s.status == SCORED]
    matrix = reliability_matrix(items, draws).T
    full = np.array([np.nan if s.weighted_score is None else s.weighted_score for s in items])
    return matrix, full if scored else np.empty(0)


def _first_draws(draws: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per record, the mean of its valid ratings among these draws (NaN with none) and its
    standard error s / sqrt(m) with ddof = 1 (NaN below two), as
    :func:`~.distributions.standard_error` computes it for one record."""
    m = valid.sum(axis=1)
    values = np.where(valid, draws, 0.0)
    mean = np.full(len(draws), math.nan)
    np.divide(values.sum(axis=1), m, out=mean, where=m > 0)
    squares = np.where(valid, (draws - mean[:, None]) ** 2, 0.0).sum(axis=1)
    se = np.full(len(draws), math.nan)
    np.sqrt(squares / np.maximum(m - 1, 1) / np.maximum(m, 1), out=se, where=m > 1)
    return mean, se


def _spearman(a: pd.Series, b: pd.Series) -> float:
    # Equal means are ties: sum(p * v) over other ratings can differ from them in the last
    # bit (4 from 3, 4, 5 against 4, 4, 4), which would rank them apart.
    a, b = a.round(TIES), b.round(TIES)
    if len(a) < 2 or a.nunique() < 2 or b.nunique() < 2:
        return math.nan  # a constant ranking correlates with nothing
    return float(a.corr(b, method="spearman"))


def _fixed(value: object) -> str:
    number = float(value)  # type: ignore[arg-type]
    return "n/a" if math.isnan(number) else f"{number:.2f}"
