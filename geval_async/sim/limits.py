"""What the simulated judge server refuses or breaks, and the errors it answers then.

Requests are checked the way OpenAI checks them: malformed bodies, prompts beyond the
context window and filtered content are refused with 400.

OpenAI meters an organisation with two continuously refilling token buckets, one counting
requests and one counting tokens, where a request costs its prompt tokens plus
``max_tokens * n`` before it has produced anything. A request that does not fit is answered
429 without being charged, with ``retry-after-ms`` saying when it would fit, and every answer
reports the state of both buckets in ``x-ratelimit-*`` headers. This module reproduces that,
plus the random latency and the faults (5xx, resets, stalls, ...) a real endpoint shows.
The buckets follow the settings on every call, so a test may change ``rpm`` mid-run.
Error bodies are always in OpenAI's form ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import math
import random
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from .settings import SimSettings

# Fault name -> the SimSettings attribute holding its fraction. Checked in this order
# against one uniform draw, so the fractions simply add up.
FAULTS = {
    "500": "error_500",
    "503": "error_503",
    "reset": "reset",
    "stall": "stall",
    "truncated": "truncated",
    "429": "spurious_429",
}
QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. (simulated)"
)
SERVER_ERRORS = {
    "500": "The server had an error while processing your request. (simulated)",
    "503": "The engine is currently overloaded, please try again later. (simulated)",
}


def draw_fault(settings: SimSettings, rng: random.Random) -> str | None:
    """Pick at most one fault for a request, each with the probability ``settings`` gives."""
    u = rng.random()
    for name, attribute in FAULTS.items():
        u -= getattr(settings, attribute)
        if u < 0:
            return name
    return None


def draw_latency(median_ms: float, sigma: float, rng: random.Random) -> float:
    """Seconds to wait: lognormal around ``median_ms``, constant when ``sigma`` is 0."""
    if median_ms <= 0:
        return 0.0
    if sigma <= 0:
        return median_ms / 1000
    return median_ms / 1000 * math.exp(rng.gauss(0.0, sigma))


def format_duration(seconds: float) -> str:
    """A duration the way OpenAI's reset headers spell it: "120ms", "1s", "6m0s", "1m30.5s"."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{max(1, math.ceil(seconds * 1000))}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{round(secs, 3):.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{int(minutes)}m{text}"
    return text


@dataclass
class TokenBucket:
    """A bucket of ``capacity`` units refilled continuously at ``rate`` units per second."""

    rate: float
    capacity: float
    level: float
    stamp: float

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, cost: float) -> float:
        """Seconds until ``cost`` units are there; infinite when it can never fit."""
        if cost > self.capacity:
            return math.inf
        return max(0.0, (cost - self.level) / self.rate)

    def until_full(self) -> float:
        return (self.capacity - self.level) / self.rate


@dataclass
class Verdict:
    """The limiter's answer: ``refused`` is None (go ahead), "requests" or "tokens"."""

    refused: str | None
    retry_after: float
    message: str = ""


class RateLimiter:
    """The requests and tokens buckets of one simulated organisation."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}

    def _bucket(
        self, kind: str, per_minute: int | None, bucket_seconds: float
    ) -> TokenBucket | None:
        if not per_minute:
            self._buckets.pop(kind, None)
            return None
        rate, capacity = per_minute / 60, per_minute * bucket_seconds / 60
        now = self._clock()
        bucket = self._buckets.get(kind)
        if bucket is None:
            bucket = self._buckets[kind] = TokenBucket(rate, capacity, capacity, now)
        elif (bucket.rate, bucket.capacity) != (rate, capacity):
            # A resized bucket keeps what it held, so lowering a limit mid-run bites at once.
            bucket.refill(now)
            bucket.rate, bucket.capacity = rate, capacity
            bucket.level = min(bucket.level, capacity)
        bucket.refill(now)
        return bucket

    def admit(
        self, rpm: int | None, tpm: int | None, bucket_seconds: float, tokens: int
    ) -> Verdict:
        """Charge one request of ``tokens`` tokens, or refuse it without charging anything."""
        costs = {"requests": 1, "tokens": tokens}
        buckets = {
            "requests": self._bucket("requests", rpm, bucket_seconds),
            "tokens": self._bucket("tokens", tpm, bucket_seconds),
        }
        limits = {"requests": rpm, "tokens": tpm}
        for kind, bucket in buckets.items():
            wait = 0.0 if bucket is None else bucket.wait_for(costs[kind])
            if math.isinf(wait):
                message = (
                    f"Request too large for sim-judge on {kind} per min: Limit {limits[kind]}, "
                    f"Requested {costs[kind]}. (sim)"
                )
            elif wait > 0:
                message = (
                    f"Rate limit reached for {kind} per min: Limit {limits[kind]}, Requested "
                    f"{costs[kind]}. Please try again in {format_duration(wait)}. (sim)"
                )
            else:
                continue
            return Verdict(kind, wait, message)
        for kind, bucket in buckets.items():
            if bucket is not None:
                bucket.level -= costs[kind]
        return Verdict(None, 0.0)

    def headers(self, rpm: int | None, tpm: int | None, bucket_seconds: float) -> dict[str, str]:
        """The ``x-ratelimit-*`` headers for the limits that are set, as OpenAI sends them."""
        headers = {}
        for kind, per_minute in (("requests", rpm), ("tokens", tpm)):
            bucket = self._bucket(kind, per_minute, bucket_seconds)
            if bucket is None:
                continue
            headers[f"x-ratelimit-limit-{kind}"] = str(per_minute)
            headers[f"x-ratelimit-remaining-{kind}"] = str(max(0, math.floor(bucket.level)))
            headers[f"x-ratelimit-reset-{kind}"] = format_duration(bucket.until_full())
        return headers


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Roughly what a tokenizer counts: four characters a token, four tokens per message."""
    return sum(math.ceil(len(message_text(m)) / 4) + 4 for m in messages)


def validate(body: Any, context_window: int, filter_marker: str) -> tuple[str, str | None] | None:
    """What is wrong with a chat-completions request (message and error code), or None."""
    problem = _malformed(body)
    if problem is not None:
        return problem, None
    prompt = prompt_tokens(body["messages"])
    if prompt > context_window:
        return (
            f"This model's maximum context length is {context_window} tokens. "
            f"However, your messages resulted in {prompt} tokens. (sim)",
            "context_length_exceeded",
        )
    if any(filter_marker in message_text(m) for m in body["messages"]):
        return (
            "The response was filtered due to the prompt triggering the content management"
            " policy. (sim)",
            "content_filter",
        )
    return None


def _malformed(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "We could not parse the JSON body of your request. (sim)"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' is a required property and must be a non-empty array. (sim)"
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return "Each message must be an object with a 'role'. (sim)"
    n = body.get("n", 1)
    if n is not None and (type(n) is not int or not 1 <= n <= 128):
        return f"Invalid 'n': expected an integer between 1 and 128, got {n!r}. (sim)"
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is not None and (type(value) is not int or value < 1):
            return f"Invalid '{key}': expected a positive integer, got {value!r}. (sim)"
    k = body.get("top_logprobs")
    if k is not None and (type(k) is not int or not 0 <= k <= 20):
        return f"Invalid 'top_logprobs': expected an integer between 0 and 20, got {k!r}. (sim)"
    if k is not None and not body.get("logprobs"):
        return "'logprobs' must be set to true if 'top_logprobs' is used. (sim)"
    if body.get("stream"):
        return "Streaming is not supported by the simulated judge. (sim)"
    return None


def error(
    status: int, message: str, kind: str | None, code: str | None, **headers: str
) -> web.Response:
    """An error answer in OpenAI's form."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.json_response(body, status=status, headers=headers)


def too_many(kind: str, retry_after: float, message: str) -> web.Response:
    """A 429 rate_limit_exceeded; a request that can never fit gets no retry-after."""
    if math.isinf(retry_after):
        return error(429, message, kind, "rate_limit_exceeded")
    wait_ms, wait_s = max(1, math.ceil(retry_after * 1000)), max(1, math.ceil(retry_after))
    headers = {"retry-after-ms": str(wait_ms), "retry-after": str(wait_s)}
    return error(429, message, kind, "rate_limit_exceeded", **headers)


def reset_connection(request: web.Request) -> None:
    """Drop the connection with a TCP RST, as a proxy or an overloaded server does."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:  # linger 0 turns close into RST
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
