"""Ratings: from a judge's text answer to one rating on a criterion's scale, or a reason.

A *rating* is one point of a criterion's :class:`Scale` (or, with ``fractional = "keep"``, a
value between two integer points, "4.5", as the original G-Eval code keeps it). A
:class:`RatingParser` reads each sampled answer into a :class:`Reading`: the rating, or the
:class:`Reason` there is none (no rating, off scale, ambiguous, fractional, refused or empty,
cut off). Anything that is not a rating is *invalid*: counted with its reason, never clipped
or guessed into range.

Modes:

- ``"lenient"`` (default): the careful reader of :mod:`geval_async.scoring.reading.verdicts`;
- ``"geval"``: like the original G-Eval code, the answer must start with the number;
- ``"regex"``: a pattern's group named ``rating`` (or its only group) holds the rating;
- ``"function"``: a Python function (``module:function`` in the config) returns the rating.

With declared ``options`` ("A" = 1, "Strongly agree" = 5) the answer is read for the labels.
The distributions built from readings live in :mod:`geval_async.scoring.reading.distributions`
(re-exported here). Pure: no I/O, no asyncio.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError
from ...options import Fractional, ParserMode, Reason, parse_option
from ...study.scale import Scale
from .distributions import (
    RatingDistribution,
    distribution_from_logprobs,
    distribution_from_option_logprobs,
    distribution_from_samples,
    first_token_top_logprobs,
)
from .thinking import REASONING_CUT_OFF, split_reasoning
from .verdicts import criterion_names, read_verdict

__all__ = [
    "RatingDistribution",
    "RatingParser",
    "Reading",
    "Reason",
    "Scale",
    "distribution_from_logprobs",
    "distribution_from_option_logprobs",
    "distribution_from_samples",
    "first_token_top_logprobs",
]

_GEVAL = re.compile(r"\s*([-+]?\d+(?:\.\d+)?)")
# Distinct answers a parser remembers: sampled answers repeat ("4", "Score: 4") across a study's
# thousands of samples, so most readings are looked up, not parsed again. The bound keeps a
# study of long, all-different answers from holding a reading per answer.
_REMEMBERED = 4096


@dataclass(frozen=True)
class Reading:
    """How one answer was read: its rating, or the reason it has none."""

    rating: float | None
    reason: Reason | None = None
    detail: str | None = None  # what the reason word alone does not say ("cut off inside ...")

    @property
    def valid(self) -> bool:
        return self.rating is not None


def _integer_steps(scale: Scale) -> bool:
    points = scale.points
    return all(p.is_integer() for p in points) and all(
        b - a == 1 for a, b in zip(points, points[1:], strict=False)
    )


class RatingParser:
    """Reads one rating from a judge's text answer, per criterion.

    In every mode a value that is not on the scale makes the answer invalid, with a reason.
    """

    def __init__(
        self,
        scale: Scale,
        mode: ParserMode | str = ParserMode.LENIENT,
        pattern: str | None = None,
        *,
        fractional: Fractional | str = Fractional.KEEP,
        options: Mapping[str, float] | None = None,
        names: Sequence[str] = (),
        function: Callable[[str], Any] | None = None,
    ) -> None:
        """Check the configuration.

        Args:
            scale: the ratings the answer may give.
            mode: ``lenient``, ``geval``, ``regex`` or ``function``.
            pattern: regex mode: a group named ``rating``, or exactly one group.
            fractional: a value between two integer points: ``keep`` it, ``round`` it to the
                nearest point (halves up), or count it ``invalid``.
            options: option label -> rating, when the judge answers with labels.
            names: the criterion's names, read as cues ("Coherence: 4").
            function: function mode: text -> a number, an option label, or None.

        Raises:
            ConfigError: unknown mode or fractional setting, a bad pattern, a pattern given to
                a mode that does not use one, or a mode without what it needs.
        """
        self.scale = scale
        self.mode = mode = parse_option(ParserMode, mode, "the rating parser mode")
        self.fractional = parse_option(Fractional, fractional, "fractional")
        self.options = dict(options or {})
        self.function = function
        self._names = criterion_names(names)
        self._regex: re.Pattern[str] | None = None
        self._readings: dict[str, Reading] = {}
        if mode == ParserMode.REGEX:
            self._regex = _compile(pattern)
        elif pattern is not None:
            raise ConfigError(f"a rating pattern only applies to mode 'regex', not {mode!r}")
        if mode == ParserMode.FUNCTION and function is None:
            raise ConfigError("rating parser mode 'function' needs a function")

    def __repr__(self) -> str:
        pattern = f", pattern={self._regex.pattern!r}" if self._regex else ""
        return f"RatingParser({self.scale!r}, mode={self.mode!r}{pattern})"

    def parse(self, text: str) -> float | None:
        """The rating in ``text``, or None if there is none or it is not on the scale."""
        return self.read(text).rating

    def read(
        self, text: str, finish_reason: str | None = None, reasoning: str | None = None
    ) -> Reading:
        """The rating in ``text`` (after any reasoning), or the reason there is none.

        Args:
            text: the answer (``message.content``); a leading ``<think>…</think>`` block, or
                everything up to a lone ``</think>``, is the judge's reasoning and is not read
                (:func:`~geval_async.scoring.reading.thinking.split_reasoning`).
            finish_reason: the API's ``finish_reason``; "length" (max_tokens reached) turns
                an answer without a rating into :attr:`Reason.CUT_OFF`.
            reasoning: the message's reasoning field, if the server sent one: never read.
        """
        if not isinstance(text, str):
            text = ""
        if "<" in text:  # a thinking model's reasoning in <think> tags is never the rating
            split = split_reasoning(text)
            if split.unfinished:
                return Reading(None, Reason.CUT_OFF, REASONING_CUT_OFF)
            text = split.answer
        reading = self._readings.get(text)
        if reading is None:
            reading = self._read(text)
            # Each distinct answer is parsed once (a user's function, which may not be pure,
            # is called for every answer).
            if self.mode != ParserMode.FUNCTION and len(self._readings) < _REMEMBERED:
                self._readings[text] = reading
        if reading.rating is None and finish_reason == "length":
            inside = not text.strip() and (reasoning or "").strip()
            return Reading(None, Reason.CUT_OFF, REASONING_CUT_OFF if inside else None)
        return reading

    def _read(self, text: str) -> Reading:
        if self.mode == ParserMode.LENIENT:
            verdict = read_verdict(
                text, lo=self.scale.lo, hi=self.scale.hi, names=self._names, options=self.options
            )
            if verdict.value is None:
                return Reading(None, verdict.reason)
            if not verdict.denominator_ok:
                return Reading(None, Reason.OFF_SCALE)
            return self._on_scale(verdict.value)
        if not text.strip():
            return Reading(None, Reason.REFUSED)
        if self.mode == ParserMode.FUNCTION:
            assert self.function is not None
            return self._value(self.function(text))
        if self.mode == ParserMode.REGEX:
            assert self._regex is not None
            m = self._regex.search(text)
            group = "rating" if "rating" in self._regex.groupindex else 1
            return self._value(None if m is None else m.group(group))
        m = _GEVAL.match(text)
        return self._value(None if m is None else m.group(1))

    def _value(self, value: Any) -> Reading:
        """A value from a regex group or a function: a number, an option label or None."""
        if value is None or isinstance(value, bool):
            return Reading(None, Reason.NO_RATING)
        if isinstance(value, str):
            label = value.strip()
            if label in self.options:
                return Reading(self.options[label], None)
            try:
                value = float(label)
            except ValueError:
                return Reading(None, Reason.NO_RATING)
        if not isinstance(value, int | float) or not math.isfinite(value):
            return Reading(None, Reason.NO_RATING)
        return self._on_scale(float(value))

    def _on_scale(self, value: float) -> Reading:
        point = self.scale.point(value)
        if point is not None:
            return Reading(point, None)
        inside = self.scale.lo <= value <= self.scale.hi
        if not inside or not _integer_steps(self.scale):
            return Reading(None, Reason.OFF_SCALE)
        if self.fractional == Fractional.KEEP:
            return Reading(value, None)
        if self.fractional == Fractional.ROUND:
            return Reading(float(math.floor(value + 0.5)), None)
        return Reading(None, Reason.FRACTIONAL)

    def logprob_distribution(self, top_logprobs: list[dict[str, Any]]) -> RatingDistribution:
        """The first-token distribution: over scale points, or over option tokens."""
        if self.options:
            return distribution_from_option_logprobs(top_logprobs, self.options)
        return distribution_from_logprobs(top_logprobs, self.scale)


def _compile(pattern: str | None) -> re.Pattern[str]:
    if pattern is None:
        raise ConfigError("rating parser mode 'regex' needs a pattern")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"rating pattern {pattern!r} is not a valid regex: {exc}") from exc
    if "rating" not in regex.groupindex and regex.groups != 1:
        raise ConfigError(
            f"rating pattern {pattern!r} needs a group named 'rating' ((?P<rating>...)) or "
            f"exactly one capturing group; it has {regex.groups}"
        )
    return regex
