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
from urllib.parse import urlsplit

from ...study.config import JudgeConfig

__all__ = ["same_model", "server_is_simulated"]

_HEAD_LIMIT = 65_536  # bytes: a response head longer than this is not the simulated judge's


async def server_is_simulated(judge: JudgeConfig, seconds: float = 10.0) -> bool | None:
    """Whether the endpoint is geval-async's simulated judge (None when it cannot tell
    within ``seconds``, at most 10)."""
    try:
        async with asyncio.timeout(min(seconds, 10.0)):
            return await _ask(judge.url)
    except (TimeoutError, OSError, ValueError, ssl.SSLError, asyncio.IncompleteReadError):
        return None


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
