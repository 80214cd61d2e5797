"""Reading a judge's verdict: which number (or option) in a free-text answer is the rating.

The default reader works the way a careful person reads a judge's answer:

0. An explicit verdict mark that closes the answer ("Rating: [[8]]", '"Rating: [[9]]".',
   "**Rating: [[7]]**") is the verdict: it outranks every number in the reasoning before it,
   and a mark that names no value on the scale ("[[rating]]", "[[11]]" on 1-10) is no rating.
1. Blank what is never a rating (:mod:`geval_async.scoring.reading.masks`): quoted content, dates,
   years, times, money, references ("Step 2"), list numbering, the scale echoed ("(1-5)").
2. Find the candidates: digits ("4", "4.5"), number words ("four"), "N/M" and "N out of M"
   (M must be the scale's top, else the candidate is off scale), "N stars" / "N-star",
   "[[N]]", "[RESULT] N", and the declared option labels when a criterion has options.
3. Drop hypothetical and comparative mentions ("a perfect score of 5", "not a 5",
   "a score of 1 would mean", "better than 3"), figures of the graded task or answer ("the
   reference answer is 3", "the assistant answers 1") and counts ("15 penalties", "two
   errors", "2 of its 3 sentences").
4. Rank what remains by its cue: a final cue ("Final score", "Overall", "[[N]]", "[RESULT]")
   beats a label ("Score:", "Rating:", "I'd give it", the criterion's own name), which beats
   context ("N/5", "N stars", a number alone on a line), which beats a bare number. Within the
   final and label ranks the last one wins. A labelled verdict in a sentence that concludes
   ("Therefore, I would score it 4 out of 5.") after aspects rated one by one is the rating,
   when it is the last and its sentence names no other value. Below them, two different
   values are :attr:`Reason.AMBIGUOUS`: never a guess; so are numbers in a row ("1, 2, 3").

Pure functions of text; the scale decides only what "N/M" must say and what is off scale.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from ...options import Reason
from .cues import (
    BETWEEN,
    BRACKETS,
    CANDIDATE,
    CITED_FIGURE,
    CLAUSE_END,
    CLOSING_MARK,
    CONCLUSION,
    CONDITIONAL,
    CONTRAST,
    FINAL_CUE,
    FOLLOWERS,
    FOLLOWING_WORD,
    GAP,
    HEDGE_BEFORE,
    HYPOTHETICAL_AFTER,
    HYPOTHETICAL_BEFORE,
    LABEL_CUE,
    MARK_VALUE,
    NUM,
    OR,
    RANGE,
    REFUSAL,
    RESULT,
    SENTENCE_END,
    SHARE_OF,
    STAR_GLYPHS,
    UNITS,
    WORDS,
)
from .masks import blank, mask_markup, mask_non_ratings

__all__ = ["Reason", "Verdict", "read_verdict"]


class Rank(IntEnum):
    BARE = 0
    CONTEXT = 1
    LABEL = 2
    NAMED = 3  # labelled with the criterion's own name: "Coherence: 4", "Coherence Score: 4"
    FINAL = 4


_LONGEST = 8000  # characters of an answer read: its first 2,000 and last 6,000
# A number alone, with at most markup or a full stop around it.
_BARE = re.compile(r"[\s*_#>`'\"(\[]*(\d+(?:\.\d+)?)[\s*_`'\")\].]*")
_SEPARATORS = re.compile(r"[\s,;&+]*")


@dataclass(frozen=True)
class Verdict:
    """What an answer says: a value (a number, or an option's value) or why there is none."""

    value: float | None
    reason: Reason | None = None
    denominator_ok: bool = True


@dataclass(frozen=True)
class _Candidate:
    value: float | None  # None: a range or "3 or 4", which names no single rating
    start: int
    end: int
    rank: Rank
    denominator_ok: bool = True
    hedged: bool = False  # "maybe 4", "3?": an alternative, not a verdict
    concluding: bool = False  # in a sentence that concludes: "Therefore, I would score it 4/5"


def _value(token: str) -> float:
    word = WORDS.get(token.lower())
    return float(word) if word is not None else float(token)


def _clause_before(masked: str, start: int) -> str:
    head = masked[max(0, start - 60) : start]
    ends = list(CLAUSE_END.finditer(head))
    return head[ends[-1].end() :] if ends else head


def _cue_rank(masked: str, start: int, names: re.Pattern[str] | None) -> Rank:
    """The rank the words right before ``start`` give a number."""
    head = masked[max(0, start - 120) : start]
    best = Rank.BARE
    for pattern, rank in ((FINAL_CUE, Rank.FINAL), (names, Rank.NAMED), (LABEL_CUE, Rank.LABEL)):
        if pattern is None or best >= rank:
            continue
        for cue in pattern.finditer(head):
            if GAP.fullmatch(head[cue.end() :]):
                best = rank
                break
    return best


_ALNUM = re.compile(r"[A-Za-z0-9]")
_ALNUM_ON_LINE = re.compile(r"[^\n]*?[A-Za-z0-9]")


def _alone_on_line(masked: str, start: int, end: int) -> bool:
    # Scans outwards only until the first letter or the line's end: long answers stay linear.
    before = masked.rfind("\n", 0, start) + 1
    for i in range(start - 1, before - 1, -1):
        if masked[i].isalnum() and masked[i].isascii():
            return False
    return _ALNUM_ON_LINE.match(masked, end) is None


def _is_count(masked: str, end: int, rank: Rank) -> bool:
    follower = FOLLOWING_WORD.match(masked, end)
    if follower is None:
        return False
    word = follower.group(1)
    if SHARE_OF.match(masked, end):
        return True
    if word in UNITS:
        return rank < Rank.LABEL
    return word not in FOLLOWERS


def _hypothetical(masked: str, start: int, end: int) -> bool:
    head = masked[max(0, start - 200) : start]
    sentences = list(SENTENCE_END.finditer(head))
    sentence = head[sentences[-1].end() :] if sentences else head
    contrasts = list(CONTRAST.finditer(sentence))
    sentence = sentence[contrasts[-1].end() :] if contrasts else sentence
    clause = _clause_before(masked, start)
    return bool(
        HYPOTHETICAL_BEFORE.search(clause)
        or CITED_FIGURE.search(clause)
        or HYPOTHETICAL_AFTER.match(masked, end)
        or CONDITIONAL.search(sentence)
    )


def _hedged(masked: str, start: int, end: int) -> bool:
    return bool(
        HEDGE_BEFORE.search(masked[max(0, start - 20) : start]) or re.match(r"\s*\?", masked[end:])
    )


def _number_candidates(
    masked: str, lo: float, top: float, names: re.Pattern[str] | None
) -> list[_Candidate]:
    found: list[_Candidate] = []
    taken: list[tuple[int, int]] = []
    for m in BRACKETS.finditer(masked):
        if re.fullmatch(NUM, m.group(1), re.IGNORECASE):
            found.append(_Candidate(_value(m.group(1)), m.start(), m.end(), Rank.FINAL))
            taken.append(m.span())
    for m in RESULT.finditer(masked):
        if re.fullmatch(NUM, m.group(1), re.IGNORECASE):
            found.append(_Candidate(_value(m.group(1)), m.start(), m.end(), Rank.FINAL))
            taken.append(m.span())
    masked = blank(masked, taken)
    for m in [*BETWEEN.finditer(masked), *RANGE.finditer(masked)]:
        # A number inside a range is never a single rating: the range is blanked, and when it
        # stands where a rating goes ("I'd give it 3-4") it is a candidate naming no one value.
        taken.append(m.span())
        low, high = _value(m.group(1)), _value(m.group(2))
        if (low, high) == (lo, top) or _hypothetical(masked, m.start(), m.end()):
            continue
        rank = _cue_rank(masked, m.start(), names)
        if rank >= Rank.LABEL or _alone_on_line(masked, m.start(), m.end()):
            found.append(_Candidate(None, m.start(), m.end(), max(rank, Rank.CONTEXT)))
    masked = blank(masked, taken)
    for m in STAR_GLYPHS.finditer(masked):
        stars = sum(1 for c in m.group() if c in "★⭐")
        found.append(_Candidate(float(stars), m.start(), m.end(), Rank.LABEL))
    for m in CANDIDATE.finditer(masked):
        start, end = m.span()
        before = masked[max(0, start - 8) : start]
        if re.search(r"(?:/|\bout\s+of)\s*$", before, re.IGNORECASE):
            continue  # "out of 5" on its own names the top, not a rating
        word = m.group("num").lower() in WORDS
        value = _value(m.group("num")) * (-1 if m.group("sign") else 1)
        rank = _cue_rank(masked, start, names)
        den = m.group("den")
        if m.group("star"):
            rank = max(rank, Rank.LABEL)
        elif den is not None or _alone_on_line(masked, start, end):
            rank = max(rank, Rank.CONTEXT)
        if word and rank == Rank.BARE:
            continue  # "one of the best": a word is a rating only where a rating is expected
        if _hypothetical(masked, start, end):
            continue
        if not m.group("star") and _is_count(masked, end, rank):
            continue
        denominator_ok = den is None or _value(den) == top
        hedged = _hedged(masked, start, end)
        concluding = rank >= Rank.LABEL and _concluding(masked, start)
        found.append(_Candidate(value, start, end, rank, denominator_ok, hedged, concluding))
    return found


def _closing_mark(text: str, hi: float) -> Verdict | None:
    """The verdict of an explicit mark that closes ``text``, or None when no mark closes it.

    MT-Bench's judges reason for a paragraph or more, quoting figures and code full of numbers
    and brackets, then close with "Rating: [[8]]", often quoted or in bold: that mark is the
    verdict, so nothing before it is weighed against it.
    """
    mark = CLOSING_MARK.search(text)
    if mark is None:
        return None
    named = MARK_VALUE.fullmatch(mark.group(1))
    if named is None:
        return Verdict(None, Reason.NO_RATING)  # "[[rating]]": the template, not a rating
    rating = _value(named.group(1))
    line_start = text.rfind("\n", 0, mark.start()) + 1
    for other in BRACKETS.finditer(text, line_start, mark.start()):
        also = MARK_VALUE.fullmatch(other.group(1))
        if also is not None and _value(also.group(1)) != rating:
            return Verdict(None, Reason.AMBIGUOUS)  # "Rating: [[7]] or [[8]]"
    denominator = named.group(2)
    return Verdict(rating, None, denominator is None or _value(denominator) == hi)


def _sentence_start(masked: str, start: int) -> int:
    head = masked[max(0, start - 200) : start]
    ends = list(SENTENCE_END.finditer(head))
    return start - len(head) + (ends[-1].end() if ends else 0)


def _concluding(masked: str, start: int) -> bool:
    """Whether the sentence up to ``start`` opens as a conclusion ("Therefore, ...")."""
    return bool(CONCLUSION.search(masked, _sentence_start(masked, start), start))


def _option_candidates(
    masked: str, options: Mapping[str, float], names: re.Pattern[str] | None
) -> list[_Candidate]:
    found: list[_Candidate] = []
    for label in sorted(options, key=len, reverse=True):
        letter = len(label) == 1
        flags = 0 if letter else re.IGNORECASE
        pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(label)}(?![A-Za-z0-9])", flags)
        for m in pattern.finditer(masked):
            start, end = m.span()
            rank = _cue_rank(masked, start, names)
            if _alone_on_line(masked, start, end):
                rank = max(rank, Rank.CONTEXT)
            if letter:
                boxed = re.match(r"\s*[)\]]", masked[end : end + 10]) or re.search(
                    r"[(\[]\s*$", masked[max(0, start - 10) : start]
                )
                first = not _ALNUM.search(masked, 0, start)
                if boxed or first or OR.search(masked[max(0, start - 10) : start]):
                    rank = max(rank, Rank.CONTEXT)  # "(D)", "D)", or the answer's first word
                follower = FOLLOWING_WORD.match(masked, end)
                word = label in ("A", "I") and follower and follower.group(1) not in FOLLOWERS
                if rank == Rank.BARE or word:
                    continue  # "A good summary": the article, not option A
            if _hypothetical(masked, start, end):
                continue
            hedged = _hedged(masked, start, end)
            found.append(_Candidate(options[label], start, end, rank, hedged=hedged))
        masked = pattern.sub(lambda m: " " * len(m.group()), masked)
    return found


def _choose(found: Sequence[_Candidate], masked: str, lo: float, hi: float) -> Verdict:
    ordered = sorted(found, key=lambda c: c.start)
    firm = [c for c in ordered if not c.hedged]
    chosen = _pick(firm or ordered, masked, lo, hi)
    if isinstance(chosen, Verdict):
        return chosen
    hedges = {c.value for c in ordered if c.hedged}
    alternatives = {
        c.value for c in ordered if c.hedged and OR.search(masked[max(0, c.start - 10) : c.start])
    }
    if (chosen.rank < Rank.LABEL and hedges - {chosen.value}) or alternatives - {chosen.value}:
        return Verdict(None, Reason.AMBIGUOUS)  # "3? Maybe 4.", "C or D"
    return _verdict(chosen)


def _pick(ordered: list[_Candidate], masked: str, lo: float, hi: float) -> _Candidate | Verdict:
    finals = [c for c in ordered if c.rank == Rank.FINAL]
    if finals:
        return finals[-1]  # of several final ratings the last one wins
    cued = [c for c in ordered if c.rank >= Rank.LABEL]
    if cued and cued[-1].concluding and _alone_in_sentence(cued[-1], ordered, masked):
        # Aspects rated one by one, then "Therefore, I would score it 4 out of 5.": the
        # concluding verdict is the rating, when it is the last and names one value.
        return cued[-1]
    named = [c for c in ordered if c.rank == Rank.NAMED]
    if named:
        return named[-1]
    labelled = [c for c in ordered if c.rank == Rank.LABEL]
    if labelled:
        if len({(c.value, c.denominator_ok) for c in labelled}) > 1:
            return Verdict(None, Reason.AMBIGUOUS)  # "Coherence Score: 4 / Fluency Score: 3"
        return labelled[-1]
    first = ordered[0]
    if not _ALNUM.search(masked, 0, first.start) and not _in_sequence(ordered, masked):
        return first  # answer first, then the reasons (as G-Eval reads it)
    last = ordered[-1]
    last_line = masked.rstrip().rfind("\n") + 1
    if last.start >= last_line and _alone_on_line(masked, last.start, last.end):
        return last  # a rating alone on the last line
    for rank in (Rank.CONTEXT, Rank.BARE):
        ranked = [c for c in ordered if c.rank == rank]
        if rank == Rank.BARE and len(ranked) > 1:
            inside = [c for c in ranked if c.value is not None and lo <= c.value <= hi]
            ranked = inside or ranked
        values = {(c.value, c.denominator_ok) for c in ranked}
        if len(values) == 1:
            return ranked[-1]
        if len(values) > 1:
            return Verdict(None, Reason.AMBIGUOUS)
    return Verdict(None, Reason.NO_RATING)


def _alone_in_sentence(chosen: _Candidate, ordered: list[_Candidate], masked: str) -> bool:
    """No other value in ``chosen``'s sentence: "score coherence 4 and fluency 3" concludes
    nothing about one criterion."""
    begin = _sentence_start(masked, chosen.start)
    after = SENTENCE_END.search(masked, chosen.end)
    end = after.start() if after else len(masked)
    return all(c.value == chosen.value for c in ordered if begin <= c.start < end)


def _in_sequence(ordered: list[_Candidate], masked: str) -> bool:
    """The first number is followed by another, with only separators between: "1, 2, 3",
    "1 2" list numbers or candidates, never an answer that opens with its rating."""
    if len(ordered) < 2:
        return False
    between = masked[ordered[0].end : ordered[1].start]
    return bool(_SEPARATORS.fullmatch(between)) and ordered[1].value != ordered[0].value


def _verdict(candidate: _Candidate) -> Verdict:
    if candidate.value is None:
        return Verdict(None, Reason.AMBIGUOUS)
    return Verdict(candidate.value, None, candidate.denominator_ok)


def criterion_names(names: Sequence[str]) -> re.Pattern[str] | None:
    """A pattern matching a criterion's names ("coh", "Coherence") as cue words."""
    usable = sorted({n.strip() for n in names if len(n.strip()) >= 3}, key=len, reverse=True)
    if not usable:
        return None
    return re.compile(r"\b(?:" + "|".join(re.escape(n) for n in usable) + r")\b", re.IGNORECASE)


def read_verdict(
    text: str,
    *,
    lo: float,
    hi: float,
    names: re.Pattern[str] | None = None,
    options: Mapping[str, float] | None = None,
) -> Verdict:
    """The rating a careful reader takes from ``text``, or why there is none.

    Args:
        text: the judge's answer.
        lo, hi: the scale's ends ("N/M" is a rating only when M is ``hi``).
        names: the criterion's names as cue words (:func:`criterion_names`).
        options: option label -> value, when the criterion declares options: the answer is
            read for those labels only.
    """
    if len(text) > _LONGEST:
        # A verdict opens or closes an answer; the middle of a very long one is explanation,
        # and reading it all would cost time for nothing.
        text = text[: _LONGEST // 4] + "\n" + text[-(_LONGEST * 3 // 4) :]
    bare = None if options else _BARE.fullmatch(text)
    if bare is not None:
        return Verdict(float(bare.group(1)))  # "4", " 4.", "**4**": most G-Eval answers
    return _read(text, lo, hi, names, tuple(sorted((options or {}).items())))


# Judges repeat themselves ("4", "Score: 4"): a study's answers are read once per distinct text.
@functools.lru_cache(maxsize=65536)
def _read(
    text: str,
    lo: float,
    hi: float,
    names: re.Pattern[str] | None,
    options: tuple[tuple[str, float], ...],
) -> Verdict:
    if not text.strip():
        return Verdict(None, Reason.REFUSED)
    closing = None if options else _closing_mark(text, hi)
    if closing is not None:
        return closing
    masked = mask_non_ratings(mask_markup(text), years=hi < 1000)
    if options:
        found = _option_candidates(masked, dict(options), names)
    else:
        found = _number_candidates(masked, lo, hi, names)
    if not found:
        return Verdict(None, Reason.REFUSED if REFUSAL.search(text) else Reason.NO_RATING)
    return _choose(found, masked, lo, hi)
