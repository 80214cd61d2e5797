"""Spans of a judge's answer that are never its rating, blanked before ratings are looked for.

Judges quote the text they rate and explain themselves with numbers: "the car was found on
April 1", "Euro 2016", "scored 15 penalties", "$4 million", "at 3:15 pm", "1. Accuracy: 5/5",
"on a scale of 1 to 5". Each function here replaces such spans with spaces, so positions in the
answer stay the same and the reader in :mod:`geval_async.scoring.reading.verdicts` sees only
numbers that
may be ratings. Pure functions of text, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["blank", "mask_markup", "mask_non_ratings"]

_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_DATES = [
    re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?:,?\s*\d{{4}})?"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}(?:\s+\d{{4}})?"),
    re.compile(r"\b\d{1,4}[/.-]\d{1,2}[/.-]\d{2,4}\b"),  # 2016-04-01, 01/04/2016
]
_YEARS = re.compile(r"(?<![\d.])(?:1[5-9]|20)\d{2}(?![\d.]\d)|'\d{2}s?\b")
_TIMES = re.compile(
    r"\b\d{1,2}:\d{2}(?:\s*[ap]\.?m\.?)?|\b\d{1,2}\s*(?:[ap]\.m\.|[ap]m\b|o'clock)", re.IGNORECASE
)
_MONEY = re.compile(
    r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:million|billion|bn|m|k|thousand)\b)?"
    r"|\b\d[\d,]*(?:\.\d+)?\s?(?:%|percent\b|per\s+cent\b|(?:dollars?|euros?|pounds?|cents?|pence"
    r"|usd|eur|gbp|yen)\b)",
    re.IGNORECASE,
)
# A capitalised name or a reference word right before a number: "Windows 10", "Apollo 11",
# "Step 2", "paragraph 3", "No. 4", "#1" are labels of things, not ratings.
_REFERENCES = re.compile(
    r"(?:\b(?:step|paragraph|sentence|line|section|chapter|question|item|page|part|version|"
    r"number|no\.|article|document|summary|example|claim|fact|point|issue|error|rule|"
    r"criterion|level|grade\s+level|class|room|seat|week|day|round|game|match|season|episode|"
    r"figure|table|row|column|verse|act|scene|phase|stage)|#)\s*\d+(?:\.\d+)?\b"
    # "score this summary 5/5": a number out of the scale's top is a rating, not a label.
    r"(?!\s*(?:/\s*\d|out\s+of\b))",
    re.IGNORECASE,
)
# Double-quoted content with at least one letter: words the judge cites from the text it rates.
_QUOTES = re.compile(r'"[^"\n]*"|“[^”]*”|«[^»]*»')
_LETTER = re.compile(r"[A-Za-z]")
# The scale itself, echoed from the prompt: "(1-5)", "1 to 5", "from 1 to 10", "between 1 and 5".
_SCALE_ECHO = re.compile(
    r"\(\s*\d+\s*(?:-|–|—|to)\s*\d+\s*\)"
    r"|\bscale\s+(?:of|from)?\s*\d+\s*(?:-|–|—|to)\s*\d+"
    r"|\b(?:from|between)\s+\d+\s*(?:-|–|—|to|and)\s*\d+(?!\s*(?:/|out\s+of))"
    r"|\b\d+\s*(?:to)\s*\d+\s*(?:scale|range)\b",
    re.IGNORECASE,
)
# Numbered list items ("1. Accuracy", "2) Clarity"), at the start of a line or after a colon.
_LIST_ITEM = re.compile(r"(?:^|(?<=[:\n])|(?<=:\s))[ \t]*(?:[-*•][ \t]*)?(\d{1,2})[.)](?=[ \t]+\S)")
# A lone list item that rates an aspect: "1. Accuracy: 4/5", "1) The summary is accurate: 4".
_RATED_ITEM = re.compile(
    r"^[ \t]*(?:[-*•][ \t]*)?(\d{1,2})[.)][ \t]+[A-Za-z][^\n:]{0,60}:"
    r"(?=[^\n]*?\d\s*(?:/|out\s+of\b)\s*\d|[ \t]*\d+(?:\.\d+)?[ \t]*$)",
    re.IGNORECASE | re.MULTILINE,
)
_MARK = re.compile(r"\[\[[^\[\]\n]{1,40}\]\]")
_INLINE_ENUM = re.compile(r"(?<![\w)])\(\d{1,2}\)(?=\s+[A-Za-z])")
_MARKUP = re.compile(r"\*+|`+|^#+|__+|~~", re.MULTILINE)
# A fenced code block: the code a judge quotes from the answer it grades ("```python ... ```").
_CODE_BLOCK = re.compile(
    r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<tag>[^\s`]*)[^\n]*\n"
    r"(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
# Blocks of data or plain words, which a judge writes its verdict in, not code it quotes.
_NOT_CODE = frozenset({"json", "jsonc", "yaml", "yml", "toml", "text", "txt", "plaintext", "md",
                       "markdown"})  # fmt: skip


def blank(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with each (start, end) span replaced by spaces (newlines kept)."""
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


def mask_markup(text: str) -> str:
    """Markdown emphasis, code ticks and heading marks blanked: "**Coherence: 2**" reads plain.

    Fenced code blocks are blanked whole: ``print(a[1])`` or an interpreter's output ``[1]`` in code
    the judge quotes is never its rating. A block of data or words (tagged ``json``, ``yaml``,
    ``toml``, ``text`` or ``markdown``, or opening with ``{``) and a block that is the whole
    answer are the judge's own words and stay.
    """
    return blank(text, [*_code_blocks(text), *_spans(_MARKUP, text)])


def _code_blocks(text: str) -> list[tuple[int, int]]:
    spans = []
    for m in _CODE_BLOCK.finditer(text):
        words = m.group("tag").lower() in _NOT_CODE or m.group("body").lstrip().startswith("{")
        whole = not text[: m.start()].strip() and not text[m.end() :].strip()
        if not words and not whole:
            spans.append(m.span())
    return spans


def _list_numbers(text: str) -> list[tuple[int, int]]:
    """The numbers of a numbered list, when the text holds one (items 1 and 2 at least)."""
    items = [(m.span(1), int(m.group(1))) for m in _LIST_ITEM.finditer(text)]
    numbers = {n for _, n in items}
    if not {1, 2} <= numbers:
        return []
    return [span for span, _ in items]


def _outside_marks(start: int, quote: str) -> list[tuple[int, int]]:
    """The spans of a quote at ``start`` that lie outside its ``[[N]]`` verdict marks."""
    spans, begin = [], start
    for mark in _MARK.finditer(quote):
        spans.append((begin, start + mark.start()))
        begin = start + mark.end()
    return [*spans, (begin, start + len(quote))]


def mask_non_ratings(text: str, *, years: bool = True) -> str:
    """Blank quoted content, dates, years, times, money, references, list numbers, scale echoes.

    Args:
        text: the answer (markup already blanked).
        years: blank four-digit years too (off for scales that reach 1000).
    """
    # A quote with no letter in it ('"4"') is a rating written in quotes, not cited content; a
    # verdict mark inside quotes ('"Rating: [[8]]".') is the judge's own verdict, never cited.
    spans = [
        span
        for m in _QUOTES.finditer(text)
        if _LETTER.search(m.group())
        for span in _outside_marks(m.start(), m.group())
    ]
    for pattern in (*_DATES, _TIMES, _MONEY, _REFERENCES, _SCALE_ECHO, _INLINE_ENUM):
        spans += _spans(pattern, text)
    if years:
        spans += _spans(_YEARS, text)
    spans += _list_numbers(text)
    spans += [m.span(1) for m in _RATED_ITEM.finditer(text)]
    return blank(text, spans)
