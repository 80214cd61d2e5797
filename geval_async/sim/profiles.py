"""Model profiles: the dialects of the endpoints a judge is served from (``--profile``).

A profile decides what a request may hold and how an answer carries its reasoning:

- ``default``: an OpenAI chat model (gpt-4o style), the simulated judge as it always was.
- ``openai-reasoning``: OpenAI's gpt-5 and o-series models on chat completions. ``max_tokens``
  is refused (400 ``unsupported_parameter``, use ``max_completion_tokens``); ``temperature`` or
  ``top_p`` other than 1 are refused (400 ``unsupported_value``); ``logprobs`` is forbidden
  (403). ``reasoning_effort`` takes none, minimal, low, medium (the default), high and xhigh
  (the gpt-5.x values too). Hidden reasoning tokens are spent first out of
  ``max_completion_tokens`` and reported in ``usage.completion_tokens_details.reasoning_tokens``
  (and in ``completion_tokens``); a budget they use up leaves content "" with
  ``finish_reason: "length"``, and the usage is still reported (billed).
- ``deepseek-reasoner``: the reasoning in ``message.reasoning_content`` (DeepSeek, vLLM's
  reasoning parser) or ``message.reasoning`` (``reasoning_field``: newer vLLM, OpenRouter),
  the rating in the content; ``logprobs`` is refused (400), as DeepSeek documents.
- ``think-tags``: ``<think>\\n...\\n</think>\\n\\n4`` in the content, as llama.cpp and Ollama
  serve thinking models; some answers use ``<thinking>``; ``think_cut_off`` cuts a share of
  answers off inside their reasoning (``finish_reason: "length"``, no closing tag).
- ``anthropic-compat``: Anthropic's OpenAI-compatible endpoint: ``n`` must be 1 (400);
  ``logprobs``, ``top_logprobs``, ``seed`` and ``reasoning_effort`` are ignored, so every
  call is a fresh sample.
- ``openai-responses``: a model of OpenAI's codex and pro kind, served on the Responses API
  only (:mod:`geval_async.sim.responses`): chat completions answer 404 "This model is only
  supported in v1/responses ..."; on ``/v1/responses`` it reasons as ``openai-reasoning`` does.

Every reasoning text holds numbers that disagree with the rating that follows it ("It's a 1
out of 5 for grammar? No ... maybe 4."), so a test shows a parser does not read it. The
budget (``max_completion_tokens``, else ``max_tokens``) covers reasoning and answer alike.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .settings import SimSettings

DEFAULT = "default"
OPENAI_REASONING = "openai-reasoning"
DEEPSEEK_REASONER = "deepseek-reasoner"
THINK_TAGS = "think-tags"
ANTHROPIC_COMPAT = "anthropic-compat"
OPENAI_RESPONSES = "openai-responses"
PROFILES = (
    DEFAULT,
    OPENAI_REASONING,
    DEEPSEEK_REASONER,
    THINK_TAGS,
    ANTHROPIC_COMPAT,
    OPENAI_RESPONSES,
)
REASONING_FIELDS = ("reasoning_content", "reasoning")
# Hidden reasoning tokens per choice, by reasoning_effort: uniform in [low, high).
EFFORT_TOKENS = {
    "none": (0, 0),
    "minimal": (0, 64),
    "low": (64, 300),
    "medium": (300, 1200),
    "high": (1200, 4000),
    "xhigh": (3000, 8000),
}
DEFAULT_EFFORT = "medium"
LOGPROBS_FORBIDDEN = "You are not allowed to request logprobs from this model"


def check_profile(settings: SimSettings) -> None:
    """Raise ValueError naming the choices when the profile or reasoning field is unknown."""
    if settings.profile not in PROFILES:
        raise ValueError(f"unknown profile {settings.profile!r}; known: {', '.join(PROFILES)}")
    if settings.reasoning_field not in REASONING_FIELDS:
        known = ", ".join(REASONING_FIELDS)
        raise ValueError(f"unknown reasoning field {settings.reasoning_field!r}; known: {known}")


def error_body(message: str, kind: str | None, param: str | None, code: str | None) -> Any:
    """An error in OpenAI's form."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def refusal(body: dict[str, Any], settings: SimSettings) -> tuple[int, Any] | None:
    """The status and error body with which the profile's endpoint refuses a valid request."""
    profile = settings.profile
    if profile == OPENAI_REASONING:
        return _openai_reasoning_refusal(body)
    if profile == DEEPSEEK_REASONER and (body.get("logprobs") or "top_logprobs" in body):
        message = "deepseek-reasoner does not support the parameter 'logprobs'. (sim)"
        return 400, error_body(message, "invalid_request_error", "logprobs", None)
    if profile == ANTHROPIC_COMPAT and (body.get("n") or 1) != 1:
        # Anthropic documents n as "Must be exactly 1"; its errors keep OpenAI's form.
        message = f"n: Only n=1 is supported, but got {body.get('n')}. (sim)"
        return 400, error_body(message, "invalid_request_error", "n", None)
    return None


def _openai_reasoning_refusal(body: dict[str, Any]) -> tuple[int, Any] | None:
    if "max_tokens" in body:
        message = (
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead."
        )
        return 400, error_body(
            message, "invalid_request_error", "max_tokens", "unsupported_parameter"
        )
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and value != 1:
            message = (
                f"Unsupported value: '{name}' does not support {json.dumps(value)} with this "
                "model. Only the default (1) value is supported."
            )
            return 400, error_body(message, "invalid_request_error", name, "unsupported_value")
    if body.get("logprobs") or "top_logprobs" in body:
        return 403, error_body(LOGPROBS_FORBIDDEN, "invalid_request_error", None, None)
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in EFFORT_TOKENS:
        listed = ", ".join(f"'{e}'" for e in EFFORT_TOKENS)
        message = f"Invalid value: {json.dumps(effort)}. Supported values are: {listed}."
        return 400, error_body(
            message, "invalid_request_error", "reasoning_effort", "invalid_value"
        )
    return None


def ignores_logprobs(settings: SimSettings) -> bool:
    return settings.profile == ANTHROPIC_COMPAT


def fresh_samples(settings: SimSettings) -> bool:
    """Whether every call is a new sample (seed ignored, or n ignored as llama.cpp does)."""
    return settings.ignore_n or settings.profile == ANTHROPIC_COMPAT


# -- reasoning -----------------------------------------------------------------------------

# Every number in a reasoning text but the scale's top differs from the rating it ends with,
# and the first number is always a rating it considers and drops.
_REASONING = (
    "Let me evaluate the text. It's a {a} out of {top} for grammar? No, the sentences are "
    "fine. Maybe {b}. There are {c} small slips in the middle, so I settle on my rating.",
    "At first I'd say {a}. The criterion asks for a score from 1 to {top}; looking again at "
    "the key points, perhaps {b}/{top}. Let me decide.",
    "Score: {a}? The text covers {c} of the main points but misses one. Rating {b} seems off "
    "too. Weighing it once more, I will answer now.",
)
_YES_NO_REASONING = (
    "Does it? At first I'd answer {a}. It covers most of the facts; then again, {b}... "
    "Let me decide.",
)


def reasoning_text(rating: int | None, top: int, yes_no: bool, units: list[float]) -> str:
    """Reasoning whose numbers disagree with ``rating`` (the rating it concludes with)."""
    others = [r for r in range(1, top + 1) if r != rating] or [1]
    a = others[int(units[0] * len(others))]
    b = others[int(units[1] * len(others))]
    c = others[int(units[3] * len(others))]
    if yes_no:
        word = {1: "No", 2: "Yes"}
        form = _YES_NO_REASONING[int(units[2] * len(_YES_NO_REASONING))]
        return form.format(a=word.get(a, "No"), b=word.get(b, "No").lower())
    form = _REASONING[int(units[2] * len(_REASONING))]
    return form.format(a=a, b=b, c=c, top=top)


def thinking_tokens(
    settings: SimSettings, rating: int | None, top: int, yes_no: bool, units: list[float]
) -> list[str]:
    """think-tags in logprobs mode: the tokens before the rating token ("<think>", the
    reasoning word by word, "</think>", "\n\n"); none for other profiles. The rating token's
    alternatives then come after the reasoning, as a llama.cpp server gives them."""
    if settings.profile != THINK_TAGS:
        return []
    words = reasoning_text(rating, top, yes_no, units).split(" ")
    return ["<think>", "\n", words[0], *(" " + w for w in words[1:]), "\n", "</think>", "\n\n"]


@dataclass
class Shaped:
    """One choice's message as the profile's endpoint writes it, and the tokens it took."""

    message: dict[str, Any]
    completion_tokens: int
    reasoning_tokens: int
    cut: bool
    # False when the budget ran out inside the reasoning: the answer never began, so the
    # choice gives no rating however its reasoning leaned.
    answered: bool = True


def _visible(text: str, budget: int | None) -> tuple[str, int, bool]:
    shown = text[: None if budget is None else budget * 4]
    return shown, max(1, math.ceil(len(shown) / 4)), len(shown) < len(text)


def shape(
    answer: str,
    reasoning: str,
    body: dict[str, Any],
    settings: SimSettings,
    units: list[float],
) -> Shaped:
    """The message of a choice whose answer is ``answer``, reasoning first where the profile
    reasons; ``units`` are four uniform numbers of the choice, drawn apart from its rating."""
    budget = body.get("max_completion_tokens", body.get("max_tokens"))
    message: dict[str, Any] = {"role": "assistant", "content": "", "refusal": None}
    profile = settings.profile
    if profile in (OPENAI_REASONING, OPENAI_RESPONSES):
        low, high = EFFORT_TOKENS[str(body.get("reasoning_effort") or DEFAULT_EFFORT)]
        spent = low + int(units[0] * (high - low))
        if budget is not None and spent >= budget:
            return Shaped(message, budget, budget, True, answered=False)
        text, used, cut = _visible(answer, None if budget is None else budget - spent)
        message["content"] = text
        return Shaped(message, spent + used, spent, cut)
    if profile == DEEPSEEK_REASONER:
        thought = math.ceil(len(reasoning) / 4)
        if budget is not None and thought >= budget:
            message[settings.reasoning_field] = reasoning[: budget * 4]
            return Shaped(message, budget, budget, True, answered=False)
        message[settings.reasoning_field] = reasoning
        text, used, cut = _visible(answer, None if budget is None else budget - thought)
        message["content"] = text
        return Shaped(message, thought + used, thought, cut)
    if profile == THINK_TAGS:
        tag = "thinking" if units[1] < 0.25 else "think"
        if units[2] < settings.think_cut_off:
            text = f"<{tag}>\n{reasoning[: len(reasoning) // 2]}"
            message["content"] = text
            return Shaped(message, math.ceil(len(text) / 4), 0, True, answered=False)
        text, used, cut = _visible(f"<{tag}>\n{reasoning}\n</{tag}>\n\n{answer}", budget)
        message["content"] = text
        return Shaped(message, used, 0, cut)
    text, used, cut = _visible(answer, budget)
    message["content"] = text
    return Shaped(message, used, 0, cut)
