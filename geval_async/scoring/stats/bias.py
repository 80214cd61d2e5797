"""Statistics of what a judge may react to besides quality: one row per check.

Judges reward things other than the quality a criterion names: longer texts, the text shown
first, their own family's writing; and some put nearly every record on one rating, so the
criterion cannot separate the records. Each check here is computed from numbers already
scored (no request), gives one :class:`BiasRow` per criterion and scope, and is flagged by a
fixed rule:

- ``length``: Spearman's rho of the weighted score with the length of the text judged, with
  Bonett and Wright's interval (:func:`spearman_interval`); flagged when the interval excludes
  0 and ``|rho| >= 0.3`` (:data:`LENGTH_RHO`).
- ``scale``: the share of the scale's points used, the share of the most common rating and the
  entropy of the ratings (bits); flagged when one rating takes 80% or more of the valid
  ratings (:data:`TOP_SHARE`).
- ``position`` (pairwise criteria): the share of verdicts won by the text shown first, with
  its interval; flagged when the interval excludes 0.5 (:func:`position_rows` reads the
  pairwise statistics' rows).
- ``self_preference``: the judge's mean score of texts written by its own model family minus
  its mean score of the others' (Welch's test and interval); flagged when the own family
  scores higher at ``alpha``. Quality may differ between the families too: the row says so.

:func:`model_family` names a model's family from a small table of name stems. Pure and sync:
numpy, scipy and pandas only.
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pandas as pd
from scipy import stats as sps

__all__ = [
    "ADVICE",
    "ALL_CONDITIONS",
    "BIAS_COLUMNS",
    "FAMILIES",
    "LENGTH_RHO",
    "TOP_SHARE",
    "BiasCheck",
    "BiasRow",
    "bias_frame",
    "length_rows",
    "model_family",
    "position_rows",
    "scale_rows",
    "self_preference_row",
    "spearman_interval",
]

_NAN = float("nan")
LENGTH_RHO = 0.3  # a length correlation this strong (either sign) is flagged
TOP_SHARE = 0.8  # one rating with this share of the valid ratings is a collapsed scale
NO_POSITION = 0.5  # the share the text shown first wins with no position bias
ALL_CONDITIONS = "all"  # the scope of a row pooled over the conditions


class BiasCheck(StrEnum):
    """What a row of the bias table checks."""

    LENGTH = "length"
    SCALE = "scale"
    POSITION = "position"
    SELF_PREFERENCE = "self_preference"


# What to do about a flag, one sentence per check.
ADVICE = {
    BiasCheck.LENGTH: "Compare texts of similar length (a length-controlled comparison: match "
    "or stratify the records by length, or model the score with length as a covariate) before "
    "reading a difference as quality, and ask another judge or a panel whether it shares the "
    "habit.",
    BiasCheck.SCALE: "This criterion barely separates the records: reword its scale points or "
    "its evaluation steps, or ask another judge or a panel, before reading its differences.",
    BiasCheck.POSITION: "Swap orders: ask both orders of every pair (the default) and combine "
    "them, so the text shown first gains nothing.",
    BiasCheck.SELF_PREFERENCE: "Let a judge of another family, or a panel of several families, "
    "score these texts, and compare with human ratings where there are some: the gap may be "
    "quality too.",
}

BIAS_COLUMNS = [
    "check",
    "criterion",
    "condition",
    "measure",
    "value",
    "ci_low",
    "ci_high",
    "p",
    "n",
    "flagged",
    "note",
    "advice",
]


@dataclass(frozen=True)
class BiasRow:
    """One check of one criterion in one scope (a condition, or :data:`ALL_CONDITIONS`).

    Attributes:
        check: what is checked (:class:`BiasCheck`).
        measure: what ``value`` is: ``spearman``, ``top_share``, ``points_used``,
            ``entropy_bits``, ``first_shown_wins`` or ``own_minus_other``.
        ci_low, ci_high: the interval of ``value`` (NaN where it has none).
        p: the test's p-value (NaN where there is none).
        n: the records, ratings or verdicts the value comes from.
        flagged: whether the check's rule flags it.
        note: what a reader needs besides the number (why it is NaN, which rating dominates).
        advice: what to do, when flagged ("" otherwise).
    """

    check: BiasCheck
    criterion: str
    condition: str
    measure: str
    value: float
    ci_low: float = _NAN
    ci_high: float = _NAN
    p: float = _NAN
    n: int = 0
    flagged: bool = False
    note: str = ""
    advice: str = ""

    def __post_init__(self) -> None:
        if self.flagged and not self.advice:
            object.__setattr__(self, "advice", ADVICE[self.check])


def bias_frame(rows: Iterable[BiasRow]) -> pd.DataFrame:
    """One row per check (:data:`BIAS_COLUMNS`), in the order given."""
    records = [dataclasses.asdict(row) for row in rows]
    for record in records:
        record["check"] = str(record["check"])
    frame = pd.DataFrame(records, columns=BIAS_COLUMNS)
    return frame.astype({"flagged": bool, "n": int}) if len(frame) else frame


# --- length ------------------------------------------------------------------------------------


def spearman_interval(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    interval: bool = True,
) -> tuple[float, float, float, float, str]:
    """Spearman's rho of ``x`` and ``y``, its interval and p-value.

    The interval is Bonett and Wright's (2000): Fisher's z of rho with the variance
    (1 + rho^2 / 2) / (n - 3), whatever the number of records. It needs no resampling, so a
    study of a million records costs what one of fifty does, and it covers the population's
    rho about as often as it says from 50 records up, with the ties of weighted scores
    (``bench/length_interval.py``).

    Args:
        interval: False leaves the interval out (``[bias] interval = false``).

    Returns:
        (rho, low, high, p, note): NaN for what cannot be computed (fewer than three pairs,
        or no variation on a side), with the note saying why; low and high NaN without an
        interval.
    """
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(a)
    if n < 3:
        return _NAN, _NAN, _NAN, _NAN, "fewer than 3 scored records"
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        side = "score" if np.ptp(a) == 0 else "length"
        return _NAN, _NAN, _NAN, _NAN, f"every record has the same {side}"
    result = sps.spearmanr(a, b)
    rho, p = float(result.statistic), float(result.pvalue)
    if not interval:
        return rho, _NAN, _NAN, p, "no interval: [bias] interval = false"
    if n <= 3:
        return rho, _NAN, _NAN, p, "no interval from 3 records"
    low, high = _bonett_wright(rho, n, confidence)
    return rho, low, high, p, ""


def _bonett_wright(rho: float, n: int, confidence: float) -> tuple[float, float]:
    """Fisher's z of Spearman's rho with Bonett and Wright's variance (1 + rho^2 / 2) / (n - 3),
    back on rho's scale."""
    if abs(rho) >= 1:
        return rho, rho
    z, q = math.atanh(rho), float(sps.norm.ppf(1 - (1 - confidence) / 2))
    half = q * math.sqrt((1 + rho**2 / 2) / (n - 3))
    return math.tanh(z - half), math.tanh(z + half)


def length_rows(
    criterion: str,
    scored: pd.DataFrame,
    *,
    confidence: float = 0.95,
    interval: bool = True,
    fields: str = "",
) -> list[BiasRow]:
    """The length check of one criterion: pooled, then within each condition.

    Args:
        scored: one row per scored record, columns ``score``, ``length`` and ``condition``
            (None or NaN where the records have no condition).
        interval: False leaves the intervals out (and so the flags).
        fields: the record fields measured, for the note.
    """
    scopes: list[tuple[str, pd.DataFrame]] = [(ALL_CONDITIONS, scored)]
    conditions = scored["condition"].dropna()
    if conditions.nunique() > 1:
        scopes += [(str(c), scored[scored["condition"] == c]) for c in dict.fromkeys(conditions)]
    rows = []
    for condition, part in scopes:
        rho, low, high, p, note = spearman_interval(
            part["score"].to_numpy(float),
            part["length"].to_numpy(float),
            confidence=confidence,
            interval=interval,
        )
        excludes_zero = not math.isnan(low) and (low > 0 or high < 0)
        measured = f"length of {fields} in characters" if fields else ""
        rows.append(
            BiasRow(
                BiasCheck.LENGTH,
                criterion,
                condition,
                "spearman",
                rho,
                low,
                high,
                p,
                len(part),
                flagged=excludes_zero and abs(rho) >= LENGTH_RHO,
                note="; ".join(n for n in (measured, note) if n),
            )
        )
    return rows


# --- use of the scale --------------------------------------------------------------------------


def scale_rows(
    criterion: str, ratings: Sequence[float] | np.ndarray, points: Sequence[float]
) -> list[BiasRow]:
    """How the valid ratings of one criterion use its scale's ``points``: the share of points
    used, the share of the most common rating (flagged at :data:`TOP_SHARE` or more) and the
    entropy in bits (the most is log2 of the number of points)."""
    values = np.asarray(ratings, dtype=float)
    values = values[~np.isnan(values)]
    n = len(values)
    if not n:
        note = "no valid rating"
        return [
            BiasRow(BiasCheck.SCALE, criterion, ALL_CONDITIONS, measure, _NAN, note=note)
            for measure in ("top_share", "points_used", "entropy_bits")
        ]
    found, counts = np.unique(values, return_counts=True)
    shares = counts / n
    top = int(np.argmax(counts))
    used = len({float(v) for v in found} & {float(p) for p in points})
    entropy = float(-(shares * np.log2(shares)).sum()) + 0.0  # never -0.0
    most = math.log2(len(points)) if len(points) > 1 else 0.0
    return [
        BiasRow(
            BiasCheck.SCALE,
            criterion,
            ALL_CONDITIONS,
            "top_share",
            float(shares[top]),
            n=n,
            flagged=bool(shares[top] >= TOP_SHARE),
            note=f"most common rating {found[top]:g}",
        ),
        BiasRow(
            BiasCheck.SCALE,
            criterion,
            ALL_CONDITIONS,
            "points_used",
            used / len(points) if points else _NAN,
            n=n,
            note=f"{used} of {len(points)} points",
        ),
        BiasRow(
            BiasCheck.SCALE,
            criterion,
            ALL_CONDITIONS,
            "entropy_bits",
            entropy,
            n=n,
            note=f"at most {most:.3g} bits",
        ),
    ]


# --- position (pairwise criteria) --------------------------------------------------------------


def position_rows(pairwise: pd.DataFrame) -> list[BiasRow]:
    """The position check of each pairwise criterion and pair of conditions, from the pairwise
    statistics' rows (columns ``criterion``, ``a``, ``b``, ``first_shown_wins``,
    ``first_ci_low``, ``first_ci_high`` and ``first_shown_verdicts``): flagged when the
    interval of the share won by the text shown first excludes 0.5."""
    rows = []
    for row in pairwise.itertuples():
        share, low, high = (
            float(v) for v in (row.first_shown_wins, row.first_ci_low, row.first_ci_high)
        )
        excludes = not math.isnan(low) and (low > NO_POSITION or high < NO_POSITION)
        rows.append(
            BiasRow(
                BiasCheck.POSITION,
                str(row.criterion),
                f"{row.a} vs {row.b}",
                "first_shown_wins",
                share,
                low,
                high,
                n=int(row.first_shown_verdicts),
                flagged=excludes,
                note="0.5 is no position bias",
            )
        )
    return rows


# --- self-preference ---------------------------------------------------------------------------

# Model families by the stems of their names: a name's first word (split at "/", "-", "_",
# ".", ":" and spaces) that is a stem, or a stem followed by a version number ("llama3",
# "qwen2"), names its family. A name no stem matches has no family; the ``[bias]``
# ``judge_family`` key names the judge's then, and a writer field may hold a family itself.
FAMILIES: dict[str, tuple[str, ...]] = {
    "openai": ("gpt", "chatgpt", "o1", "o3", "o4", "davinci"),
    "anthropic": ("claude",),
    "google": ("gemini", "gemma", "palm", "bison"),
    "meta": ("llama",),
    "mistral": ("mistral", "mixtral", "ministral", "codestral", "pixtral"),
    "qwen": ("qwen", "qwq"),
    "deepseek": ("deepseek",),
    "microsoft": ("phi",),
    "cohere": ("command", "aya"),
    "xai": ("grok",),
}
_STEMS = {stem: family for family, stems in FAMILIES.items() for stem in stems}
_WORD = re.compile(r"[/\-_.:\s]+")
_VERSIONED = re.compile(r"([a-z]+)\d[\w]*")


def model_family(name: str) -> str | None:
    """The family of the model called ``name`` ("gpt-4o-mini" -> "openai",
    "meta-llama/Llama-3.1-8B" -> "meta"), a family's own name as itself, else None."""
    text = name.strip().casefold()
    if text in FAMILIES:
        return text
    for word in _WORD.split(text):
        stem = word if word in _STEMS else None
        if stem is None:
            versioned = _VERSIONED.fullmatch(word)
            stem = versioned.group(1) if versioned and versioned.group(1) in _STEMS else None
        if stem is not None:
            return _STEMS[stem]
    return None


def self_preference_row(
    criterion: str,
    own: Sequence[float] | np.ndarray,
    others: Sequence[float] | np.ndarray,
    family: str,
    *,
    alpha: float = 0.05,
) -> BiasRow:
    """The judge's mean score of its own family's texts minus the others', with Welch's
    interval and test; flagged when the own family scores higher at ``alpha``."""
    a, b = np.asarray(own, dtype=float), np.asarray(others, dtype=float)
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    caveat = "the families' texts may differ in quality too"
    base = f"judge family {family}: {len(a)} own texts vs {len(b)} others'"
    if len(a) < 2 or len(b) < 2:
        note = f"{base}; fewer than 2 scored texts on a side"
        return BiasRow(
            BiasCheck.SELF_PREFERENCE,
            criterion,
            ALL_CONDITIONS,
            "own_minus_other",
            _NAN,
            n=len(a) + len(b),
            note=note,
        )
    difference = float(a.mean() - b.mean())
    if np.ptp(np.concatenate([a, b])) == 0:
        return BiasRow(
            BiasCheck.SELF_PREFERENCE,
            criterion,
            ALL_CONDITIONS,
            "own_minus_other",
            difference,
            n=len(a) + len(b),
            note=f"{base}; every text has the same score",
        )
    with warnings.catch_warnings():
        # scipy warns of "catastrophic cancellation" when one side is constant, though
        # Welch's test is well defined then.
        warnings.simplefilter("ignore", RuntimeWarning)
        test = sps.ttest_ind(a, b, equal_var=False)
    interval = test.confidence_interval(1 - alpha)
    p = float(test.pvalue)
    return BiasRow(
        BiasCheck.SELF_PREFERENCE,
        criterion,
        ALL_CONDITIONS,
        "own_minus_other",
        difference,
        float(interval.low),
        float(interval.high),
        p,
        len(a) + len(b),
        flagged=bool(p < alpha and difference > 0),
        note=f"{base} (means {a.mean():.3f} and {b.mean():.3f}); {caveat}",
    )
