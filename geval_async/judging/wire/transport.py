"""One judge POST over aiohttp, and the translation of its failures to our errors.

A request goes to chat completions or, spelt as the Responses API wants it, to
``/v1/responses``; a Responses answer is checked and read as the one choice its ``output``
items make (:func:`~geval_async.study.responses_api.answer_choices`), its body kept as received.

One ``aiohttp.ClientSession`` per run with a connection pool sized to the concurrency; bodies are
encoded with orjson. This is the boundary where the outside world's failures become the
project's: every failed attempt raises one :class:`~geval_async.errors.TransportError` carrying
its :class:`~geval_async.errors.FailureFact` (a timeout, reset or 5xx a :class:`Transient`, a
429 :class:`RateLimited`, another 4xx :class:`Rejected`). The transport decides nothing: what a
failure means for the run (retry, store a refusal, stop) is the runner's one call of
:func:`~geval_async.judging.wire.failures.decide`. The API key goes into a header and nowhere
else: it never appears in an error message, and where a server quotes it back (in a body, a
header or a malformed head) it is taken out here, before anything is printed or stored.

Each attempt has ``[limits] timeout`` seconds. The deadlines are kept by one watch task
(:class:`_Deadlines`) instead of an ``asyncio.timeout`` each attempt: a timer handle made,
pushed onto the loop's heap and cancelled for every request costs the loop's CPU at every
request, and the cancelled handles of the last ``timeout`` seconds stay in that heap. The
watch looks every
:data:`_TICKS`-th of the timeout (at most every :data:`_MAX_TICK` s), so an attempt gives up
within that much after its deadline; it is cancelled as ``asyncio.timeout`` cancels it, and
the cancellation becomes the attempt's timeout only when the watch made it (a Ctrl-C's or the
task group's stays a cancellation).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from ...errors import (
    ANSWER_TOO_LARGE,
    WEB_PAGE,
    Connection,
    FailureFact,
    RateLimited,
    Rejected,
    Transient,
    TransportError,
)
from ...study.config import JudgeConfig
from ...study.responses_api import answer_choices, is_response
from .connection_kinds import connection_kind
from .failures import describe, response_fact
from .quoted_key import KEY_REMOVED, headers_without_key, secret, without_key

_CONTENT_ENCODING = aiohttp.hdrs.CONTENT_ENCODING

# The watch of the attempts' deadlines wakes this often: a tenth of the timeout, at most 0.25 s.
_TICKS = 10
_MAX_TICK = 0.25


class _Deadlines:
    """The deadlines of the attempts in flight, one task a worker, kept by one watch task."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.due: dict[asyncio.Task[Any], float] = {}
        self.expired: set[asyncio.Task[Any]] = set()
        self._loop = asyncio.get_running_loop()
        self._watch = self._loop.create_task(self._keep(min(_MAX_TICK, timeout / _TICKS)))

    def start(self, task: asyncio.Task[Any]) -> None:
        """An attempt of ``task`` begins: it has ``timeout`` seconds from now."""
        self.due[task] = self._loop.time() + self.timeout

    def end(self, task: asyncio.Task[Any], cancelling: int) -> bool:
        """The attempt of ``task`` is over; whether the watch cancelled it and nothing else
        did since it began (``cancelling``: ``task.cancelling()`` then), as ``asyncio.timeout``
        tells its own cancellation from another. The watch's cancellation is taken back."""
        del self.due[task]
        if task not in self.expired:
            return False
        self.expired.discard(task)
        return task.uncancel() <= cancelling

    async def _keep(self, tick: float) -> None:
        while True:
            await asyncio.sleep(tick)
            now = self._loop.time()
            for task, due in self.due.items():
                if due <= now and task not in self.expired:
                    self.expired.add(task)
                    task.cancel()  # as asyncio.timeout does; end() tells it was the deadline

    async def aclose(self) -> None:
        self._watch.cancel()
        # asyncio.wait never raises the watch's CancelledError: a cancellation of the caller
        # is not swallowed here.
        await asyncio.wait([self._watch])


@dataclass(slots=True)
class JudgeAnswer:
    """A 200 answer: the raw body as received, its parsed form (a Responses answer's: the
    choice its output items make, with its model and usage) and the response headers
    (as aiohttp received them: looked up without regard to case).

    Not frozen, though nothing changes it once made: a frozen dataclass sets each field
    through ``object.__setattr__``, and one is made for every answer.
    """

    status: int
    body: bytes
    parsed: dict[str, Any]
    headers: Mapping[str, str]
    latency_ms: float  # the attempt's time to the microsecond, as stored
    # How many choices hold text (a str content, not blank), and whether a message shows
    # reasoning (a non-empty ``reasoning_content`` or ``reasoning``): read in the one pass
    # over them that checks the answer, so that neither needs a second pass.
    texts: int = 0
    reasoned: bool = False

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
        self,
        judge: JudgeConfig,
        api_key: str | None,
        *,
        concurrency: int,
        timeout: float,
        max_answer_bytes: int = 1_000_000,
    ) -> None:
        self._judge = judge
        self._url = judge.url
        self._responses_url = judge.responses_url
        self._headers = {"Content-Type": "application/json", **judge.auth_headers(api_key)}
        self._api_key = api_key
        # The key as a server would quote it back (None: no key, or too short to be a secret).
        self._key_bytes = None if (key := secret(api_key)) is None else key.encode()
        self._concurrency = concurrency
        self._timeout = timeout
        self._max_answer_bytes = max_answer_bytes
        self._session: aiohttp.ClientSession | None = None
        self._deadlines: _Deadlines | None = None

    async def __aenter__(self) -> Transport:
        connector = aiohttp.TCPConnector(
            limit=self._concurrency, limit_per_host=self._concurrency, ttl_dns_cache=300
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            # The per-attempt deadline is the watch's (_Deadlines); no second clock here.
            timeout=aiohttp.ClientTimeout(total=None),
            json_serialize=lambda v: orjson.dumps(v).decode(),
        )
        self._deadlines = _Deadlines(self._timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._deadlines is not None:
            await self._deadlines.aclose()
            self._deadlines = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def complete(self, body: Mapping[str, Any], *, responses: bool = False) -> JudgeAnswer:
        """Send one request (``responses``: a Responses API body, to that API's URL); return
        the answer or raise a :class:`TransportError`."""
        assert self._session is not None, "use Transport as an async context manager"
        assert self._deadlines is not None
        data = orjson.dumps(body)
        task = asyncio.current_task()
        assert task is not None
        cancelling = task.cancelling()
        deadlines = self._deadlines
        started = time.perf_counter_ns()
        deadlines.start(task)
        try:
            try:
                # Never follow a redirect: aiohttp would re-send a 301/302 as a GET, and the
                # run would stop on a 405 that hides the cause (decide() names the Location).
                async with self._session.post(
                    self._responses_url if responses else self._url,
                    data=data,
                    allow_redirects=False,
                ) as response:
                    status = response.status
                    headers: Mapping[str, str] = response.headers
                    declared = response.content_length
                    # A compressed answer's declared length is not its body's: aiohttp hands
                    # over the body decompressed, so it is read under the cap (a 3 kB gzip of
                    # 3 MB would otherwise pass [limits] max_answer_bytes).
                    if _CONTENT_ENCODING in headers:
                        declared = None
                    if declared is not None and declared <= self._max_answer_bytes:
                        # The usual answer: its length is declared and within the cap, so
                        # aiohttp reads no further than that (one read, no chunks to join).
                        raw: bytes | None = await response.read()
                    else:
                        raw = await _read_capped(response, self._max_answer_bytes, declared)
            finally:
                timed_out = deadlines.end(task, cancelling)
        except asyncio.CancelledError as exc:
            if timed_out:  # the watch's cancellation, and no other: this attempt's timeout
                fact = FailureFact(connection=Connection.TIMEOUT)
                raise Transient(
                    f"no answer within {self._timeout:g} s (timeout)", fact=fact
                ) from exc
            raise
        except aiohttp.ClientPayloadError as exc:
            fact = FailureFact(connection=Connection.TRUNCATED)
            said = without_key(str(exc), self._api_key)
            raise Transient(f"the response body was cut off ({said})", fact=fact) from exc
        except (aiohttp.ClientError, OSError) as exc:
            # aiohttp quotes a malformed head's bytes in its message: the key may be in them.
            said = without_key(str(exc), self._api_key)
            fact = FailureFact(connection=connection_kind(exc))
            raise Transient(f"{fact.connection} ({type(exc).__name__}: {said})", fact=fact) from exc
        # To the microsecond as stored, from integer nanoseconds: round(ms, 3) of a float
        # formats and parses a decimal string (3,300 instructions, a third of an entry's).
        latency_ms = (time.perf_counter_ns() - started + 500) // 1000 / 1000
        key = self._key_bytes
        if key is not None:  # one search of the body: the usual answer quotes no key
            if raw is not None and key in raw:
                raw = raw.replace(key, _KEY_REMOVED)
            if status != 200:
                headers = headers_without_key(headers, self._api_key)
        if raw is None:
            limit = self._max_answer_bytes
            if status != 200:  # an error body only gives its first words to the message
                raise _failure(status, b"", headers)
            if _is_web_page(headers):  # a site's page, whatever its size
                raise _web_page(status, b"", headers)
            raise Rejected(
                f"the answer body is larger than [limits] max_answer_bytes ({limit} bytes)",
                headers=headers,
                fact=FailureFact(status=status, code=ANSWER_TOO_LARGE),
            )
        if status == 200:
            return _answer(status, raw, headers, latency_ms)
        raise _failure(status, raw, headers)


_KEY_REMOVED = KEY_REMOVED.encode()


async def _read_capped(
    response: aiohttp.ClientResponse, limit: int, declared: int | None
) -> bytes | None:
    """The body, or None when it is longer than ``limit`` bytes (then read no further than
    that: a 20 MB answer never sits in memory, nor in the cache). ``declared``: the body's
    length as the response declares it (None: not declared, or compressed)."""
    if declared is not None and declared > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while size <= limit and (chunk := await response.content.read(limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
    return None if size > limit else b"".join(chunks)


def _answer(status: int, raw: bytes, headers: Mapping[str, str], latency_ms: float) -> JudgeAnswer:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if _is_web_page(headers):
            raise _web_page(status, raw, headers) from exc
        raise Transient(
            f"the response body is not valid JSON ({len(raw)} bytes)",
            body=raw,
            fact=FailureFact(status=status, connection=Connection.MALFORMED),
        ) from exc
    if isinstance(parsed, dict) and is_response(parsed):
        # A Responses answer, checked as the chat completion of its one choice would be;
        # the body stays as received.
        parsed = {
            "model": parsed.get("model"),
            "choices": answer_choices(parsed),
            "usage": parsed.get("usage"),
        }
    choices = parsed.get("choices") if isinstance(parsed, dict) else None
    if not isinstance(choices, list) or not choices:
        raise Transient("the response has no choices", body=raw, fact=_malformed(status))
    filtered = True
    texts = 0
    reasoned = False
    for choice in choices:
        # Indexed, not .get(): a method call each is dearer, and a choice that is no object
        # (or has no message) fails the same way.
        try:
            message = choice["message"]
        except (KeyError, TypeError):
            message = None
        if type(message) is not dict:
            raise Transient("a response choice has no message", body=raw, fact=_malformed(status))
        if filtered:  # until a choice that was not withheld
            filtered = choice.get("finish_reason") == "content_filter"
        content = message.get("content")
        if type(content) is str and content and not content.isspace():
            texts += 1
        if ("reasoning_content" in message or "reasoning" in message) and (
            message.get("reasoning_content") or message.get("reasoning")
        ):
            reasoned = True
    if filtered:
        raise Rejected(
            "the answer was withheld by the content filter",
            body=raw,
            headers=headers,
            fact=FailureFact(status=status, code="content_filter"),
        )
    return JudgeAnswer(status, raw, parsed, headers, latency_ms, texts, reasoned)


def _is_web_page(headers: Mapping[str, str]) -> bool:
    return "text/html" in headers.get("Content-Type", "").lower()


def _web_page(status: int, raw: bytes, headers: Mapping[str, str]) -> Rejected:
    """A 200 that is a web page, not an answer: a proxy's or a site's (the run stops)."""
    return Rejected(
        "the answer is a web page (text/html), not JSON",
        body=raw,
        headers=headers,
        fact=FailureFact(status=status, code=WEB_PAGE),
    )


def _malformed(status: int) -> FailureFact:
    return FailureFact(status=status, connection=Connection.MALFORMED)


def _failure(status: int, raw: bytes, headers: Mapping[str, str]) -> TransportError:
    """The error of an HTTP answer that is not a usable 200: its class says what happened."""
    fact = response_fact(status, raw, headers)
    kind: type[TransportError]
    if status == 429:
        kind = RateLimited
    elif status in (408, 409, 425) or status >= 500:
        kind = Transient
    else:
        kind = Rejected
    return kind(describe(fact), fact=fact, body=raw, headers=headers)


def read_response(status: int, raw: bytes, headers: Mapping[str, str]) -> JudgeAnswer:
    """The answer in a response received another way (a line of a batch's output file).

    Raises what an online response with this status and body would have raised, so that a
    batch's answers and refusals are told apart by the same decision as online ones.
    """
    if status == 200:
        return _answer(status, raw, headers, 0.0)
    raise _failure(status, raw, headers)
