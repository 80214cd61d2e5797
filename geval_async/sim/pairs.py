"""The simulated judge comparing two texts: a pairwise verdict with a known preference and a
position bias set by a flag.

A prompt that shows two texts between MT-Bench's markers ("[The Start of Assistant A's
Answer]" ... "[The End of Assistant A's Answer]", any noun in place of "Assistant ... Answer")
is answered with a verdict: A (the text shown first), B, or a tie. Each text has a strength: the
one ``pair_strengths`` (a JSON file of text -> strength) gives it, else one drawn from the
text itself, so that both orders of a pair see the same two strengths. The text shown first
wins with the Bradley-Terry probability ``1 / (1 + exp(s_second - s_first))``; a share
``pair_ties`` of verdicts are ties; and ``position_bias`` makes the first text win that much
more often than half of its verdicts (a share ``2 x position_bias`` of the verdicts go to the
first text whatever it is: with both orders asked, the first text then wins 0.5 +
position_bias of them). The verdict is written the ways judges write one (``[[A]]``,
``[[A>B]]``, ``Output (a)``, "Verdict: A"); with ``logprobs`` the verdict letter's token
carries the probabilities of A, B and a tie ("C").
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

__all__ = ["PAIR_FORMS", "pair_choice", "pair_texts", "text_digest", "verdict_tokens"]

_BLOCK = (
    r"\[The Start of [^\]\n]*?\b{side}\b[^\]\n]*\]\s*(.*?)\s*"
    r"\[The End of [^\]\n]*?\b{side}\b[^\]\n]*\]"
)
_FIRST = re.compile(_BLOCK.format(side="A"), re.DOTALL)
_SECOND = re.compile(_BLOCK.format(side="B"), re.DOTALL)
# How judges write a verdict: {X} is A or B, {x} the same in lower case, {level} Arena-Hard's
# mark. Each form with the part of it that holds the verdict (an answer cut off by max_tokens
# before that part ends gives none).
PAIR_FORMS = (
    ("[[{X}]]", "[[{X}]]"),
    ("My final verdict is: [[{X}]].", "[[{X}]]"),
    ("{level}", "{level}"),
    ("Output ({x})", "Output ({x})"),
    ("Verdict: {X}", "Verdict: {X}"),
    ("{X}", "{X}"),
)
TIE_FORMS = (
    ("[[C]]", "[[C]]"),
    ("My final verdict is tie: [[A=B]].", "[[A=B]]"),
    ("tie", "tie"),
    ("Verdict: tie", "Verdict: tie"),
)
INVALID_VERDICT = "I cannot decide which of the two texts is better."


def text_digest(text: str) -> str:
    """The sha256 of a text as compared (surrounding whitespace stripped)."""
    return hashlib.sha256(text.strip().encode()).hexdigest()


def pair_texts(prompt: str) -> tuple[str, str] | None:
    """The texts shown first and second, or None when the prompt compares no two texts."""
    first, second = _FIRST.search(prompt), _SECOND.search(prompt)
    if first is None or second is None:
        return None
    return first.group(1).strip(), second.group(1).strip()


@functools.cache
def _strength_file(path: str) -> dict[str, float]:
    table = json.loads(Path(path).read_text(encoding="utf-8"))
    return {text_digest(text): float(value) for text, value in table.items()}


def strength(text: str, path: str, seed: int, unit: Any) -> float:
    """A text's strength: from the ``pair_strengths`` file, else drawn from the text."""
    if path:
        known = _strength_file(path).get(text_digest(text))
        if known is not None:
            return known
    return 2.0 * unit(seed, "strength", text.strip())[0]


def pair_choice(
    texts: tuple[str, str],
    units: list[float],
    extra: list[float],
    settings: Any,
    unit: Any,
    invalid: bool,
) -> tuple[str | None, str, str, float, float]:
    """One choice's verdict ("A", "B", "tie"; None when invalid), the text it writes, the
    part of that text that holds the verdict, and the probabilities of A and of a tie it was
    drawn from."""
    s_first = strength(texts[0], settings.pair_strengths, settings.seed, unit)
    s_second = strength(texts[1], settings.pair_strengths, settings.seed, unit)
    biased = min(1.0, 2.0 * settings.position_bias)
    first_wins = 1.0 / (1.0 + math.exp(s_second - s_first))
    ties = settings.pair_ties * (1.0 - biased)
    p_first = biased + (1.0 - biased) * (1.0 - settings.pair_ties) * first_wins
    if invalid:
        return None, INVALID_VERDICT, INVALID_VERDICT, p_first, ties
    if units[0] < biased:
        verdict = "A"
    elif units[1] < settings.pair_ties:
        verdict = "tie"
    else:
        verdict = "A" if extra[0] < first_wins else "B"
    if verdict == "tie":
        text, core = TIE_FORMS[int(units[3] * len(TIE_FORMS))]
        return verdict, text, core, p_first, ties
    form, core = PAIR_FORMS[int(units[3] * len(PAIR_FORMS))]
    other = "B" if verdict == "A" else "A"
    level = f"[[{verdict}>>{other}]]" if extra[1] < 0.5 else f"[[{verdict}>{other}]]"
    names = {"X": verdict, "x": verdict.lower(), "level": level}
    return verdict, form.format(**names), core.format(**names), p_first, ties


def verdict_tokens(p_first: float, ties: float, k: int) -> tuple[str, list[dict[str, Any]]]:
    """The tokens of a verdict given with logprobs ("[[", the letter, "]]"), greedy, the
    letter's alternatives A, B and C (a tie) with their probabilities."""
    probs = {"A": p_first, "B": max(1.0 - p_first - ties, 0.0), "C": ties}
    ranked = sorted(((p, t) for t, p in probs.items() if p > 0), key=lambda pt: (-pt[0], pt[1]))
    letter = ranked[0][1]

    def token(text: str, logprob: float) -> dict[str, Any]:
        return {"token": text, "logprob": logprob, "bytes": list(text.encode())}

    middle = token(letter, math.log(ranked[0][0]))
    middle["top_logprobs"] = [token(t, math.log(p)) for p, t in ranked[:k]]
    opening = {**token("[[", -0.001), "top_logprobs": [token("[[", -0.001)][:k]}
    closing = {**token("]]", -0.001), "top_logprobs": [token("]]", -0.001)][:k]}
    return letter, [opening, middle, closing]
