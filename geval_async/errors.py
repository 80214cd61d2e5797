"""The whole error tree of geval-async, and the facts a failed judge request carries.

    GevalError                  root: everything geval-async raises on purpose
    ├── ConfigError             bad input (config, records, prompts): shown to the user, exit 2
    ├── CacheError              the cache folder cannot be opened, read or written
    ├── RunStopped              a command cannot go on (a batch job the provider refused):
    │                           exit 1; a judge run stops through its result, not this
    └── TransportError          one judge request failed: carries its FailureFact
        ├── RateLimited         429: the server asked to wait (``retry_after``)
        ├── Transient           no (complete) answer, 5xx, malformed body: may pass on retry
        └── Rejected            another 4xx, or an answer withheld by the content filter

The transport raises one :class:`TransportError` per failed attempt, its class saying what
happened and its :class:`FailureFact` the typed facts (status, error code, type and param,
connection kind, headers). What the run does about it (wait, retry, store a refusal, resend
adapted, stop the run) is decided once, by the runner, with
:func:`geval_async.judging.wire.failures.decide` and what the run has seen; a 401 is a
:class:`Rejected` that stops the run, a 400 ``unsupported_value`` another.

Third-party exceptions (aiohttp, diskcache, tomllib, orjson) are translated once, at the module
that touches the third-party library, with ``raise ... from exc``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class Connection(enum.StrEnum):
    """How a request failed when no (complete) HTTP answer arrived."""

    REFUSED = "connection refused"
    DNS = "unknown host"
    TLS = "TLS failure"
    RESET = "connection reset"
    TIMEOUT = "timeout"
    TRUNCATED = "truncated body"
    MALFORMED = "malformed body"
    # The answer's head was more than the client reads (a header line over 8 kB, hundreds of
    # header lines): no answer can be read behind it.
    HEADERS_TOO_LARGE = "oversized response headers"
    # The body came in an encoding the client did not ask for and cannot read (br, zstd).
    ENCODING = "unreadable content encoding"


# Failures that say the URL is wrong rather than that the server is busy.
UNREACHABLE = (Connection.REFUSED, Connection.DNS, Connection.TLS)


# FailureFact.code of a 200 whose body is over [limits] max_answer_bytes (never stored).
ANSWER_TOO_LARGE = "answer_too_large"
# FailureFact.code of a 200 that is a web page (Content-Type text/html), not a JSON answer.
WEB_PAGE = "web_page"


@dataclass(frozen=True)
class FailureFact:
    """Everything known about one failed attempt, as typed facts.

    ``code``, ``type`` and ``param`` are the OpenAI-style error body's fields as sent;
    the flags are what the body says where no field says it (llama.cpp's refusal of ``n``).
    """

    status: int | None = None  # None: no HTTP answer arrived
    connection: Connection | None = None
    code: str = ""
    type: str = ""
    param: str = ""
    message: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    retry_after: float | None = None
    wait_header: str = ""  # the header that asked for ``retry_after``: "Retry-After: 30"
    refuses_n: bool = False  # the body says the server will not return several choices
    too_large: bool = False  # a 429 for a request larger than the whole per-minute budget
    quota_exhausted: bool = False
    refuses_logprobs: bool = False  # 403 "You are not allowed to request logprobs ..."
    responses_only: bool = False  # the model is served on v1/responses, not chat completions

    @property
    def reached_server(self) -> bool:
        """False when the request cannot have reached a server (connection refused, unknown
        host, TLS failure): nothing can have been billed for it."""
        return self.status is not None or self.connection not in UNREACHABLE

    @property
    def label(self) -> str:
        """A short name for counts and the progress line: "http 503", "connection refused"."""
        if self.connection is not None:
            return str(self.connection)
        return f"http {self.status}"


class GevalError(Exception):
    """Root of every error geval-async raises on purpose."""


class ConfigError(GevalError):
    """Bad input: a config, record file or prompt file the user must fix."""


class CacheError(GevalError):
    """The cache folder cannot be opened, read or written."""


class RunStopped(GevalError):
    """A command must stop: retrying cannot help (a batch job the provider refused)."""


class TransportError(GevalError):
    """One judge request failed.

    Attributes:
        fact: the typed facts of the failure, which
            :func:`~geval_async.judging.wire.failures.decide` reads.
        status: the HTTP status, or None when no response arrived.
        body: the response body as received (may be empty).
        headers: the response headers ({} when no response arrived); the rate limits learn
            from those of a 429.
    """

    def __init__(
        self,
        message: str,
        *,
        fact: FailureFact,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.fact = fact
        self.status = fact.status
        self.body = body
        self.headers: Mapping[str, str] = headers if headers is not None else {}


class RateLimited(TransportError):
    """HTTP 429: the server asked to wait ``retry_after`` seconds (None: it did not say)."""

    @property
    def retry_after(self) -> float | None:
        return self.fact.retry_after


class Transient(TransportError):
    """A failure that may pass on retry: no (complete) answer, 5xx, a malformed body."""


class Rejected(TransportError):
    """The server refused the request (a 4xx other than 429, or the content filter)."""
