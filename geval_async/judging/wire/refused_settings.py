"""Settings every request gets wrong: what the endpoint's answer says, and the line to fix it.

An OpenAI-style endpoint refuses a setting with a 400 whose body names it in fields::

    {"error": {"message": "Unsupported value: 'temperature' does not support 0.7 with this
     model. Only the default (1) value is supported.", "type": "invalid_request_error",
     "param": "temperature", "code": "unsupported_value"}}

No item could pass with that setting, so :func:`~.failures.decide` stops the run at the first
such answer, with the line :func:`refused_setting` writes, naming the config key to change;
nothing is stored for the items. The one refusal the wire can mend alone is the token budget's
name (``max_tokens`` where the endpoint wants ``max_completion_tokens``, :func:`sent_token_
parameter`). The facts come from the body's ``code`` and ``param``; the words are read only where
no field says it (OpenAI's 403 for logprobs, the Responses-only 404) and for the default a
refusal suggests ("Only the default (1) value is supported").

A reasoning model that spends the whole ``max_tokens`` on reasoning answers 200 with empty
content, ``finish_reason: "length"`` and ``usage.completion_tokens_details.reasoning_tokens``:
:func:`answer_fact` makes that a fact, and the run stops with :func:`reasoning_exhausted`'s line
while no answer of the run has had content.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ...errors import FailureFact
from ...study.responses_api import read_usage

__all__ = [
    "REASONING_EXHAUSTED",
    "TOKEN_PARAMETERS",
    "answer_fact",
    "ignored_logprobs",
    "reasoning_exhausted",
    "reasoning_tokens",
    "refused_setting",
    "sent_token_parameter",
    "study_sampling",
    "unusable_choice",
]

# The fact's code of a 200 whose every choice is empty, cut off by max_tokens while reasoning.
REASONING_EXHAUSTED = "reasoning_exhausted"
# The two spellings of the completion budget; [sampling] max_tokens is sent under one of them.
TOKEN_PARAMETERS = ("max_tokens", "max_completion_tokens")

# A body's parameter -> the [sampling] key that sets it.
_SETTING = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_tokens",
    "max_completion_tokens": "max_tokens",
    "n": "n",
    "seed": "seed",
    "logprobs": "mode",
    "top_logprobs": "mode",
    "reasoning_effort": "reasoning_effort",
    # The Responses API's names of the same settings.
    "max_output_tokens": "max_tokens",
    "include": "mode",
    "reasoning": "reasoning_effort",
    "reasoning.effort": "reasoning_effort",
}
# Codes of a refusal that every request carrying the setting gets (the Responses API answers
# a name it does not know with unknown_parameter, a budget under its minimum of 16 with
# integer_below_min_value).
_UNSUPPORTED = (
    "unsupported_parameter",
    "unsupported_value",
    "unknown_parameter",
    "integer_below_min_value",
    "integer_above_max_value",
)
_DEFAULT = re.compile(r"\bdefault \(([^()]{1,20})\)")


def study_sampling(key: str) -> str:
    """Where a one-judge study sets its sampling keys: ``[sampling]``. The messages below take
    a panel judge's :meth:`~geval_async.study.settings.EvalConfig.sampling_entry` in its place,
    which names that judge's own ``[judges.sampling]`` for the keys it sets."""
    return "[sampling]"


def sent_token_parameter(fact: FailureFact, sent: Mapping[str, Any]) -> str | None:
    """The other spelling of the token budget, when the answer refuses the one that was sent
    (400 ``unsupported_parameter`` with ``param: max_tokens``); None otherwise."""
    if fact.status not in (400, 422) or fact.code != "unsupported_parameter":
        return None
    if fact.param not in TOKEN_PARAMETERS or fact.param not in sent:
        return None
    return TOKEN_PARAMETERS[1 - TOKEN_PARAMETERS.index(fact.param)]


def refused_setting(
    fact: FailureFact,
    sent: Mapping[str, Any],
    judge: str = "[judge]",
    sampling: Callable[[str], str] = study_sampling,
) -> str | None:
    """The line that stops a run whose every request carries a setting the endpoint refuses,
    or None when the failure is particular to one request; ``judge``: the table that sets
    the judge (a panel judge's ``[[judges]] name = "gpt"``, :attr:`EvalConfig.judge_entry`);
    ``sampling``: the table that sets a sampling key (:func:`study_sampling`)."""
    model = sent.get("model", "the judge model")
    if fact.responses_only:
        return (
            f"model {model!r} is served on the Responses API only, not on chat completions "
            f"(HTTP {fact.status}: {fact.message}): set {judge} model to a chat-completions model"
        )
    logprobs = bool(sent.get("logprobs"))
    if logprobs and (fact.refuses_logprobs or fact.param in ("logprobs", "top_logprobs")):
        reason = fact.code or f"HTTP {fact.status}"
        return (
            f'{sampling("mode")} mode = "logprobs" is refused by {model} ({reason}: '
            f"{fact.message}): "
            'set mode = "samples" (G-Eval\'s logprobs mode needs a model that returns logprobs)'
        )
    if fact.status not in (400, 403, 404, 422) or fact.code not in _UNSUPPORTED:
        return None
    reason = f"{fact.code}: {_reason(fact.message)}"
    key = _SETTING.get(fact.param)
    if key is None:
        return (
            f"{model} refuses the requests' {fact.param or 'parameters'} ({reason}): no setting "
            f"of geval-async sends it; check {judge} base_url and model"
        )
    value = '"logprobs"' if key == "mode" else _toml(_sent_value(sent, fact.param))
    return f"{sampling(key)} {key} = {value} is refused by {model} ({reason}): {_advice(key, fact)}"


def _advice(key: str, fact: FailureFact) -> str:
    default = _DEFAULT.search(fact.message)
    if key in ("temperature", "top_p"):
        return f"set {key} = {default.group(1)}" if default else f"remove {key} (the default)"
    if key == "mode":
        return 'set mode = "samples"'
    if key == "seed":
        return "remove seed"
    if key == "n":
        return "set n = 1"
    return f"set {key} to a value the model accepts" + (
        " (or remove it)" if key == "reasoning_effort" else ""
    )


def _reason(message: str) -> str:
    """The sentence of a refusal that says what is allowed ("only the default (1) value is
    supported"), or the whole message."""
    sentences = [s.strip() for s in message.rstrip(". ").split(". ") if s.strip()]
    last = sentences[-1] if sentences else message
    return last[:1].lower() + last[1:] if len(sentences) > 1 else message


def _sent_value(sent: Mapping[str, Any], param: str) -> Any:
    """The value the request carried for ``param``, a dotted name reaching into an object
    ("reasoning.effort")."""
    value: Any = sent
    for part in param.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _toml(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def reasoning_tokens(parsed: Mapping[str, Any]) -> int:
    """The reasoning tokens an answer's usage reports, in either API's names (0 when absent)."""
    tokens = read_usage(parsed.get("usage"))
    return 0 if tokens is None else tokens.reasoning


def answer_fact(parsed: Mapping[str, Any]) -> FailureFact | None:
    """The fact of a 200 whose every choice is empty because reasoning used all of
    max_tokens (None for any other answer)."""
    choices = parsed.get("choices") or []
    for choice in choices:
        content = choice.get("message", {}).get("content")
        if choice.get("finish_reason") != "length" or (isinstance(content, str) and content):
            return None
    if not choices or reasoning_tokens(parsed) <= 0:
        return None
    return FailureFact(status=200, code=REASONING_EXHAUSTED)


def ignored_logprobs(
    sent: Mapping[str, Any], sampling: Callable[[str], str] = study_sampling
) -> str:
    """The line that stops a logprobs-mode run whose answer came without logprobs: the endpoint
    ignores them (Anthropic's OpenAI-compatible one does), so no answer could be scored;
    ``sampling``: the table that sets a sampling key (:func:`study_sampling`)."""
    model = sent.get("model", "the judge model")
    return (
        f'{sampling("mode")} mode = "logprobs": {model} answered without logprobs (the endpoint '
        'ignores them): set mode = "samples" (G-Eval\'s logprobs mode needs a model that returns '
        "logprobs)"
    )


def unusable_choice(choice: Mapping[str, Any], *, logprobs: bool) -> str | None:
    """Why a choice holds nothing to read a rating from ("content null", "empty content",
    "no logprobs"), or None when it holds text (whether it is a rating is the scoring's call)."""
    content = choice.get("message", {}).get("content")
    if content is None:
        return "content null"
    if not isinstance(content, str) or not content or content.isspace():  # not a .strip() copy
        return "empty content"
    if logprobs:
        tokens = (choice.get("logprobs") or {}).get("content")
        if not isinstance(tokens, list) or not tokens:
            return "no logprobs"
    return None


def reasoning_exhausted(
    sent: Mapping[str, Any], sampling: Callable[[str], str] = study_sampling
) -> str:
    """The line that stops a run whose first answers were all reasoning and no rating;
    ``sampling``: the table that sets a sampling key (:func:`study_sampling`)."""
    budget = next((sent[p] for p in (*TOKEN_PARAMETERS, "max_output_tokens") if p in sent), None)
    spent = f"max_tokens ({budget})" if budget is not None else "max_tokens"
    effort = sampling("reasoning_effort")
    effort = "" if effort == sampling("max_tokens") else f"{effort} "  # named where it differs
    return (
        f"the judge spent all of {spent} on reasoning and gave no rating: raise "
        f"{sampling('max_tokens')} max_tokens (for example to 2000) or lower "
        f"{effort}reasoning_effort"
    )
