"""The kind of a failed connection, read from aiohttp's or the operating system's exception.

A request that got no complete HTTP answer failed one of a few ways, and each means something
else to a user: a refused connection or an unknown host is a wrong URL, a timeout a slow
server, an oversized head or an encoding nobody asked for a server (or proxy) that answers
what this client cannot read. Anything else is a reset.
"""

from __future__ import annotations

import socket
import ssl

from ...errors import Connection

__all__ = ["connection_kind"]

# aiohttp's words for a response head it will not read, and for a body it cannot decode
# (its C parser raises one exception class for every malformed head).
_HEAD_TOO_LARGE = ("got more than", "too many headers", "line too long", "header value is too")
_UNREADABLE_ENCODING = ("content-encoding",)


def connection_kind(exc: BaseException) -> Connection:
    """The kind of a connection-level exception (aiohttp's or the OS's)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError):
            return Connection.TIMEOUT
        if isinstance(current, ssl.SSLError | ssl.CertificateError):
            return Connection.TLS
        if isinstance(current, socket.gaierror):
            return Connection.DNS
        if isinstance(current, ConnectionRefusedError):
            return Connection.REFUSED
        name = type(current).__name__
        if "DNS" in name:
            return Connection.DNS
        if "SSL" in name or "Certificate" in name:
            return Connection.TLS
        if "Payload" in name:
            return Connection.TRUNCATED
        if "HttpProcessing" in name or "BadHttpMessage" in name or "LineTooLong" in name:
            words = str(current).lower()
            if any(said in words for said in _HEAD_TOO_LARGE):
                return Connection.HEADERS_TOO_LARGE
            if any(said in words for said in _UNREADABLE_ENCODING):
                return Connection.ENCODING
        if "ContentEncoding" in name:
            return Connection.ENCODING
        os_error = getattr(current, "os_error", None)
        current = os_error if isinstance(os_error, BaseException) else current.__cause__
    return Connection.RESET
