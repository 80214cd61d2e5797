"""Which judge is at the endpoint: one GET, asked before a run looks anything up.

A run reads the cache as its server sees it (:mod:`geval_async.judging.store.origin`), so it first
asks which server it talks to. One GET of the endpoint URL tells, whatever its status: the
simulated judge marks every answer, errors included. It is asked with asyncio's own streams,
on the loop (no key is sent): a run whose answers are all in the cache never loads aiohttp,
whose import is a sizeable part of such a rerun, and no thread is started for it (a thread
would have to be joined when the loop closes). Only the response's head is read, then the
connection is closed.
"""

from __future__ import annotations

import asyncio
import functools
import re
import ssl
from collections.abc import Coroutine
from typing import Any
from urllib.parse import urlsplit

from ...study.config import JudgeConfig

__all__ = ["same_model", "server_is_simulated"]

_HEAD_LIMIT = 65_536  # bytes: a response head longer than this is not the simulated judge's


async def server_is_simulated(
    judge: JudgeConfig, seconds: float = 10.0, stop: asyncio.Event | None = None
) -> bool | None:
    """Whether the endpoint is geval-async's simulated judge (None when it cannot tell
    within ``seconds``, at most 10, or when ``stop`` is set first: a Ctrl-C while a server
    holds the GET unanswered ends the run at once, not when the GET gives up)."""
    try:
        async with asyncio.timeout(min(seconds, 10.0)):
            if stop is None:
                return await _ask(judge.url)
            return await _unless_stopped(_ask(judge.url), stop)
    except (TimeoutError, OSError, ValueError, ssl.SSLError, asyncio.IncompleteReadError):
        return None


async def _unless_stopped(
    asking: Coroutine[Any, Any, bool | None], stop: asyncio.Event
) -> bool | None:
    """What ``asking`` tells, or None as soon as ``stop`` is set."""
    if stop.is_set():
        asking.close()
        return None
    ask = asyncio.ensure_future(asking)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((ask, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (ask, stopped):
            task.cancel()
        # Each task's end awaited (asyncio.wait raises neither's error nor cancellation): the
        # GET's connection is closed before the run goes on.
        await asyncio.wait((ask, stopped))
    if ask.cancelled():
        return None
    return ask.result()


async def _ask(url: str) -> bool | None:
    parts = urlsplit(url)
    secure = parts.scheme == "https"
    host = parts.hostname
    if not host:
        return None
    port = parts.port or (443 if secure else 80)
    reader, writer = await asyncio.open_connection(
        host, port, ssl=ssl.create_default_context() if secure else None, limit=_HEAD_LIMIT
    )
    try:
        named = f"[{host}]" if ":" in host else host
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        authority = named if parts.port is None else f"{named}:{parts.port}"
        writer.write(
            f"GET {target} HTTP/1.1\r\nHost: {authority}\r\nAccept-Encoding: identity\r\n"
            "Connection: close\r\n\r\n".encode("latin-1")
        )
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return None
    finally:
        writer.close()
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/"):
        return None  # not an HTTP server: it cannot tell
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"x-geval-simulated":
            return value.strip() == b"true"
    return False


# A dated snapshot's suffix: -2024-07-18, -20241022, -0613.
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4})")


@functools.lru_cache(maxsize=64)  # a run's answers name one or two models
def same_model(served: str, asked: str) -> bool:
    """Whether the model a server says it served is the one asked: the same name, or a dated
    snapshot of it (``gpt-4o-mini-2024-07-18`` or ``gpt-4-0613`` for the name asked), with or
    without a provider's folder (``meta-llama/llama-3-8b``). ``gpt-4o-mini`` is not ``gpt-4o``.
    """
    served, asked = served.strip().lower(), asked.strip().lower()
    if "/" not in asked:
        served = served.rsplit("/", 1)[-1]
    return served == asked or (
        served.startswith(asked) and _SNAPSHOT.fullmatch(served[len(asked) :]) is not None
    )
