"""One chat-completions POST over aiohttp, and the mapping of its failures to our errors.

One ``aiohttp.ClientSession`` per run with a connection pool sized to the concurrency; bodies are
encoded with orjson. This is the boundary where the outside world's failures become the
project's: a timeout, reset or 5xx becomes :class:`Transient`, a 429 :class:`RateLimited` (with
the wait the server asked for), another 4xx :class:`Rejected`, and the failures that no retry can
fix (quota exhausted, key refused, wrong URL) :class:`RunStopped`. The API key goes into a
header and nowhere else: it never appears in an error message.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from ..errors import (
    RateLimited,
    Rejected,
    RunStopped,
    Transient,
    TransportError,
    is_retryable_status,
)
from ..study.config import JudgeConfig
from .limits import retry_after

_REJECT_CODES = ("context_length_exceeded", "content_filter", "string_above_max_length")


@dataclass(frozen=True)
class JudgeAnswer:
    """A 200 answer: the raw body as received, its parsed form and the response headers."""

    status: int
    body: bytes
    parsed: dict[str, Any]
    headers: Mapping[str, str]
    latency_ms: float

    @property
    def choices(self) -> list[dict[str, Any]]:
        return self.parsed["choices"]  # type: ignore[no-any-return]

    @property
    def simulated(self) -> bool:
        """Whether the answer came from geval-async's simulated judge."""
        return self.headers.get("x-geval-simulated", "") == "true"


class Transport:
    """The judge endpoint. ``async with Transport(...) as t: await t.complete(body)``."""

    def __init__(
        self, judge: JudgeConfig, api_key: str | None, *, concurrency: int, timeout: float
    ) -> None:
        self._judge = judge
        self._url = judge.url
        self._headers = {"Content-Type": "application/json", **judge.auth_headers(api_key)}
        self._concurrency = concurrency
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Transport:
        connector = aiohttp.TCPConnector(
            limit=self._concurrency, limit_per_host=self._concurrency, ttl_dns_cache=300
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            # The per-attempt deadline is asyncio.timeout in complete(); no second clock here.
            timeout=aiohttp.ClientTimeout(total=None),
            json_serialize=lambda v: orjson.dumps(v).decode(),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def complete(self, body: Mapping[str, Any]) -> JudgeAnswer:
        """Send one request; return the answer or raise a TransportError / RunStopped."""
        assert self._session is not None, "use Transport as an async context manager"
        data = orjson.dumps(body)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout):
                async with self._session.post(self._url, data=data) as response:
                    raw = await response.read()
                    status, headers = response.status, response.headers
        except TimeoutError as exc:
            raise Transient(f"no answer within {self._timeout:g} s (timeout)") from exc
        except aiohttp.ClientPayloadError as exc:
            raise Transient(f"the response body was cut off ({exc})") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise Transient(f"connection failed ({type(exc).__name__}: {exc})") from exc
        latency_ms = (time.perf_counter() - started) * 1000.0
        if status == 200:
            return _answer(status, raw, headers, latency_ms)
        raise _failure(status, raw, headers, self._url, self._judge.api_key_env)


_REFUSES_N = re.compile(
    r"""field\s+['"`]?n['"`]?\b|['"`]n['"`]\s+(must|should|is)|\bn\s+must\b|only one completion"""
    r"""|\bcompletion choices?\b|\bn\s*(>|must be)\s*1\b""",
    re.IGNORECASE,
)


def refuses_n(exc: TransportError) -> bool:
    """Whether a failure says the server will not return several choices (``n`` > 1).

    Some servers ignore ``n`` (llama_cpp.server); others refuse it: llama.cpp's llama-server
    answers 400 "Field 'n': Value must be between 1 <= value <= 4" (its slot count), older
    builds 500 "Only one completion choice is allowed".
    """
    if exc.status not in (400, 422, 500):
        return False
    _, _, message = _error_fields(exc.body)
    return bool(_REFUSES_N.search(message or str(exc)))


def _answer(status: int, raw: bytes, headers: Mapping[str, str], latency_ms: float) -> JudgeAnswer:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Transient(
            f"the response body is not valid JSON ({len(raw)} bytes)", status=status, body=raw
        ) from exc
    choices = parsed.get("choices") if isinstance(parsed, dict) else None
    if not isinstance(choices, list) or not choices:
        raise Transient("the response has no choices", status=status, body=raw)
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise Transient("a response choice has no message", status=status, body=raw)
    if all(c.get("finish_reason") == "content_filter" for c in choices):
        raise Rejected("the answer was withheld by the content filter", status=status, body=raw)
    return JudgeAnswer(status, raw, parsed, dict(headers), latency_ms)


def _error_fields(raw: bytes) -> tuple[str, str, str]:
    """(code, type, message) of an OpenAI-style error body; empty strings when absent."""
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


def _failure(
    status: int, raw: bytes, headers: Mapping[str, str], url: str, key_env: str
) -> Exception:
    code, kind, message = _error_fields(raw)
    shown_code = f" {code}" if code and code != str(status) else ""
    detail = f"HTTP {status}{shown_code}" + (f": {message}" if message else "")
    if status == 429:
        if "insufficient_quota" in (code, kind):
            return RunStopped(
                "the judge API says the quota is exhausted (insufficient_quota): add credit or "
                "raise the limit on your account, then run the same command again to resume"
            )
        if "request too large" in message.lower():
            # Bigger than the whole per-minute budget: no wait will ever let it through.
            return Rejected(
                f"{detail} (raise the account's TPM limit or shorten the prompt)",
                status=status,
                body=raw,
            )
        wait = retry_after(headers, kind)
        if wait is not None and not math.isfinite(wait):
            wait = None  # "inf" or "1e400": nobody can wait that out; back off instead
        return RateLimited(detail, retry_after=wait, body=raw, headers=headers)
    if status in (401, 403):
        return RunStopped(
            f"the judge refused the API key ({detail}): check ${key_env}, then run again"
        )
    if status == 404:
        return RunStopped(
            f"the judge URL or model was not found ({detail}) at {url}: "
            "check base_url / model (or azure_endpoint / deployment / api_version)"
        )
    if is_retryable_status(status):
        return Transient(detail, status=status, body=raw)
    # 400 (invalid request, context too long, content filter), 413 request too large, 422 ...
    if code in _REJECT_CODES or status in (400, 413, 422) or 400 <= status < 500:
        return Rejected(detail, status=status, body=raw)
    return Transient(detail, status=status, body=raw)
