"""Ratings: from a judge's answer (text or first-token logprobs) to a rating distribution.

A *rating* is one point of a criterion's :class:`Scale`. A judge gives ratings in two ways:

- as text, one rating per sampled answer, read by a :class:`RatingParser`; many samples make
  a distribution with :func:`distribution_from_samples`;
- as the ``top_logprobs`` of its first token, which :func:`distribution_from_logprobs` turns
  into a distribution directly (G-Eval's probability-weighted score).

Either way the result is a :class:`RatingDistribution` whose ``weighted_score`` is
sum(p(v) * v). Anything that is not a rating on the scale is *invalid*: it is counted, never
clipped or guessed into range.

Everything here is pure: no I/O, no asyncio.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..options import ParserMode, parse_option
from ..study.scale import Scale

__all__ = [
    "RatingDistribution",
    "RatingParser",
    "Scale",
    "distribution_from_logprobs",
    "distribution_from_samples",
    "first_token_top_logprobs",
]

# --- text answers -------------------------------------------------------------------------

# A number not glued to a word or another number ("GPT4", "4th", "v2" are not ratings). ASCII
# only, so "4分" still reads as 4. The sign belongs to the number only when nothing precedes it,
# which keeps "1-5" from reading as 1 and -5.
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?![A-Za-z0-9_]|\.\d)")
# "1-5", "1 – 5", "1 to 5": the scale echoed back, not a rating.
_RANGE = re.compile(r"\d+(?:\.\d+)?\s*(?:-|–|—|\bto\b)\s*\d+(?:\.\d+)?", re.IGNORECASE)
# "/5" and "out of 5" give the maximum, not the rating.
_DENOMINATOR = re.compile(r"(?:/|\bout\s+of\b)\s*[-+]?(?:\d+(?:\.\d+)?|\.\d+)", re.IGNORECASE)
_LABEL = re.compile(r"\b(?:scor(?:e|es|ed|ing)|rat(?:e|es|ed|ing|ings)|grad(?:e|es|ed))\b", re.I)
# What may stand between a label and its number: punctuation, markdown and a few filler words
# ("Score: **4**", "score is 4", "I would rate it a 4", "rating of 4"). Anything else means the
# label is talking about something else ("this rating reflects 2 issues").
_FILLER_PUNCTUATION = r"[\s:=*_#`'\"()\[\]{}<>|~-]*"
_LABEL_FILLER = re.compile(
    _FILLER_PUNCTUATION
    + r"(?:(?:is|of|be|would|will|it|this|that|a|an|as|at|my|the|final|overall|i|i'd|give)\b"
    + _FILLER_PUNCTUATION
    + r"){0,4}",
    re.IGNORECASE,
)
# Text that may precede an answer-first rating ("4", "**4**", "# 4", "> 4").
_LEADING = re.compile(r"[\s*_#>`'\"(\[]*")
_GEVAL = re.compile(r"\s*([-+]?\d+(?:\.\d+)?)")


def _mask_non_ratings(text: str) -> str:
    """``text`` with echoed ranges and denominators blanked out, positions unchanged."""
    for pattern in (_RANGE, _DENOMINATOR):
        text = pattern.sub(lambda m: " " * len(m.group()), text)
    return text


def _labelled(masked: str, numbers: list[re.Match[str]]) -> re.Match[str] | None:
    """The number right after the last label that is followed by one, if any."""
    starts = [n.start() for n in numbers]
    for label in reversed(list(_LABEL.finditer(masked))):
        i = bisect.bisect_left(starts, label.end())
        if i == len(numbers):
            continue
        if _LABEL_FILLER.fullmatch(masked[label.end() : starts[i]]):
            return numbers[i]
    return None


def _lenient(text: str) -> float | None:
    masked = _mask_non_ratings(text)
    numbers = list(_NUMBER.finditer(masked))
    number = _labelled(masked, numbers)
    if number is None and numbers:
        # Answer-first ("4\n\nThe summary misses 2 points") keeps its first number, like
        # G-Eval; otherwise the verdict comes last ("It has 2 issues, so I give it a 3").
        first = numbers[0]
        number = first if _LEADING.fullmatch(masked[: first.start()]) else numbers[-1]
    return None if number is None else float(number.group())


class RatingParser:
    """Reads one rating from a judge's text answer, per criterion.

    Modes:
        ``"geval"``: like the original G-Eval code, the answer must start with the number
            (after optional whitespace): "4", " 4", "4.", "4/5", "4\\n". "Score: 4" is invalid.
        ``"lenient"`` (default): the number after the last "score"/"rating"-like label; without
            one, the number the answer opens with, or else the last number. Ranges echoed from
            the prompt ("1-5", "1 to 5") and denominators ("/5", "out of 5") are never ratings.
        ``"regex"``: ``pattern``'s single capturing group holds the rating.

    In every mode a number that is not a point of the scale makes the answer invalid (None).
    """

    def __init__(
        self, scale: Scale, mode: ParserMode | str = ParserMode.LENIENT, pattern: str | None = None
    ) -> None:
        """Check the configuration.

        Raises:
            ConfigError: unknown mode, a pattern without exactly one group, a pattern given to
                a mode that does not use one, or regex mode without a pattern.
        """
        self.scale = scale
        self.mode = mode = parse_option(ParserMode, mode, "the rating parser mode")
        self._regex: re.Pattern[str] | None = None
        if mode == ParserMode.REGEX:
            if pattern is None:
                raise ConfigError("rating parser mode 'regex' needs a pattern")
            try:
                self._regex = re.compile(pattern)
            except re.error as exc:
                raise ConfigError(
                    f"rating pattern {pattern!r} is not a valid regex: {exc}"
                ) from exc
            if self._regex.groups != 1:
                raise ConfigError(
                    f"rating pattern {pattern!r} must have exactly one capturing group, "
                    f"it has {self._regex.groups}"
                )
        elif pattern is not None:
            raise ConfigError(f"a rating pattern only applies to mode 'regex', not {mode!r}")

    def __repr__(self) -> str:
        pattern = f", pattern={self._regex.pattern!r}" if self._regex else ""
        return f"RatingParser({self.scale!r}, mode={self.mode!r}{pattern})"

    def parse(self, text: str) -> float | None:
        """The rating in ``text``, or None if there is none or it is not on the scale."""
        value = _lenient(text) if self.mode == ParserMode.LENIENT else self._match(text)
        return None if value is None else self.scale.point(value)

    def _match(self, text: str) -> float | None:
        m = self._regex.search(text) if self._regex else _GEVAL.match(text)
        if m is None or m.group(1) is None:
            return None
        try:
            return float(m.group(1))
        except ValueError:
            return None


# --- distributions ------------------------------------------------------------------------


@dataclass(frozen=True)
class RatingDistribution:
    """Probabilities over ratings, from sampled answers or from first-token logprobs.

    Attributes:
        probs: rating -> probability, summing to 1 over valid ratings; empty if none is valid.
        valid: samples: how many samples gave a rating; logprobs: 1 if any mass is on a rating.
        invalid: samples: how many did not; logprobs: 0 or 1.
        valid_mass: logprobs: the probability on valid ratings before renormalising;
            samples: valid / (valid + invalid).
    """

    probs: dict[float, float]
    valid: int
    invalid: int
    valid_mass: float

    @property
    def weighted_score(self) -> float | None:
        """sum(p(v) * v) over ratings, or None when no rating is valid."""
        if not self.probs:
            return None
        score = math.fsum(p * v for v, p in self.probs.items())
        # Probabilities that sum to 1 only up to rounding can push the score a hair past the
        # extreme ratings; keep it inside them.
        return min(max(score, min(self.probs)), max(self.probs))

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


# Tokenizers show a word-initial space as "▁" (sentencepiece) or "Ġ" (byte-level BPE).
_SPACE_MARKERS = "▁Ġ"
_TOKEN_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _token_rating(token: str, scale: Scale) -> float | None:
    text = token.strip().lstrip(_SPACE_MARKERS).strip()
    if not _TOKEN_NUMBER.fullmatch(text):
        return None
    return scale.point(float(text))


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
    best: dict[str, float] = {}
    for entry in top_logprobs if isinstance(top_logprobs, list) else ():
        if not isinstance(entry, dict):
            continue  # a malformed alternative is skipped, not fatal
        token, logprob = entry.get("token"), entry.get("logprob")
        if not isinstance(token, str) or not isinstance(logprob, int | float):
            continue
        # A log-probability is at most 0; NaN or a positive value is a broken answer.
        if math.isnan(logprob) or logprob > 0:
            continue
        best[token] = max(logprob, best.get(token, -math.inf))

    mass: dict[float, float] = {}
    for token, logprob in best.items():
        rating = _token_rating(token, scale)
        if rating is not None:
            mass[rating] = mass.get(rating, 0.0) + math.exp(logprob)
    valid_mass = math.fsum(mass.values())
    if valid_mass <= 0.0:
        return RatingDistribution(probs={}, valid=0, invalid=1, valid_mass=0.0)
    return RatingDistribution(
        probs={v: mass[v] / valid_mass for v in sorted(mass)},
        valid=1,
        invalid=0,
        valid_mass=valid_mass,
    )


def first_token_top_logprobs(choice: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The ``top_logprobs`` of the first non-whitespace token of an OpenAI chat choice.

    Some models open with " " or "\\n" before the rating, so whitespace-only tokens are
    skipped. Returns None when the choice carries no logprobs.
    """
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return None
    for entry in content:
        if not isinstance(entry, dict):
            return None
        token = entry.get("token")
        if isinstance(token, str) and not token.strip():
            continue
        top = entry.get("top_logprobs")
        return top if isinstance(top, list) else None
    return None
