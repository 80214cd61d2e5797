"""Evaluation steps: the simulated judge's answer when asked to write G-Eval's steps.

G-Eval first asks the judge, once per criterion, to write the evaluation steps (its "auto
chain of thought") from a task introduction and the criterion's definition. The rule by which
the simulated judge knows such a request: **the last non-empty line of the prompt (all
messages joined) is "Evaluation Steps:"** (any case, surrounding whitespace ignored), as in
G-Eval's generation prompt, which ends where the judge is to write. A form-filling prompt
holds "Evaluation Steps:" too, but followed by the steps and the rating form, so it is rated.

The answer is three to five numbered steps ("1. Read the news article carefully ...\\n2. ..."),
naming the criterion and the scale the prompt gives, drawn deterministically from a hash of
the request like every other answer.
"""

from __future__ import annotations

import re

MARKER = "evaluation steps:"
# "Coherence (1-5) - the collective quality..." or "Coherence: ..." after the criteria header.
_CRITERION = re.compile(
    r"evaluation criteria:?\s*\n\s*\**([A-Za-z][A-Za-z \-]{1,40}?)\**\s*(?:\(|:|-|–)",
    re.IGNORECASE,
)
_SOURCES = ("news article", "source document", "conversation", "source text")


def asks_for_steps(prompt: str) -> bool:
    """Whether the prompt ends with "Evaluation Steps:" (see the module's rule)."""
    lines = [line.strip() for line in prompt.splitlines() if line.strip()]
    return bool(lines) and lines[-1].lower() == MARKER


def _criterion(prompt: str) -> str:
    match = _CRITERION.search(prompt)
    return match.group(1).strip().lower() if match else "the criterion"


def _source(prompt: str) -> str:
    lowered = prompt.lower()
    return next((s for s in _SOURCES if s in lowered), "source text")


_FIRST = (
    "Read the {source} carefully and identify its main topic and key points.",
    "Read the {source} closely and note the facts and the order in which it presents them.",
)
_MIDDLE = (
    "Read the text to be rated and compare it to the {source}: check whether it covers the "
    "main points and presents them in a clear and logical order.",
    "Check the text for {criterion}, sentence by sentence, against the definition given above.",
    "Note every place where the text falls short on {criterion}: a gap, a contradiction, or a "
    "jump that the reader cannot follow.",
    "Judge how well the text as a whole does on {criterion}, not only its best or worst part.",
)
_LAST = (
    "Assign a score for {criterion} on a scale of 1 to {top}, where 1 is the lowest and {top} "
    "is the highest, based on the Evaluation Criteria.",
    "Rate {criterion} from 1 to {top}, using the whole scale: {top} only for a text with no "
    "fault on this criterion.",
)


def write_steps(prompt: str, top: int, units: list[float]) -> str:
    """Numbered evaluation steps for the criterion the prompt defines.

    Args:
        prompt: the request's messages joined.
        top: the top of the criterion's scale.
        units: four uniform numbers drawn from the request's hash.
    """
    names = {"source": _source(prompt), "criterion": _criterion(prompt), "top": top}
    count = 1 + int(units[1] * 3)  # one to three middle steps
    start = int(units[2] * len(_MIDDLE))
    middle = [_MIDDLE[(start + i) % len(_MIDDLE)] for i in range(count)]
    steps = [
        _FIRST[int(units[0] * len(_FIRST))],
        *middle,
        _LAST[int(units[3] * len(_LAST))],
    ]
    return "\n".join(f"{i}. {step.format(**names)}" for i, step in enumerate(steps, 1))
