"""The Responses API's spelling of a judge request, and the one reader of an answer's body.

A study's request is one logical request, spelt as chat completions spell it (the body
:mod:`.requests` builds, whose digest is the cache key): a study is the same study whichever
API carried it. :func:`responses_body` spells that request the way ``POST /v1/responses``
wants it, at the wire: the messages become ``input`` items (a leading system text the
``instructions``), the completion budget ``max_output_tokens`` (reasoning and answer
together), ``reasoning_effort`` a ``reasoning`` object asking for a summary, logprobs mode
``top_logprobs`` with ``include: ["message.output_text.logprobs"]``, and ``store`` false
unless the config says otherwise. It takes no ``n``: one request a draw.

An answer's body is stored as received, in either API's form. :func:`answer_choices` is how
every stage reads it: chat completions' ``choices`` as they are; a Responses answer as the one
choice its ``output`` items make: the ``message`` items' ``output_text`` parts (their text,
and their logprobs when asked) as the content, a ``reasoning`` item's summary beside it as a
thinking model's reasoning (shown, never read as the rating), ``status: "incomplete"`` for
lack of ``max_output_tokens`` as ``finish_reason: "length"``. :func:`read_usage` reads the
tokens either API's ``usage`` reports (prompt and, of it, cached; completion and, of it,
reasoning).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "INCLUDE_LOGPROBS",
    "OPTIONAL_PARAMETERS",
    "UsageTokens",
    "answer_choices",
    "is_response",
    "read_usage",
    "responses_body",
]

# What ``include`` must name for the answer's output_text parts to carry their logprobs
# (``top_logprobs`` alone returns an empty list).
INCLUDE_LOGPROBS = "message.output_text.logprobs"
# What the wire adds of its own accord: no setting asks for it and no rating depends on it, so
# an endpoint that refuses it is sent the request without it (OpenAI refuses reasoning
# summaries to an organization it has not verified: 400 with param "reasoning.summary"; an
# endpoint that knows no prompt cache may refuse prompt_cache_key, study.prompt_cache).
OPTIONAL_PARAMETERS = ("reasoning.summary", "prompt_cache_key")
# The names the completion budget has on chat completions.
_BUDGETS = ("max_tokens", "max_completion_tokens")
# incomplete_details.reason -> the finish_reason a chat choice would carry.
_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}


def responses_body(
    body: Mapping[str, Any], *, store: bool = False, dropped: Collection[str] = ()
) -> dict[str, Any]:
    """The logical (chat-completions) request ``body`` as the Responses API wants it sent;
    ``dropped``: the :data:`OPTIONAL_PARAMETERS` the endpoint refused, left out.

    Settings the Responses API has no name for (``seed``) are sent as they are: the endpoint
    says whether it takes them, and a refusal stops the run naming the key to remove.
    """
    sent: dict[str, Any] = {"model": body["model"]}
    messages = list(body.get("messages") or ())
    if len(messages) > 1 and messages[0].get("role") == "system":
        sent["instructions"] = messages.pop(0).get("content")
    sent["input"] = [{"role": m.get("role"), "content": m.get("content")} for m in messages]
    for name, value in body.items():
        if name in ("model", "messages", "n", "logprobs", "top_logprobs", "reasoning_effort"):
            continue
        if name in _BUDGETS:
            sent["max_output_tokens"] = value
        elif name in ("temperature", "top_p") and value == 1:
            # The API's own default, so the same request; and a reasoning model refuses the
            # parameter itself, whatever its value, at any effort but none.
            continue
        else:
            sent[name] = value  # temperature, top_p, seed
    if body.get("logprobs"):
        sent["top_logprobs"] = body.get("top_logprobs", 0)
        sent["include"] = [INCLUDE_LOGPROBS]
    effort = body.get("reasoning_effort")
    if effort is not None:
        # A summary is what a reasoning model shows of its thinking here: asked for with the
        # effort, stored with the answer, never read as the rating.
        asks = effort != "none" and "reasoning.summary" not in dropped
        sent["reasoning"] = {"effort": effort, "summary": "auto"} if asks else {"effort": effort}
    sent["store"] = store
    return sent


def is_response(parsed: Mapping[str, Any]) -> bool:
    """Whether a parsed answer body is a Responses API response (not a chat completion)."""
    return "choices" not in parsed and (
        parsed.get("object") == "response" or isinstance(parsed.get("output"), list)
    )


def answer_choices(parsed: Any) -> list[dict[str, Any]]:
    """The choices of an answer body in either API's form (see the module's doc); [] when it
    holds none."""
    if not isinstance(parsed, dict):
        return []
    if not is_response(parsed):
        choices = parsed.get("choices")
        return choices if isinstance(choices, list) else []
    return [_response_choice(parsed)]


def _response_choice(parsed: Mapping[str, Any]) -> dict[str, Any]:
    """The one choice a Responses answer makes (one request is one draw)."""
    texts: list[str] = []
    tokens: list[Any] = []
    summaries: list[str] = []
    refusal: str | None = None
    logprobs_given = False
    for item in parsed.get("output") or ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                    given = part.get("logprobs")
                    if isinstance(given, list):
                        logprobs_given = logprobs_given or bool(given)
                        tokens.extend(given)
                elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    refusal = part["refusal"]
        elif kind == "reasoning":
            for part in item.get("summary") or ():
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    summaries.append(part["text"])
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": refusal,
    }
    if summaries:
        message["reasoning"] = "\n\n".join(summaries)
    finish = "stop"
    if parsed.get("status") == "incomplete":
        details = parsed.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        finish = _FINISH.get(reason, "length") if isinstance(reason, str) else "length"
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
    if logprobs_given:
        choice["logprobs"] = {"content": tokens}
    return choice


@dataclass(frozen=True, slots=True)
class UsageTokens:
    """The tokens one answer's usage reports: the prompt's (``cached`` of them read from the
    provider's prompt cache) and the completion's (``reasoning`` of them hidden thinking)."""

    prompt: int
    cached: int
    completion: int
    reasoning: int
    # Whether the usage says how many prompt tokens were cached (0 included): a server that
    # never says is not shown as caching nothing.
    cache_reported: bool = False

    @property
    def total(self) -> int:
        return self.prompt + self.completion


def read_usage(usage: Any) -> UsageTokens | None:
    """The tokens of a ``usage`` object in either API's names (chat completions'
    ``prompt_tokens`` / ``completion_tokens`` and their ``_details``; the Responses API's
    ``input_tokens`` / ``output_tokens`` and theirs); None when it gives no token counts."""
    if not isinstance(usage, dict):
        return None
    if "input_tokens" in usage and "prompt_tokens" not in usage:
        prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
        prompt_details = usage.get("input_tokens_details")
        completion_details = usage.get("output_tokens_details")
    else:
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        prompt_details = usage.get("prompt_tokens_details")
        completion_details = usage.get("completion_tokens_details")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None
    thought = (
        completion_details.get("reasoning_tokens") if isinstance(completion_details, dict) else None
    )
    reported = isinstance(cached, int) and not isinstance(cached, bool)
    return UsageTokens(
        prompt, _part(cached, prompt), completion, _part(thought, completion), reported
    )


def _part(value: Any, whole: int) -> int:
    """A count reported as part of ``whole`` (0 when it is not a count)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return 0
    return min(value, whole)
