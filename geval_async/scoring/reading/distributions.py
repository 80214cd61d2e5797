"""Rating distributions: sampled ratings or first-token logprobs -> probabilities over ratings.

A judge gives ratings in two ways: as text, one rating per sampled answer (read by
:class:`geval_async.scoring.reading.ratings.RatingParser`), which :func:`distribution_from_samples`
counts; or as the ``top_logprobs`` of its first token, which :func:`distribution_from_logprobs`
(and :func:`distribution_from_option_logprobs` for labelled options) turns into a distribution
directly (G-Eval's probability-weighted score). Either way the result is a
:class:`RatingDistribution` whose ``weighted_score`` is sum(p(v) * v).

Everything here is pure: no I/O, no asyncio.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ...options import Reason
from ...study.scale import Scale
from .thinking import split_reasoning

__all__ = [
    "RatingDistribution",
    "best_logprobs",
    "distribution_from_logprobs",
    "distribution_from_option_logprobs",
    "distribution_from_samples",
    "first_token_top_logprobs",
    "invalid_distribution",
    "standard_error",
    "with_mass_floor",
]


@dataclass(frozen=True)
class RatingDistribution:
    """Probabilities over ratings, from sampled answers or from first-token logprobs.

    Attributes:
        probs: rating -> probability, summing to 1 over valid ratings; empty if none is valid.
        valid: samples: how many samples gave a rating; logprobs: 1 if any mass is on a rating.
        invalid: samples: how many did not; logprobs: 0 or 1.
        valid_mass: logprobs: the probability on valid ratings before renormalising;
            samples: valid / (valid + invalid).
        reason: logprobs: why the first token gave no distribution (no rating token, logprobs
            that are not probabilities, too little mass on ratings); None otherwise.
    """

    probs: dict[float, float]
    valid: int
    invalid: int
    valid_mass: float
    reason: Reason | None = None

    @cached_property  # read by the status, the tables and the raw export of every item
    def weighted_score(self) -> float | None:
        """sum(p(v) * v) over ratings, or None when no rating is valid."""
        if not self.probs:
            return None
        score = math.fsum(p * v for v, p in self.probs.items())
        # Probabilities that sum to 1 only up to rounding can push the score a hair past the
        # extreme ratings; keep it inside them.
        return min(max(score, min(self.probs)), max(self.probs))

    @property
    def sd(self) -> float | None:
        """The distribution's standard deviation sqrt(sum(p(v) * (v - mean)^2)), or None when
        no rating is valid.

        In logprobs mode this is the spread of the judge's belief over the ratings on one
        draw, the issue's "standard error" of a logprobs score: not a sampling error, since
        asking again at temperature 0 gives the same distribution.
        """
        if not self.probs:
            return None
        mean = math.fsum(p * v for v, p in self.probs.items())
        return math.sqrt(math.fsum(p * (v - mean) ** 2 for v, p in self.probs.items()))

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form; ratings become string keys ("4", "0.5")."""
        return {
            "probs": {_rating_key(v): p for v, p in self.probs.items()},
            "valid": self.valid,
            "invalid": self.invalid,
            "valid_mass": self.valid_mass,
            "weighted_score": self.weighted_score,
        }


def _rating_key(value: float) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def distribution_from_samples(ratings: Iterable[float | None]) -> RatingDistribution:
    """The distribution of parsed sample ratings; None (and NaN) count as invalid samples."""
    counts: dict[float, int] = {}
    invalid = 0
    for rating in ratings:
        if rating is None or not math.isfinite(rating):
            invalid += 1
        else:
            counts[float(rating)] = counts.get(float(rating), 0) + 1
    valid = sum(counts.values())
    total = valid + invalid
    return RatingDistribution(
        probs={v: counts[v] / valid for v in sorted(counts)},
        valid=valid,
        invalid=invalid,
        valid_mass=valid / total if total else 0.0,
    )


def standard_error(ratings: Iterable[float | None]) -> float | None:
    """The standard error of the mean of the valid ratings: s / sqrt(m), s their sample
    standard deviation with ddof = 1, m how many are valid (None and NaN are invalid).

    ddof = 1 because the mean is estimated from the same draws (ddof = 0 would understate
    the spread, by a factor sqrt(1/2) at m = 2). With fewer than two valid ratings the spread
    is unknown: None (shown as NaN), never 0.
    """
    valid = [float(r) for r in ratings if r is not None and math.isfinite(r)]
    m = len(valid)
    if m < 2:
        return None
    mean = math.fsum(valid) / m
    variance = math.fsum((r - mean) ** 2 for r in valid) / (m - 1)
    return math.sqrt(variance / m)


# Tokenizers show a word-initial space as "▁" (sentencepiece) or "Ġ" (byte-level BPE).
_SPACE_MARKERS = "▁Ġ"
_TOKEN_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _token_rating(token: str, scale: Scale) -> float | None:
    text = token.strip().lstrip(_SPACE_MARKERS).strip()
    if not _TOKEN_NUMBER.fullmatch(text):
        return None
    return scale.point(float(text))


# A logprob the server rounded: up to this far above 0 it is 0 (certainty), not impossible.
LOGPROB_ROUNDING = 1e-6
# The alternatives' probabilities may sum past 1 by rounding only; 5 tokens at logprob 0 lie.
MASS_ROUNDING = 1e-3


def best_logprobs(top_logprobs: list[dict[str, Any]]) -> dict[str, float] | None:
    """Token -> its highest logprob, or None when the logprobs cannot be probabilities.

    A logprob within :data:`LOGPROB_ROUNDING` above 0 is 0. A logprob that is not a number
    (a string, null, NaN, +inf), one clearly above 0, or alternatives whose probabilities sum
    above 1 beyond rounding make the whole list a lie: None, and the answer is invalid
    (:attr:`Reason.BAD_LOGPROBS`) rather than scored from what is left. An entry that is not
    a token (not a dict, no token string) is skipped.
    """
    best: dict[str, float] = {}
    for entry in top_logprobs if isinstance(top_logprobs, list) else ():
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
            continue  # a malformed alternative is skipped, not fatal
        token, logprob = entry["token"], entry.get("logprob")
        if not isinstance(logprob, int | float) or isinstance(logprob, bool):
            return None
        if math.isnan(logprob) or logprob > LOGPROB_ROUNDING:
            return None
        best[token] = max(min(float(logprob), 0.0), best.get(token, -math.inf))
    if math.fsum(math.exp(lp) for lp in best.values()) > 1.0 + MASS_ROUNDING:
        return None
    return best


def invalid_distribution(reason: Reason, valid_mass: float = 0.0) -> RatingDistribution:
    """One invalid sample with its reason (no rating token, lying logprobs, too little mass)."""
    return RatingDistribution(probs={}, valid=0, invalid=1, valid_mass=valid_mass, reason=reason)


def with_mass_floor(distribution: RatingDistribution, floor: float) -> RatingDistribution:
    """``distribution``, or an invalid ``low_mass`` one when less than ``floor`` of the first
    token's probability is on valid ratings: a score from the scraps would be a guess."""
    if distribution.valid and distribution.valid_mass < floor:
        return invalid_distribution(Reason.LOW_MASS, distribution.valid_mass)
    return distribution


def _from_token_mass(
    top_logprobs: list[dict[str, Any]], rating: Callable[[str], float | None]
) -> RatingDistribution:
    best = best_logprobs(top_logprobs)
    if best is None:
        return invalid_distribution(Reason.BAD_LOGPROBS)
    mass: dict[float, float] = {}
    for token, logprob in best.items():
        value = rating(token)
        if value is not None:
            mass[value] = mass.get(value, 0.0) + math.exp(logprob)
    valid_mass = math.fsum(mass.values())
    if valid_mass <= 0.0:
        return invalid_distribution(Reason.NO_RATING)
    return RatingDistribution(
        probs={v: mass[v] / valid_mass for v in sorted(mass)},
        valid=1,
        invalid=0,
        valid_mass=valid_mass,
    )


def distribution_from_logprobs(
    top_logprobs: list[dict[str, Any]], scale: Scale
) -> RatingDistribution:
    """G-Eval's distribution from the ``top_logprobs`` of the first generated token.

    A token whose text (without surrounding whitespace and a leading "▁"/"Ġ") is a scale point
    votes for that rating. " 4" and "4" are different tokens, i.e. disjoint events, so their
    probabilities add up; the same token string listed twice is one event and counts once,
    with its higher logprob. The result is renormalised over the ratings.

    Only scales whose points are single tokens make sense here: on (0, 0.5, 1) the first token
    of "0.5" is "0".
    """
    return _from_token_mass(top_logprobs, lambda token: _token_rating(token, scale))


def distribution_from_option_logprobs(
    top_logprobs: list[dict[str, Any]], options: Mapping[str, float]
) -> RatingDistribution:
    """The distribution over declared options from the first token's ``top_logprobs``.

    A token votes for an option when it is the option's label ("D", " D") or the start of
    exactly one label ("Strongly" when only "Strongly agree" starts so); a token that starts
    several labels ("Strongly" for "Strongly agree" and "Strongly disagree") tells nothing.
    """
    labels = {label.lower(): value for label, value in options.items()}

    def rating(token: str) -> float | None:
        text = token.strip().lstrip(_SPACE_MARKERS).strip()
        if not text:
            return None
        exact = [v for label, v in options.items() if label == text]
        if exact:
            return exact[0]
        if len(text) == 1:  # a letter matches exactly (case counts: "a" is a word)
            return None
        starts = {v for label, v in labels.items() if label.startswith(text.lower())}
        return starts.pop() if len(starts) == 1 else None

    return _from_token_mass(top_logprobs, rating)


def first_token_top_logprobs(choice: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The ``top_logprobs`` of the first non-whitespace token of an OpenAI chat choice.

    Some models open with " " or "\\n" before the rating, so whitespace-only tokens are
    skipped, and thinking models reason first: the tokens up to the end of the reasoning
    (``</think>``, :func:`~geval_async.scoring.reading.thinking.split_reasoning`) are skipped too.
    Returns None when the choice carries no logprobs, or its reasoning never ended.
    """
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return None
    tokens = [e.get("token") if isinstance(e, dict) else None for e in content]
    text = "".join(t for t in tokens if isinstance(t, str))
    split = split_reasoning(text)
    if split.unfinished:
        return None  # cut off inside its reasoning: no token of it is the rating
    offset = 0
    for entry, token in zip(content, tokens, strict=True):
        if not isinstance(entry, dict):
            return None
        start, offset = offset, offset + (len(token) if isinstance(token, str) else 0)
        if start < split.answer_start:
            continue  # a token of the reasoning, up to and including "</think>"
        if isinstance(token, str) and not token.strip():
            continue
        top = entry.get("top_logprobs")
        return top if isinstance(top, list) else None
    return None
