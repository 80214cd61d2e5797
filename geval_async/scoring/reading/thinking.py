"""A judge's thinking and its answer: the rating is read from what follows the reasoning.

Reasoning models think before they answer, and servers hand the thinking over in one of two
ways: in a field of its own (``message.reasoning_content`` from DeepSeek and vLLM,
``message.reasoning`` from OpenRouter), or at the start of the content, between
``<think>``/``</think>`` (or ``<thinking>``/``</thinking>``) tags, as llama.cpp, Ollama or
vLLM without a reasoning parser serve thinking models. Some chat templates put the opening tag
in the prompt, so the content holds only the closing ``</think>``. The reasoning is full of
numbers ("is it a 1 out of 5? No.") that are never the rating: :func:`split_reasoning` cuts it
off, and the rating parser reads only the answer after it. An answer whose reasoning never
ends (an opening tag without its closing one) was cut off inside its reasoning.

Pure functions of text, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["REASONING_CUT_OFF", "ReasonedAnswer", "message_reasoning", "split_reasoning"]

REASONING_CUT_OFF = "cut off inside its reasoning"
_OPENING = re.compile(r"\s*<(?:think|thinking)>", re.IGNORECASE)
_CLOSING = re.compile(r"</(?:think|thinking)>", re.IGNORECASE)
# The fields servers put a message's reasoning in, the first one present wins.
_REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass(frozen=True)
class ReasonedAnswer:
    """One judge answer split into its reasoning and the answer that follows it.

    Attributes:
        reasoning: the thinking (from the message's reasoning field and/or the content's tags),
            "" when there is none.
        answer: the text after the reasoning, where the rating is; "" when the reasoning
            never ended.
        answer_start: where ``answer`` begins in the content.
        unfinished: the reasoning was opened and never closed: the answer was cut off inside
            its reasoning.
    """

    reasoning: str
    answer: str
    answer_start: int = 0
    unfinished: bool = False


def split_reasoning(content: str, reasoning: str | None = None) -> ReasonedAnswer:
    """Split a judge's content (and its message's reasoning field) into reasoning and answer.

    Args:
        content: ``message.content`` as sent.
        reasoning: the message's reasoning field (:func:`message_reasoning`), if any.

    Returns:
        The reasoning (field and tags joined) and the answer after a leading ``<think>…</think>``
        or ``<thinking>…</thinking>`` block (leading whitespace allowed), or after a lone
        closing tag; the whole content is the answer when it holds no tag.
    """
    thought = reasoning.strip() if isinstance(reasoning, str) else ""
    if not isinstance(content, str):
        content = ""
    opening = _OPENING.match(content)
    if opening is not None:
        closing = _CLOSING.search(content, opening.end())  # "<thinking>…</think>" ends too
        if closing is None:
            tagged = content[opening.end() :].strip()
            return ReasonedAnswer(_joined(thought, tagged), "", len(content), unfinished=True)
        tagged = content[opening.end() : closing.start()].strip()
        return ReasonedAnswer(_joined(thought, tagged), content[closing.end() :], closing.end())
    closing = _CLOSING.search(content)
    if closing is not None:  # the opening tag was in the prompt's chat template
        tagged = content[: closing.start()].strip()
        return ReasonedAnswer(_joined(thought, tagged), content[closing.end() :], closing.end())
    return ReasonedAnswer(thought, content)


def _joined(field: str, tagged: str) -> str:
    return "\n".join(part for part in (field, tagged) if part)


def message_reasoning(message: Mapping[str, Any] | Any) -> str | None:
    """The reasoning a chat message carries in a field of its own, or None."""
    if not isinstance(message, Mapping):
        return None
    for name in _REASONING_FIELDS:
        value = message.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return None
