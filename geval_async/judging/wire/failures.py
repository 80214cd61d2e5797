"""What a failed judge request means: the one place that decides retry, refuse or stop.

The transport turns whatever went wrong into a :class:`FailureFact`: the HTTP status, the
error code, type and message of an OpenAI-style body, the kind of connection failure (refused,
unknown host, TLS, reset, timeout, truncated body), the headers, and what the body says about
``n`` or the request's size. :func:`decide` maps a fact, plus what the run has seen so far
(:class:`History`), to a :class:`Decision`: pause every worker and retry, retry with backoff,
retry asking for one choice, store a refusal, give the request up, or stop the whole run.
Nothing downstream reads the words of an error message.

A connection failure that no retry will fix (refused, unknown host, TLS) stops the run when it
keeps happening before the endpoint has answered once: a wrong base URL costs seconds, not the
whole retry budget of every request. Once the endpoint has answered, the same failures are a
server restarting and are retried like a 5xx.

A 429 asking for a wait above ``[limits] max_wait`` stops the run, saying when to resume (a
day-long wait is not a pause to sit out), and so do 429s to one request ``max(retries,
MIN_RATE_LIMITED)`` times in a row. A redirect stops it naming the ``Location``, and so does
a web page in place of an answer (a 200 of ``text/html``: a proxy's or a site's page).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from ...errors import ANSWER_TOO_LARGE, UNREACHABLE, WEB_PAGE, Connection, FailureFact
from ...study.responses_api import OPTIONAL_PARAMETERS
from .refused_settings import (
    REASONING_EXHAUSTED,
    reasoning_exhausted,
    refused_setting,
    sent_token_parameter,
    study_sampling,
)
from .server_waits import asked_wait

__all__ = [
    "Action",
    "Connection",
    "Decision",
    "FailureFact",
    "History",
    "decide",
    "describe",
    "response_fact",
]

# Before the endpoint has answered once, this many connection failures of a kind no retry
# fixes stop the run (a few, so that one dropped packet does not).
UNREACHABLE_AFTER = 3
UNREACHABLE_PAUSE = 0.5
# A request that keeps getting 429s is waiting, not failing; but not forever: after
# max(retries, MIN_RATE_LIMITED) 429s in a row for one request the run stops.
MIN_RATE_LIMITED = 8

_REFUSES_N = re.compile(
    r"""field\s+['"`]?n['"`]?\b|['"`]n['"`]\s+(must|should|is)|\bn\s+must\b|only one completion"""
    r"""|\bcompletion choices?\b|\bn\s*(>|must be)\s*1\b""",
    re.IGNORECASE,
)


# Answers that say the URL is no chat-completions endpoint: Method Not Allowed, Not
# Implemented, HTTP Version Not Supported.
_NOT_AN_ENDPOINT = (405, 501, 505)
_UNREACHABLE = UNREACHABLE
_REDIRECTS = (301, 302, 303, 307, 308)


class Action(enum.StrEnum):
    """What to do about a failure."""

    PAUSE = "pause"  # 429: every worker waits, then the request is sent again
    BACKOFF = "backoff"  # transient: this request is sent again after a growing delay
    ONE_CHOICE = "one choice"  # the server refuses n > 1: ask for one choice per request
    REFUSE = "refuse"  # the server refused this request for good: store the refusal
    GIVE_UP = "give up"  # out of retries: the item stays missing until the next run
    STOP = "stop"  # no retry can help any request: stop the run
    # The endpoint wants the completion budget under the other name: send it again at once
    # with max_tokens spelt the other way (max_tokens <-> max_completion_tokens).
    TOKEN_PARAMETER = "token parameter"
    KEEP = "keep"  # an answer that used its whole budget: stored as received (cut_off)
    # The model is served on the Responses API only: send it again at once there, and every
    # request after it (the endpoint's learned fact, kept for later runs).
    RESPONSES_API = "responses api"
    # A parameter the wire adds of its own accord (a reasoning summary) is refused: send the
    # request again at once without it, and every request after it.
    DROP_PARAMETER = "parameter dropped"


@dataclass
class History:
    """What a run has seen, for decisions that depend on more than one attempt."""

    url: str
    key_env: str
    judge: str = "[judge]"  # the table that sets the judge (EvalConfig.judge_entry)
    sampling: Callable[[str], str] = study_sampling  # a key's table (EvalConfig.sampling_entry)
    retries: int = 1 << 30  # transient retries allowed per request
    answered: bool = False  # the endpoint has sent a complete HTTP answer this run
    unreachable: int = 0  # connection failures no retry fixes, while nothing has answered
    # An answer with content arrived this run: a reasoning model's budget can suffice.
    content_seen: bool = False
    token_switches: int = 0  # times this run changed the token parameter's name
    max_wait: float = math.inf  # the longest wait a server may ask for ([limits] max_wait)

    def saw(self, fact: FailureFact) -> None:
        """Count what a failed attempt tells of the endpoint, before :func:`decide` reads it:
        any HTTP answer shows it is reachable; a connection that no retry fixes, while
        nothing has answered, is one more sign that the URL is wrong."""
        if fact.status is not None:
            self.answered = True
        elif not self.answered and (fact.connection or Connection.RESET) in _UNREACHABLE:
            self.unreachable += 1


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` says to do, and the line a user reads when it is not a retry."""

    action: Action
    label: str
    message: str = ""
    wait: float | None = None  # seconds to wait (None: back off by the attempt count)
    # Whether the attempt may have been billed: not a 429, not a refused n, nor a request
    # no server received (the run gives a budget its estimate back when False).
    billed: bool = True


_UNRECOGNIZED = re.compile(r"Unrecognized request arguments? supplied: ([A-Za-z_][\w.]*)")


def response_fact(status: int, raw: bytes, headers: Mapping[str, str]) -> FailureFact:
    """The fact of an HTTP answer that is not a usable 200."""
    code, kind, message = error_fields(raw)
    asked = asked_wait(headers, kind) if status == 429 else None
    wait, wait_header = (None, "") if asked is None else asked
    # Azure OpenAI names a parameter it does not know in words only: "Unrecognized request
    # argument supplied: prompt_cache_key" (no code, no param).
    param = error_param(raw) or (
        unknown.group(1) if status == 400 and (unknown := _UNRECOGNIZED.search(message)) else ""
    )
    lowered = message.lower()
    return FailureFact(
        status=status,
        code=code,
        type=kind,
        param=param,
        message=message,
        headers=dict(headers),
        retry_after=wait,
        wait_header=wait_header,
        # The body's param says it (Anthropic's OpenAI-compatible endpoint: param "n", no
        # code); llama-server's words are read only where no field does.
        refuses_n=status in (400, 422, 500) and (param == "n" or bool(_REFUSES_N.search(message))),
        too_large=status == 429 and "request too large" in message.lower(),
        quota_exhausted=status == 429 and "insufficient_quota" in (code, kind),
        # No field says these two; OpenAI's words: 403 "You are not allowed to request
        # logprobs from this model", 404 "This model is only supported in v1/responses and not
        # in v1/chat/completions."
        refuses_logprobs=status in (400, 403, 422) and "logprobs" in lowered and not code,
        responses_only=status in (400, 404) and "v1/responses" in lowered,
    )


def error_param(raw: bytes) -> str:
    """The ``param`` of an OpenAI-style error body ("" when it has none)."""
    try:
        error = orjson.loads(raw).get("error")
    except (orjson.JSONDecodeError, AttributeError):
        return ""
    param = error.get("param") if isinstance(error, dict) else None
    return param if isinstance(param, str) else ""


def error_fields(raw: bytes) -> tuple[str, str, str]:
    """(code, type, message) of an OpenAI-style error body; the raw text as the message else."""
    try:
        error = orjson.loads(raw).get("error") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return "", "", raw[:200].decode("utf-8", "replace")
    if not isinstance(error, dict):
        return "", "", str(error)[:200]
    return (
        str(error.get("code") or ""),
        str(error.get("type") or ""),
        str(error.get("message") or "")[:300],
    )


def describe(fact: FailureFact) -> str:
    """The failure in a few words: "HTTP 400 unsupported_value: Unsupported value: ...",
    "timeout"."""
    if fact.status is None:
        return str(fact.connection or Connection.RESET)
    status = fact.status
    detail = f"HTTP {status}" + (f" {fact.code}" if fact.code and fact.code != str(status) else "")
    return detail + (f": {fact.message}" if fact.message else "")


def decide(
    fact: FailureFact,
    history: History | None = None,
    *,
    n: int = 1,
    attempt: int = 1,
    sent: Mapping[str, Any] | None = None,
    responses: bool = False,
) -> Decision:
    """What a failed attempt means; reads ``history`` and never changes it (the caller
    records the attempt with :meth:`History.saw` first).

    Args:
        fact: what went wrong.
        history: what the run has seen (None: judge the fact alone).
        n: the choices the request asked for.
        attempt: how many times this request has failed this way (transient or 429).
        sent: the body as sent (its messages unread): a refused setting is named with the
            value the request carried.
        responses: the request went to the Responses API (not chat completions).
    """
    if fact.responses_only and not responses:
        # Not billed (a 404), and no other request could pass there: the API changes.
        return Decision(Action.RESPONSES_API, "responses api", describe(fact), billed=False)
    if fact.status in (400, 422) and fact.param in OPTIONAL_PARAMETERS:
        label = f"{fact.param} refused"
        return Decision(Action.DROP_PARAMETER, label, describe(fact), billed=False)
    decision = _decide(fact, history, n=n, attempt=attempt, sent=sent or {})
    unbilled = (Action.PAUSE, Action.ONE_CHOICE, Action.TOKEN_PARAMETER)
    if decision.action in unbilled or not fact.reached_server:
        return replace(decision, billed=False)
    return decision


def _decide(
    fact: FailureFact,
    history: History | None,
    *,
    n: int,
    attempt: int,
    sent: Mapping[str, Any],
) -> Decision:
    label = fact.label
    url = history.url if history is not None else "the judge URL"
    if fact.status is None:
        connection = fact.connection or Connection.RESET
        if history is not None and not history.answered and connection in _UNREACHABLE:
            if history.unreachable >= UNREACHABLE_AFTER:
                return Decision(Action.STOP, label, _unreachable(connection, url))
            # A short pause: the next attempt only has to confirm the URL is wrong.
            return Decision(Action.BACKOFF, label, label, wait=UNREACHABLE_PAUSE)
        return _backoff(label, history, attempt)
    status = fact.status
    detail = describe(fact)
    if status in _REDIRECTS:
        location = {k.lower(): v for k, v in fact.headers.items()}.get("location", "")
        return Decision(
            Action.STOP,
            label,
            f"the judge URL {url} redirects (HTTP {status} to {location or 'no Location'}): "
            "set base_url to the address it points to (a redirected POST is not followed)",
        )
    if status == 200:
        if fact.code == ANSWER_TOO_LARGE:
            # The same request would get the same flood again: a refusal is stored (with no
            # body), and --retry-failed asks again, after raising max_answer_bytes.
            return Decision(
                Action.REFUSE,
                label,
                "the answer body is larger than [limits] max_answer_bytes: not stored; raise "
                "it and run with --retry-failed if such answers are expected",
            )
        if fact.code == "content_filter":
            return Decision(Action.REFUSE, label, "the answer was withheld by the content filter")
        if fact.code == WEB_PAGE:
            # A site's or a proxy's page: every request gets the same, so no retry can help.
            return Decision(
                Action.STOP,
                label,
                f"the judge URL {url} answers with a web page (HTTP 200, text/html), not a "
                "chat-completions answer: check base_url (it should end in /v1 for most servers)",
            )
        if fact.code == REASONING_EXHAUSTED:
            if history is not None and history.content_seen:
                # Other answers fit the budget: this one is a cut-off answer, scored as such.
                return Decision(Action.KEEP, label)
            entry = history.sampling if history is not None else study_sampling
            return Decision(Action.STOP, label, reasoning_exhausted(sent, entry))
        return _backoff(label, history, attempt)
    token = sent_token_parameter(fact, sent)
    if token is not None:
        if history is not None and history.token_switches >= 2:
            return Decision(
                Action.STOP, label, f"the judge refuses max_tokens in every spelling ({detail})"
            )
        return Decision(Action.TOKEN_PARAMETER, "token parameter", detail)
    if n > 1 and fact.refuses_n:
        return Decision(Action.ONE_CHOICE, "n refused", detail)
    refused = refused_setting(fact, sent, *((history.judge, history.sampling) if history else ()))
    if refused is not None:
        return Decision(Action.STOP, label, refused)
    if status == 429:
        if fact.quota_exhausted:
            return Decision(
                Action.STOP,
                label,
                "the judge API says the quota is exhausted (insufficient_quota): add credit or "
                "raise the limit on your account, then run the same command again to resume",
            )
        if fact.too_large:
            # Bigger than the whole per-minute budget: no wait will ever let it through.
            return Decision(
                Action.REFUSE,
                label,
                f"{detail} (raise the account's TPM limit or shorten the prompt)",
            )
        wait = fact.retry_after
        if history is not None and wait is not None and wait > history.max_wait:
            return Decision(Action.STOP, label, too_long_a_wait(wait, fact.wait_header, history))
        bound = MIN_RATE_LIMITED if history is None else max(history.retries, MIN_RATE_LIMITED)
        if attempt > bound:
            return Decision(
                Action.STOP,
                label,
                f"the server answered 429 to the same request {attempt} times in a row "
                f"({fact.wait_header or 'no wait asked'}): the account's limit is lower than "
                "this pace; set [limits] rpm / tpm, or resume later with the same command",
            )
        return Decision(Action.PAUSE, label, _pause_reason(fact), wait=wait)
    if status in (401, 403):
        key_env = history.key_env if history is not None else "the API key variable"
        return Decision(
            Action.STOP,
            label,
            f"the judge refused the API key ({detail}): check ${key_env}, then run again",
        )
    if status == 404:
        return Decision(
            Action.STOP,
            label,
            f"the judge URL or model was not found ({detail}) at {url}: "
            "check base_url / model (or azure_endpoint / deployment / api_version)",
        )
    if status in _NOT_AN_ENDPOINT:
        # A server that is there but takes no chat-completions POST at this URL (a web
        # server, a proxy's landing page): every request would get the same answer, so it
        # is neither a refusal of this request to store nor a 5xx to wait out.
        return Decision(
            Action.STOP,
            label,
            f"the server at {url} does not take chat-completions requests ({detail}): "
            "check base_url (it should end in /v1 for most servers)",
        )
    if status in (408, 409, 425) or status >= 500:
        return _backoff(label, history, attempt, detail)
    # 400 (invalid request, context too long, content filter), 413, 422 and other 4xx.
    return Decision(Action.REFUSE, label, detail)


def _pause_reason(fact: FailureFact) -> str:
    """What the progress line says of a 429 pause: "429, Retry-After 30"."""
    return "429" + (f", {fact.wait_header.replace(': ', ' ', 1)}" if fact.wait_header else "")


def too_long_a_wait(seconds: float, header: str, history: History) -> str:
    """The line of a 429 asking for a wait above ``max_wait``: the wait, and when to resume."""
    asked = f"({header})" if header else ""
    try:
        resume = datetime.now(UTC) + timedelta(seconds=seconds)
        when = f"resume after {resume:%Y-%m-%d %H:%M} UTC"
    except OverflowError:
        when = "the server gives no time anyone can wait for; check the endpoint"
    return (
        f"the server asks to wait {_span(seconds)} {asked}, more than [limits] max_wait "
        f"({history.max_wait:g} s): {when}"
    )


def _span(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds > 1e12:
        return "forever"
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size * (2 if unit == "days" else 1):
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _backoff(label: str, history: History | None, attempt: int, detail: str = "") -> Decision:
    if history is not None and attempt > history.retries:
        return Decision(Action.GIVE_UP, label, f"{detail or label} (after {attempt} attempts)")
    return Decision(Action.BACKOFF, label, detail or label)


def _unreachable(connection: Connection, url: str) -> str:
    check = {
        Connection.REFUSED: "is the server running on that host and port?",
        Connection.DNS: "is the host name spelt right, and is there a network?",
        Connection.TLS: "does the server speak https (or should the URL be http://)?",
    }[connection]
    return (
        f"cannot reach the judge at {url} ({connection} on every attempt): check base_url "
        f"(or --base-url): {check}"
    )
