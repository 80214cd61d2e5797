"""The simulated judge's Responses API: ``POST /v1/responses`` in OpenAI's shapes.

A request is checked as OpenAI checks it (an unknown parameter such as ``n`` is refused with
``unknown_parameter``: the API takes one request a draw; ``max_output_tokens`` under 16 with
``integer_below_min_value``), then judged as the chat completion of its one choice would be
(:func:`chat_request` spells it so), and the answer is written back as a ``response`` object
(:func:`response_object`): a ``reasoning`` item (its ``summary`` when one was asked for) where
the model reasoned, a ``message`` item whose ``output_text`` part holds the answer (and its
``logprobs`` when ``include`` names ``message.output_text.logprobs``; an empty list otherwise),
``status: "incomplete"`` with ``incomplete_details.reason: "max_output_tokens"`` when the budget
ran out, and the usage under the Responses API's names. Every call samples anew, as OpenAI's
endpoint does: the draws of an item are identical requests.

The ``openai-responses`` profile is a model of OpenAI's codex and pro kind: a reasoning model
(hidden reasoning spent out of ``max_output_tokens`` by ``reasoning.effort``; ``temperature``,
``top_p`` and ``top_logprobs`` refused except at effort ``none``) that chat completions refuse
with OpenAI's 404. ``SimSettings.responses_only`` names models chat completions refuse so under
any profile; ``SimSettings.refuse_summary`` refuses ``reasoning.summary`` as OpenAI does to an
organization it has not verified.
"""

from __future__ import annotations

import time
from typing import Any

from .profiles import EFFORT_TOKENS, OPENAI_REASONING, OPENAI_RESPONSES, error_body
from .settings import SimSettings

__all__ = [
    "INCLUDE_LOGPROBS",
    "RESPONSES_ONLY_MESSAGE",
    "chat_refusal",
    "chat_request",
    "response_object",
]

INCLUDE_LOGPROBS = "message.output_text.logprobs"
# OpenAI's words, as its 404 to chat completions says them for a Responses-only model.
RESPONSES_ONLY_MESSAGE = (
    "This model is only supported in v1/responses and not in v1/chat/completions."
)
# OpenAI's words to an organization it has not verified, when a reasoning summary is asked.
UNVERIFIED_MESSAGE = (
    "Your organization must be verified to generate reasoning summaries. Please go to: "
    "https://platform.openai.com/settings/organization/general and click on Verify "
    "Organization. If you just verified, it can take up to 15 minutes for access to propagate."
)
MIN_OUTPUT_TOKENS = 16
# What a create-response body may hold (the rest is an unknown parameter to OpenAI).
PARAMETERS = frozenset(
    {
        "background",
        "conversation",
        "include",
        "input",
        "instructions",
        "max_output_tokens",
        "max_tool_calls",
        "metadata",
        "model",
        "parallel_tool_calls",
        "previous_response_id",
        "prompt",
        "prompt_cache_key",
        "reasoning",
        "safety_identifier",
        "service_tier",
        "store",
        "stream",
        "temperature",
        "text",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "truncation",
        "user",
    }
)
_REASONING_PROFILES = (OPENAI_REASONING, OPENAI_RESPONSES)


def chat_refusal(body: Any, settings: SimSettings) -> tuple[int, Any] | None:
    """OpenAI's 404 to a chat-completions request for a model served on Responses only."""
    if not isinstance(body, dict):
        return None
    model = body.get("model")
    named = {m.strip() for m in (settings.responses_only or "").split(",") if m.strip()}
    if settings.profile == OPENAI_RESPONSES or model in named:
        return 404, error_body(RESPONSES_ONLY_MESSAGE, "invalid_request_error", "model", None)
    return None


def _invalid(message: str, param: str | None, code: str | None) -> tuple[int, Any]:
    return 400, error_body(message, "invalid_request_error", param, code)


def chat_request(body: Any, settings: SimSettings) -> tuple[dict[str, Any] | None, Any]:
    """The chat-completions body that judges a Responses request as its one choice, or None
    and the (status, error body) OpenAI would refuse it with."""
    if not isinstance(body, dict):
        return None, _invalid("We could not parse the JSON body of your request. (sim)", None, None)
    for name in body:
        if name not in PARAMETERS:
            return None, _invalid(f"Unknown parameter: '{name}'.", name, "unknown_parameter")
    if "input" not in body:
        return None, _invalid(
            "Missing required parameter: 'input'.", "input", "missing_required_parameter"
        )
    budget = body.get("max_output_tokens")
    if isinstance(budget, int) and budget < MIN_OUTPUT_TOKENS:
        return None, _invalid(
            "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
            f"{MIN_OUTPUT_TOKENS}, but got {budget} instead.",
            "max_output_tokens",
            "integer_below_min_value",
        )
    reasoning = body.get("reasoning") or {}
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    if effort is not None and effort not in EFFORT_TOKENS:
        listed = ", ".join(f"'{e}'" for e in EFFORT_TOKENS)
        return None, _invalid(
            f"Invalid value: '{effort}'. Supported values are: {listed}.",
            "reasoning.effort",
            "invalid_value",
        )
    if settings.refuse_summary and isinstance(reasoning, dict) and reasoning.get("summary"):
        return None, _invalid(UNVERIFIED_MESSAGE, "reasoning.summary", "unsupported_value")
    if settings.profile in _REASONING_PROFILES and effort != "none":
        for name in ("temperature", "top_p", "top_logprobs"):
            if name in body:
                return None, _invalid(
                    f"Unsupported parameter: '{name}' is not supported with this model.",
                    name,
                    "unsupported_parameter",
                )
    messages = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    given = body["input"]
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict):
            messages.append({"role": item.get("role", "user"), "content": _text(item)})
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages, "n": 1}
    if budget is not None:
        chat["max_completion_tokens"] = budget
    for name in ("temperature", "top_p"):
        if name in body:
            chat[name] = body[name]
    if INCLUDE_LOGPROBS in (body.get("include") or ()):
        chat["logprobs"] = True
        chat["top_logprobs"] = body.get("top_logprobs") or 0
    if effort is not None:
        chat["reasoning_effort"] = effort
    return chat, None


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else ()
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict))


def response_object(
    chat_answer: dict[str, Any], request: dict[str, Any], thoughts: list[str]
) -> dict[str, Any]:
    """The ``response`` object OpenAI writes for the chat completion ``chat_answer`` of the
    Responses request ``request`` (its one choice); ``thoughts``: the choice's reasoning."""
    choice = chat_answer["choices"][0]
    message = choice["message"]
    usage = chat_answer["usage"]
    ident = chat_answer["id"].rsplit("-", 1)[-1]
    asked_reasoning = request.get("reasoning")
    reasoning: dict[str, Any] = asked_reasoning if isinstance(asked_reasoning, dict) else {}
    details = usage.get("completion_tokens_details") or {}
    thought_tokens = details.get("reasoning_tokens", 0)
    thought = (thoughts[0] if thoughts else "") or message.get("reasoning_content") or ""
    output: list[dict[str, Any]] = []
    if thought_tokens or thought:
        summary = []
        if reasoning.get("summary") and thought:
            summary = [{"type": "summary_text", "text": thought}]
        output.append({"id": f"rs_{ident}", "type": "reasoning", "summary": summary})
    cut = choice["finish_reason"] == "length"
    content = message.get("content")
    if isinstance(content, str) and content:
        logprobs = choice.get("logprobs")
        tokens = logprobs.get("content") if isinstance(logprobs, dict) else None
        output.append(
            {
                "id": f"msg_{ident}",
                "type": "message",
                "status": "incomplete" if cut else "completed",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "annotations": [],
                        "logprobs": tokens if isinstance(tokens, list) else [],
                        "text": content,
                    }
                ],
            }
        )
    prompt, completion = usage["prompt_tokens"], usage["completion_tokens"]
    return {
        "id": f"resp_{ident}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "background": False,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": chat_answer["model"],
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "prompt_cache_key": request.get("prompt_cache_key"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "safety_identifier": None,
        "service_tier": "default",
        "store": request.get("store", True),
        "temperature": request.get("temperature", 1.0),
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_logprobs": request.get("top_logprobs", 0),
        "top_p": request.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {
                "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
            },
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": thought_tokens},
            "total_tokens": prompt + completion,
        },
        "user": None,
        "metadata": {},
    }
