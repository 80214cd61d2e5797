"""Reading a pairwise verdict: which of the two texts shown the judge prefers, or a tie.

Judges write their verdict between two texts in a few ways, all read here:

- MT-Bench's marks: ``[[A]]``, ``[[B]]``, and ``[[C]]`` for a tie;
- Arena-Hard's five levels: ``[[A>>B]]``, ``[[A>B]]``, ``[[A=B]]``, ``[[B>A]]``, ``[[B>>A]]``
  (the strength is kept, the verdict is the side);
- AlpacaEval's ``Output (a)`` / ``Output (b)``;
- a letter or "tie" alone, or after a label ("Verdict: A", "Answer: B", "Winner: tie"), and
  "A is better" / "Text B is better" / "Assistant A is better".

"A" is always the text shown first. The reasoning a thinking model writes first is never read
(:func:`~.thinking.split_reasoning`). When marks disagree, the last one that follows a verdict
cue ("final verdict", "therefore") decides; otherwise the answer is ambiguous. An answer that
says none of these is invalid (:class:`~geval_async.options.Reason`), never a tie: a tie is a
verdict the judge gave. In logprobs mode the verdict token's alternatives give the
probability of A against B (:func:`pair_verdict_from_logprobs`).

Pure functions of text, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...options import Reason
from .cues import REFUSAL
from .distributions import best_logprobs
from .thinking import message_reasoning, split_reasoning

__all__ = [
    "FIRST",
    "SECOND",
    "TIE",
    "PairVerdict",
    "pair_verdict_from_logprobs",
    "read_pair_choice",
    "read_pair_verdict",
]

FIRST = "A"  # the text shown first
SECOND = "B"  # the text shown second
TIE = "tie"


@dataclass(frozen=True)
class PairVerdict:
    """One answer's verdict: ``choice`` is "A" (the text shown first), "B" or "tie"; None when
    the answer gives none, with the ``reason``. ``first_share`` is the preference for the text
    shown first in [0, 1] (1, 0 or 0.5 from text; P(A) / (P(A) + P(B)) from logprobs, a tie's
    probability counted half to each)."""

    choice: str | None
    reason: Reason | None = None
    first_share: float | None = None

    @property
    def valid(self) -> bool:
        return self.choice is not None


_SHARE = {FIRST: 1.0, SECOND: 0.0, TIE: 0.5}


def _verdict(choice: str) -> PairVerdict:
    return PairVerdict(choice, None, _SHARE[choice])


def _invalid(reason: Reason) -> PairVerdict:
    return PairVerdict(None, reason, None)


# [[A]], [[B]], [[C]] (tie), [[tie]], and Arena-Hard's [[A>>B]] ... [[B>>A]], with spaces.
_MARK = re.compile(
    r"\[\[\s*(?:(?P<level>[AB]\s*(?:>>|>|=)\s*[AB])|(?P<letter>[ABC])|(?P<tie>tie))\s*\]\]",
    re.IGNORECASE,
)
_OUTPUT = re.compile(r"\bOutput\s*\(\s*([ab])\s*\)", re.IGNORECASE)
_CUE = re.compile(
    r"(?:final\s+verdict|verdict|therefore|thus|overall|in\s+conclusion|so\s+my)", re.IGNORECASE
)
_NOUN = r"(?:assistant|text|output|response|summary|questionnaire|answer|option|candidate)"
# "Verdict: A", "Answer: **B**", "Winner - tie", "Better: Text A", "Preferred: (A)".
_LABELLED = re.compile(
    r"\b(?:final\s+)?(?:verdict|answer|winner|choice|decision|preference|better|preferred)"
    rf"\s*(?:is)?\s*[:\-–]?\s*[*_\"'`]*\s*(?:{_NOUN}\s+)?\(?(?P<side>[AB]|tie)\)?(?![\w'])",
    re.IGNORECASE,
)
# "A is better", "Text B is better", "Assistant A is the better one", "B wins".
_BETTER = re.compile(
    rf"(?:\b{_NOUN}\s+)?(?<![\w'])\(?(?P<side>[AB])\)?\s+(?:is\s+(?:the\s+)?better|is\s+"
    r"(?:clearly\s+|slightly\s+|much\s+)?(?:better|superior|preferred|stronger)|wins\b)",
)
_TIE_WORDS = re.compile(
    r"^(?:it\s*(?:'s|is)\s+)?(?:a\s+)?tie\b|\bthe\s+result\s+is\s+a\s+tie\b|\bit'?s\s+a\s+tie\b"
    r"|\bequally\s+good\b|\bneither\s+is\s+better\b",
    re.IGNORECASE,
)
_BARE = re.compile(r"^[\s*_\"'`(\[]*(?:" + _NOUN + r"\s+)?(A|B|tie)[\s*_\"'`)\].!]*$", re.I)


def _mark_choice(match: re.Match[str]) -> str:
    level, letter = match.group("level"), match.group("letter")
    if level is not None:
        compact = re.sub(r"\s+", "", level).upper()
        if compact[0] == compact[-1] or "=" in compact:
            return TIE  # [[A=B]] (and a mark that compares a text with itself)
        return compact[0]
    if letter is not None:
        return TIE if letter.upper() == "C" else letter.upper()
    return TIE


def _marks(answer: str) -> str | None | PairVerdict:
    """The verdict the answer's marks give; None when it has none."""
    found = list(_MARK.finditer(answer))
    if not found:
        return None
    choices = [_mark_choice(m) for m in found]
    if len(set(choices)) == 1:
        return choices[0]
    last = found[-1]
    line_start = answer.rfind("\n", 0, last.start()) + 1
    if _CUE.search(answer[max(line_start, last.start() - 80) : last.start()]):
        return choices[-1]  # "My final verdict is: [[A>B]]" after the format was quoted
    return _invalid(Reason.AMBIGUOUS)


def read_pair_choice(answer: str) -> PairVerdict:
    """The verdict in an answer's text (its reasoning already cut off)."""
    text = answer.strip()
    if not text:
        return _invalid(Reason.REFUSED)
    marked = _marks(text)
    if isinstance(marked, PairVerdict):
        return marked
    if marked is not None:
        return _verdict(marked)
    outputs = {m.group(1).upper() for m in _OUTPUT.finditer(text)}
    if len(outputs) == 1:
        return _verdict(outputs.pop())
    if len(outputs) > 1:
        return _invalid(Reason.AMBIGUOUS)
    bare = _BARE.match(text)
    if bare is not None:
        side = bare.group(1)
        return _verdict(TIE if side.lower() == TIE else side.upper())
    sides = [m.group("side") for m in _LABELLED.finditer(text)]
    sides += [m.group("side") for m in _BETTER.finditer(text)]
    named = {TIE if s.lower() == TIE else s.upper() for s in sides}
    if len(named) == 1:
        return _verdict(named.pop())
    if len(named) > 1:
        return _invalid(Reason.AMBIGUOUS)
    if _TIE_WORDS.search(text):
        return _verdict(TIE)
    if REFUSAL.search(text):
        return _invalid(Reason.REFUSED)
    return _invalid(Reason.NO_RATING)


def read_pair_verdict(choice: Mapping[str, Any]) -> PairVerdict:
    """The verdict of one chat choice: its content after any reasoning (a field of its own or
    ``<think>`` tags), or why it has none (cut off by ``max_tokens``, refused, unreadable)."""
    message = choice.get("message") if isinstance(choice, Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    split = split_reasoning(content if isinstance(content, str) else "", message_reasoning(message))
    cut = isinstance(choice, Mapping) and choice.get("finish_reason") == "length"
    if split.unfinished:
        return _invalid(Reason.CUT_OFF)
    verdict = read_pair_choice(split.answer)
    if not verdict.valid and cut:
        return _invalid(Reason.CUT_OFF)
    return verdict


_SPACE_MARKERS = "▁Ġ"


def _token_side(token: str) -> str | None:
    text = token.strip().lstrip(_SPACE_MARKERS).strip().strip("[]()*").strip()
    if text in (FIRST, SECOND):
        return text
    if text == "C" or text.lower() == TIE:
        return TIE
    return None


def pair_verdict_from_logprobs(choice: Mapping[str, Any]) -> PairVerdict:
    """The verdict of a choice asked with logprobs: at the first token (after any reasoning)
    that is a verdict letter, the probabilities of "A", "B" and a tie ("C", "tie") among its
    alternatives; the verdict is the likeliest, ``first_share`` is P(A) + P(tie) / 2 over
    their sum."""
    logprobs = choice.get("logprobs") if isinstance(choice, Mapping) else None
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list):
        return read_pair_verdict(choice)  # no logprobs: the text, as a sample
    tokens = [e.get("token") if isinstance(e, Mapping) else None for e in content]
    split = split_reasoning("".join(t for t in tokens if isinstance(t, str)))
    if split.unfinished:
        return _invalid(Reason.CUT_OFF)
    offset = 0
    for entry, token in zip(content, tokens, strict=True):
        start, offset = offset, offset + (len(token) if isinstance(token, str) else 0)
        if start < split.answer_start or not isinstance(token, str):
            continue
        if _token_side(token) is None:
            continue
        top = entry.get("top_logprobs") if isinstance(entry, Mapping) else None
        best = best_logprobs(top if isinstance(top, list) else [])
        if best is None:
            return _invalid(Reason.BAD_LOGPROBS)
        mass = {FIRST: 0.0, SECOND: 0.0, TIE: 0.0}
        for alternative, logprob in best.items():
            side = _token_side(alternative)
            if side is not None:
                mass[side] += math.exp(logprob)
        total = math.fsum(mass.values())
        if total <= 0.0:
            return _invalid(Reason.NO_RATING)
        share = (mass[FIRST] + mass[TIE] / 2) / total
        top = max(mass.values())
        likeliest = [side for side, p in mass.items() if p == top]
        return PairVerdict(likeliest[0] if len(likeliest) == 1 else TIE, None, share)
    return read_pair_verdict(choice)  # no verdict token: read the text (it may say why)
