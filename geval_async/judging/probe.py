"""Which judge is at the endpoint: one GET, asked before a run looks anything up.

A run reads the cache as its server sees it (:mod:`geval_async.judging.origin`), so it first
asks which server it talks to. One GET of the endpoint URL tells, whatever its status: the
simulated judge marks every answer, errors included. The standard library's HTTP client asks
it (no key is sent), so a run whose answers are all in the cache never loads aiohttp, whose
import is a sizeable part of such a rerun.
"""

from __future__ import annotations

import asyncio
import http.client
from urllib.parse import urlsplit

from ..study.config import JudgeConfig

__all__ = ["server_is_simulated"]


async def server_is_simulated(judge: JudgeConfig, seconds: float = 10.0) -> bool | None:
    """Whether the endpoint is geval-async's simulated judge (None when it cannot tell
    within ``seconds``, at most 10)."""
    return await asyncio.to_thread(_ask, judge.url, min(seconds, 10.0))


def _ask(url: str, timeout: float) -> bool | None:
    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        connection = kind(parts.hostname or "", parts.port, timeout=timeout)
        try:
            connection.request(
                "GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            )
            return connection.getresponse().getheader("x-geval-simulated", "") == "true"
        finally:
            connection.close()
    except (OSError, http.client.HTTPException, ValueError):
        return None
