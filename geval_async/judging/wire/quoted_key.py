"""The API key a server quotes back, taken out of what it sends.

A server or a proxy may quote the request's ``Authorization`` header in what it answers (a
debugging echo, an error page that lists the headers it received). Whatever a server sends is
printed, stored as a refusal and exported for co-authors, so the key is taken out of it first,
at the boundary where it arrives: the transport's bodies, headers and connection errors, and
the batch client's error messages.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["KEY_REMOVED", "headers_without_key", "secret", "without_key"]

# What stands where a server quoted the API key.
KEY_REMOVED = "[API key removed]"
# A shorter key is no secret (a local server's placeholder such as "none" or "EMPTY"), and
# taking it out of answers would cut ordinary words out of the judge's text.
_SHORTEST_SECRET = 8


def secret(api_key: str | None) -> str | None:
    """The key as it is looked for in what servers send (None: no key, or one too short to be
    a secret)."""
    return api_key if api_key and len(api_key) >= _SHORTEST_SECRET else None


def without_key(text: str, api_key: str | None) -> str:
    """``text`` (what a server sent) with the API key taken out wherever it is quoted."""
    key = secret(api_key)
    if key is not None and key in text:
        return text.replace(key, KEY_REMOVED)
    return text


def headers_without_key(headers: Mapping[str, str], api_key: str | None) -> Mapping[str, str]:
    """``headers`` (a failed answer's: they reach its message, a redirect's Location) with any
    quoted key taken out; the same mapping when none is."""
    if not any(without_key(value, api_key) != value for value in headers.values()):
        return headers
    # aiohttp's own mapping (its dependency), so that names are still looked up regardless
    # of case; imported here, where a key was quoted, which is seldom.
    from multidict import CIMultiDict

    return CIMultiDict((name, without_key(value, api_key)) for name, value in headers.items())
