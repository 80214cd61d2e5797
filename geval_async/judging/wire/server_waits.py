"""The wait a server asks for after a 429, read from its headers.

``retry-after-ms``, ``Retry-After`` (seconds, or an HTTP date as RFC 9110 allows), then the
``x-ratelimit-reset-*`` of the limit that was hit (OpenAI's durations: "1s", "6m0s", "120ms").
A value that is no wait (negative, NaN, a date in the past, words) counts as absent, so that
the usual backoff applies, never a wait of 0 that resends at once; an infinite or absurd one is
kept as it is, and the run's ``[limits] max_wait`` stops it (:mod:`.failures`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["asked_wait", "parse_duration", "retry_after"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_KINDS = ("requests", "tokens")


def parse_duration(text: str) -> float | None:
    """Seconds in an OpenAI reset header ("1s", "6m0s", "120ms", "1m30.5s"), or None.

    A negative or NaN figure is no duration (None): a wait of 0 would resend at once.
    """
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 else None  # NaN fails the comparison too
    parts = _DURATION.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text:
        return None
    return sum(float(amount) * _UNIT_SECONDS[unit] for amount, unit in parts)


def _http_date_wait(text: str) -> float | None:
    """Seconds until an HTTP-date ``Retry-After`` (RFC 9110), or None (not a date, or past)."""
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        when = when.replace(tzinfo=UTC)
    seconds = (when - datetime.now(UTC)).total_seconds()
    return seconds if seconds > 0 else None


def asked_wait(headers: Mapping[str, str], kind: str | None = None) -> tuple[float, str] | None:
    """The wait a 429 asks for, and the header that says it ("Retry-After: 30"), or None.

    Reads, in order, ``retry-after-ms``, ``retry-after`` (seconds or an HTTP date), then the
    ``x-ratelimit-reset-*`` header of the limit that was hit (``kind`` "requests"/"tokens").
    A value that is no wait (negative, NaN, a date in the past, words) counts as absent, so
    the usual backoff applies; an infinite one is kept (the run's ``max_wait`` stops it).
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get("retry-after-ms")
    if value is not None:
        seconds = parse_duration(value)  # a bare number: milliseconds
        if seconds is not None and _DURATION.fullmatch(value.strip()) is None:
            return seconds / 1000.0, f"retry-after-ms: {value.strip()}"
    value = lowered.get("retry-after")
    if value is not None:
        text = value.strip()
        seconds = parse_duration(text) if _DURATION.fullmatch(text) is None else None
        if seconds is None:
            seconds = _http_date_wait(text)
        if seconds is not None:
            return seconds, f"Retry-After: {text}"
    names = [f"x-ratelimit-reset-{kind}"] if kind in _KINDS else []
    names += ["x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"]
    for name in names:
        if name in lowered:
            seconds = parse_duration(lowered[name])
            if seconds is not None:
                return seconds, f"{name}: {lowered[name].strip()}"
    return None


def retry_after(headers: Mapping[str, str], kind: str | None = None) -> float | None:
    """Seconds the server asks us to wait after a 429, or None when it does not say
    (:func:`asked_wait` without the header's name)."""
    asked = asked_wait(headers, kind)
    return None if asked is None else asked[0]
