"""Agreement between the judges of a panel, per criterion (sync, pure: no I/O, no calls).

Input: one criterion's records x judges matrix of weighted scores (NaN where a judge could not
score a record), the judges' names and the records' ids. Output: a :class:`JudgeAgreement`,
and :func:`agreement_frame`, one tidy row per criterion x statistic (and judge pair) for
``stats/<prefix>_agreement.csv``, the report and the HTML.

- **Krippendorff's alpha**, interval and ordinal, records as units and judges as coders,
  missing scores allowed (:mod:`.alpha`, which also states the ordinal value domain), each
  with a seeded percentile bootstrap interval over records.
- **ICC(2,1) and ICC(2,k)** (:mod:`.icc`) on the records every judge scored; how many were
  left out is in ``records`` and the note, their ids in :attr:`JudgeAgreement.incomplete`.
- **Pairwise Spearman** between judges, each pair on the records both scored, with that count,
  and **the effective number of judges** from them: Kish's design effect and the eigenvalue
  participation ratio (:mod:`.judge_pairs` gives both formulas and their references).

A judge that scored no record is left out of every statistic and named in every note; with
fewer than two judges, fewer than two records, or no spread at all, a statistic is NaN and its
``note`` says why (never a silent 0).
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...study.settings import MetaConfig
from .alpha import TIES, alpha_interval, alpha_ordinal, bootstrap_alpha, pairable
from .icc import icc
from .judge_pairs import Estimate, PairSpearman, effective_judges, join_notes, pair_spearman

AGREEMENT_COLUMNS = [
    "criterion",
    "statistic",
    "judge_a",
    "judge_b",
    "value",
    "ci_low",
    "ci_high",
    "confidence",
    "records",
    "judges",
    "method",
    "note",
]
ICC_METHOD = (
    "{}: Shrout & Fleiss two-way random, absolute agreement (McGraw & Wong {}); "
    "F interval, McGraw & Wong (1996)"
)


class Statistic(enum.StrEnum):
    """The ``statistic`` column of the agreement table."""

    ALPHA_INTERVAL = "alpha_interval"
    ALPHA_ORDINAL = "alpha_ordinal"
    ICC_SINGLE = "icc_2_1"
    ICC_AVERAGE = "icc_2_k"
    SPEARMAN = "spearman"
    MEAN_SPEARMAN = "mean_spearman"
    EFFECTIVE_JUDGES = "effective_judges"
    EFFECTIVE_JUDGES_EIGEN = "effective_judges_eigen"


@dataclass(frozen=True)
class JudgeAgreement:
    """Agreement between the judges of a panel on one criterion."""

    criterion: str
    judges: tuple[str, ...]
    records: int
    silent: tuple[str, ...]  # judges that scored no record: left out everywhere
    incomplete: tuple[str, ...]  # records some judge did not score: left out of the ICC
    confidence: float
    alpha_interval: Estimate
    alpha_ordinal: Estimate
    icc_single: Estimate
    icc_average: Estimate
    pairs: tuple[PairSpearman, ...]
    mean_spearman: Estimate
    effective_judges: Estimate
    effective_judges_eigen: Estimate


def judge_agreement(
    criterion: str,
    scores: np.ndarray,
    judges: Sequence[str],
    records: Sequence[str],
    *,
    bootstrap: int = MetaConfig.bootstrap,
    seed: int = MetaConfig.seed,
    confidence: float = MetaConfig.confidence,
) -> JudgeAgreement:
    """Every agreement statistic of one criterion.

    Args:
        criterion: its name, carried into the rows.
        scores: records x judges weighted scores, NaN where a judge could not score a record.
        judges: the judges' names, one per column.
        records: the records' ids, one per row.
        bootstrap, seed, confidence: the alpha bootstrap (``[meta]``'s names and defaults);
            ``confidence`` also sets the ICC's F interval.
    """
    matrix = np.asarray(scores, dtype=float)
    if matrix.shape != (len(records), len(judges)):
        raise ValueError(
            f"{criterion}: scores are {matrix.shape}, expected records x judges = "
            f"({len(records)}, {len(judges)})"
        )
    if np.isinf(matrix).any():
        raise ValueError(f"{criterion}: a weighted score is infinite")
    scored = ~np.isnan(matrix).all(axis=0)
    silent = tuple(name for name, has in zip(judges, scored, strict=True) if not has)
    active = matrix[:, scored]
    names = [name for name, has in zip(judges, scored, strict=True) if has]
    k = len(names)
    left_out = f"left out, no score: {', '.join(silent)}" if silent else ""
    reason = _undefined_reason(active, k)
    pairs = tuple(
        pair_spearman(matrix, judges, a, b)
        for a, b in itertools.combinations(range(len(judges)), 2)
    )
    alphas = _alphas(active, k, reason, left_out, bootstrap, seed, confidence)
    single, average, incomplete = _iccs(active, k, records, reason, left_out, confidence)
    defined = [p for p in pairs if p.judge_a in names and p.judge_b in names]
    mean, kish, eigen = effective_judges(
        defined, names, int(pairable(active).sum()), reason, left_out
    )
    return JudgeAgreement(
        criterion,
        tuple(judges),
        len(records),
        silent,
        incomplete,
        confidence,
        *alphas,
        single,
        average,
        pairs,
        mean,
        kish,
        eigen,
    )


def agreement_frame(agreements: Iterable[JudgeAgreement]) -> pd.DataFrame:
    """One row per criterion x statistic (per judge pair for ``spearman``), the columns of
    :data:`AGREEMENT_COLUMNS`: the table of ``stats/<prefix>_agreement.csv``."""
    rows: list[dict[str, object]] = []
    for agreement in agreements:
        base = {"criterion": agreement.criterion, "confidence": agreement.confidence}
        panel = [
            (Statistic.ALPHA_INTERVAL, agreement.alpha_interval),
            (Statistic.ALPHA_ORDINAL, agreement.alpha_ordinal),
            (Statistic.ICC_SINGLE, agreement.icc_single),
            (Statistic.ICC_AVERAGE, agreement.icc_average),
        ]
        for statistic, estimate in panel:
            rows.append({**base, "statistic": str(statistic), **_columns(estimate)})
        for pair in agreement.pairs:
            rows.append(
                {
                    **base,
                    "statistic": str(Statistic.SPEARMAN),
                    "judge_a": pair.judge_a,
                    "judge_b": pair.judge_b,
                    "value": pair.spearman,
                    "records": pair.records,
                    "judges": 2,
                    "method": "Spearman on the records both judges scored",
                    "note": pair.note,
                }
            )
        for statistic, estimate in [
            (Statistic.MEAN_SPEARMAN, agreement.mean_spearman),
            (Statistic.EFFECTIVE_JUDGES, agreement.effective_judges),
            (Statistic.EFFECTIVE_JUDGES_EIGEN, agreement.effective_judges_eigen),
        ]:
            rows.append({**base, "statistic": str(statistic), **_columns(estimate)})
    frame = pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
    for text in ("judge_a", "judge_b", "method", "note"):
        frame[text] = frame[text].fillna("")
    return frame


def _columns(estimate: Estimate) -> dict[str, object]:
    return {
        "value": estimate.value,
        "ci_low": estimate.ci_low,
        "ci_high": estimate.ci_high,
        "records": estimate.records,
        "judges": estimate.judges,
        "method": estimate.method,
        "note": estimate.note,
    }


def _undefined_reason(active: np.ndarray, k: int) -> str:
    """Why no statistic of the panel is defined ("" when they may be)."""
    if k == 0:
        return "no judge scored any record"
    if k == 1:
        return "one judge: agreement needs two or more"
    if len(active) < 2:
        return f"{len(active)} record(s): agreement needs two or more"
    return ""


def _alphas(
    active: np.ndarray,
    k: int,
    reason: str,
    left_out: str,
    bootstrap: int,
    seed: int,
    confidence: float,
) -> tuple[Estimate, Estimate]:
    units = int(pairable(active).sum()) if k else 0
    method = (
        "Krippendorff's alpha, {}; percentile bootstrap over the records two or more judges "
        f"scored ({bootstrap} resamples, seed {seed})"
    )
    if reason or units == 0 or not _varies(active):
        # No alpha to bootstrap: say why, with nothing drawn.
        why = reason or (
            "no record was scored by two judges"
            if units == 0
            else "no variation: every score is the same value"
        )
        note = join_notes(why, left_out)
        interval, ordinal = (
            Estimate(math.nan, records=units, judges=k, method=method.format(level), note=note)
            for level in ("interval", "ordinal")
        )
        return interval, ordinal
    drawn = bootstrap_alpha(active, bootstrap=bootstrap, seed=seed, confidence=confidence)
    out = []
    for level, value, (low, high), undefined in (
        ("interval", alpha_interval(active), drawn.interval, drawn.undefined_interval),
        ("ordinal", alpha_ordinal(active), drawn.ordinal, drawn.undefined_ordinal),
    ):
        no_ci = "bootstrap = 0: no interval" if bootstrap <= 0 else ""
        dropped = (
            f"{undefined} of {bootstrap} resamples had no spread, left out" if undefined else ""
        )
        out.append(
            Estimate(
                value,
                low,
                high,
                units,
                k,
                method.format(level),
                join_notes(no_ci, dropped, left_out),
            )
        )
    return out[0], out[1]


def _iccs(
    active: np.ndarray,
    k: int,
    records: Sequence[str],
    reason: str,
    left_out: str,
    confidence: float,
) -> tuple[Estimate, Estimate, tuple[str, ...]]:
    complete = ~np.isnan(active).any(axis=1) if k else np.zeros(len(records), dtype=bool)
    incomplete = tuple(r for r, full in zip(records, complete, strict=True) if not full)
    dropped = (
        f"{len(incomplete)} record(s) not scored by every judge left out" if incomplete else ""
    )
    result = None if reason else icc(active[complete], confidence=confidence)
    out = []
    for label, mcgraw, single in (("ICC(2,1)", "ICC(A,1)", True), ("ICC(2,k)", "ICC(A,k)", False)):
        method = ICC_METHOD.format(label, mcgraw)
        if result is None:
            used = int(complete.sum())
            note = join_notes(reason, dropped, left_out)
            out.append(Estimate(math.nan, records=used, judges=k, method=method, note=note))
            continue
        value = result.single if single else result.average
        low, high = result.single_interval if single else result.average_interval
        note = join_notes(result.note if single else result.average_note, dropped, left_out)
        out.append(Estimate(value, low, high, result.records, k, method, note))
    return out[0], out[1], incomplete


def _varies(active: np.ndarray) -> bool:
    values = np.round(active[pairable(active)], TIES)
    values = values[~np.isnan(values)]
    return bool(values.size) and values.min() != values.max()
