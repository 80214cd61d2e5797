"""The whole error tree of geval-async.

    GevalError                  root: everything geval-async raises on purpose
    ├── ConfigError             bad input (config, records, prompts): shown to the user, exit 2
    ├── CacheError              the cache folder cannot be opened, read or written
    ├── RunStopped              the run cannot go on (quota exhausted, key refused): exit 1
    └── TransportError          one judge request failed
        ├── RateLimited         429: retry after the cool-down the server asked for
        ├── Transient           5xx, timeouts, resets, truncated bodies: retry with backoff
        └── Rejected            other 4xx (invalid request, content filter, context too long):
                                recorded in the cache as a failure, never retried

Third-party exceptions (aiohttp, diskcache, tomllib, orjson) are translated once, at the module
that touches the third-party library, with ``raise ... from exc``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class GevalError(Exception):
    """Root of every error geval-async raises on purpose."""


class ConfigError(GevalError):
    """Bad input: a config, record file or prompt file the user must fix."""


class CacheError(GevalError):
    """The cache folder cannot be opened, read or written."""


class RunStopped(GevalError):
    """The whole run must stop: retrying cannot help (quota exhausted, key refused)."""


class TransportError(GevalError):
    """One judge request failed.

    Attributes:
        status: the HTTP status, or None when no response arrived.
        body: the response body as received (may be empty).
        headers: the response headers ({} when no response arrived); the rate limits learn
            from those of a 429.
        fact: the :class:`~geval_async.judging.failures.FailureFact` the transport saw, which
            :func:`~geval_async.judging.failures.decide` reads (None when raised elsewhere).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        fact: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.headers: Mapping[str, str] = headers if headers is not None else {}
        self.fact = fact


class RateLimited(TransportError):
    """HTTP 429 that will pass: wait ``retry_after`` seconds, then retry."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None,
        status: int | None = 429,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        fact: Any = None,
    ) -> None:
        super().__init__(message, status=status, body=body, headers=headers, fact=fact)
        self.retry_after = retry_after


class Transient(TransportError):
    """A failure that may pass on retry: 5xx, timeouts, resets, truncated bodies."""


class Rejected(TransportError):
    """The server refused this request for good (400, content filter, context too long)."""
