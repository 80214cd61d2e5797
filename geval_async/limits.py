"""Client-side rate limits, learned from the server when not configured, and the 429 cool-down.

Two paced buckets hold the run under the requests-per-minute and tokens-per-minute limits; a
request costs one request and its estimated tokens (prompt estimate plus ``max_tokens x n``,
the way providers count it). A cache hit never reaches this module.

The limits come from the config (``rpm``/``tpm``) or, when a limit is not configured, from the
``x-ratelimit-limit-*`` headers of the server's answers (:meth:`RateLimits.observe`, called for
every answer and every 429); when both exist the lower one holds. Until the first answer
arrives nothing is known, so the first ``concurrency`` requests go out unpaced.

Pacing, not bursting: a bucket lets a request through at the steady rate with at most
:data:`BURST_SECONDS` of credit, even when the server would take a minute's worth at once.
Providers enforce their per-minute limits over much shorter windows, so a client that empties
a minute of quota in its first seconds meets 429s there. ``x-ratelimit-remaining-*`` keeps the
buckets honest: a bucket never believes it has more credit than the server says remains (another
process sharing the key shows up there), and ``x-ratelimit-reset-*`` tells how deep the
server's bucket is, so the burst stays within half of it.

A 429 pauses every worker, not just the one that got it: all of them wait on one shared
:class:`CoolDown` until the time the server asked for (``retry-after-ms``, ``retry-after`` or
``x-ratelimit-reset-*``), and after the pause they leave at the paced rate, not all at once.
Without that, N workers would each discover the limit on their own and hit the server again
together (a thundering herd).

Buckets and cool-down belong to one event loop; create them inside the running loop.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Mapping

from .errors import ConfigError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_HEADER_PREFIX = "x-ratelimit-"
_KINDS = ("requests", "tokens")

#: Seconds of credit a bucket may hold: the largest burst the client sends.
BURST_SECONDS = 0.25


def parse_duration(text: str) -> float | None:
    """Seconds in an OpenAI reset header ("1s", "6m0s", "120ms", "1m30.5s"), or None."""
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text:
        return None
    return sum(float(amount) * _UNIT_SECONDS[unit] for amount, unit in parts)


def retry_after(headers: Mapping[str, str], kind: str | None = None) -> float | None:
    """Seconds the server asks us to wait after a 429, or None when it does not say.

    Reads, in order, ``retry-after-ms``, ``retry-after`` (seconds), then the
    ``x-ratelimit-reset-*`` header of the limit that was hit (``kind`` "requests"/"tokens").
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass  # an HTTP date: rare for APIs; fall through to the reset headers
    names = [f"x-ratelimit-reset-{kind}"] if kind in _KINDS else []
    names += ["x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"]
    for name in names:
        if name in lowered:
            seconds = parse_duration(lowered[name])
            if seconds is not None:
                return seconds
    return None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


class CoolDown:
    """A pause shared by every worker: nobody sends until the latest requested time."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.until = 0.0

    @property
    def remaining(self) -> float:
        """Seconds left in the current pause (0 when none)."""
        return max(0.0, self.until - self._loop.time())

    def pause(self, seconds: float) -> None:
        """Pause every worker for ``seconds`` from now (an earlier, longer pause stands)."""
        self.until = max(self.until, self._loop.time() + seconds)


class PacedBucket:
    """``per_minute`` units a minute, handed out at a steady pace with ``burst`` seconds of credit.

    A generic cell rate algorithm: ``_full_at`` is when the bucket would hold no debt. A caller
    reserves its slot at once (first come, first served, O(1)) and sleeps until it; a request
    bigger than the credit passes once the bucket is full enough and the debt it leaves slows
    the requests after it, so the rate holds for any mix of sizes.
    """

    def __init__(self, per_minute: float, now: float, burst: float = BURST_SECONDS) -> None:
        self.per_minute = per_minute
        self.burst = burst
        self._interval = 60.0 / per_minute  # seconds per unit
        self._full_at = now

    def reserve(self, cost: float, not_before: float) -> float:
        """Book ``cost`` units; returns the loop time at which they may be spent."""
        start = max(not_before, self._full_at - self.burst)
        self._full_at = max(self._full_at, start) + cost * self._interval
        return start

    def set_rate(self, per_minute: float, now: float) -> None:
        """Change the rate, keeping the debt (in units) the bucket holds."""
        debt = max(0.0, self._full_at - now) / self._interval
        self.per_minute, self._interval = per_minute, 60.0 / per_minute
        self._full_at = now + debt * self._interval

    def limit_credit(self, units: float, now: float) -> None:
        """Hold no more than ``units`` of credit (what the server says remains)."""
        self._full_at = max(self._full_at, now + self.burst - units * self._interval)


class RateLimits:
    """The requests and tokens buckets plus the cool-down; one per run, made inside the loop.

    Args:
        rpm: requests per minute from the config, or None to learn it from the server.
        tpm: tokens per minute from the config, or None to learn it from the server.
    """

    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self._loop = asyncio.get_running_loop()
        now = self._loop.time()
        self.rpm, self.tpm = rpm, tpm
        self.configured: dict[str, float | None] = {"requests": rpm, "tokens": tpm}
        self.learned: dict[str, float] = {}
        self.buckets: dict[str, PacedBucket] = {
            kind: PacedBucket(limit, now) for kind, limit in self.configured.items() if limit
        }
        self.cooldown = CoolDown()

    def check_request(self, tokens: int) -> None:
        """Raise ConfigError for a request that the configured TPM limit can never let through."""
        if self.tpm and tokens > self.tpm:
            raise ConfigError(
                f"one request is estimated at {tokens} tokens, more than the tpm limit "
                f"({self.tpm:g}): raise --tpm or lower max_tokens / n"
            )

    async def acquire(self, tokens: int) -> None:
        """Wait for the cool-down and for this request's slot in both buckets."""
        while True:
            # Read the buckets on every pass: observe() may have created one meanwhile.
            requests, token_bucket = self.buckets.get("requests"), self.buckets.get("tokens")
            now = self._loop.time()
            start = max(now, self.cooldown.until)
            if requests is not None:
                start = requests.reserve(1, start)
            if token_bucket is not None:
                start = token_bucket.reserve(tokens, start)
            if start > now:
                await asyncio.sleep(start - now)
            # A 429 that arrived while this worker waited makes its slot stale: queue again,
            # behind the pause, at the paced rate.
            if self.cooldown.until <= max(start, self._loop.time()):
                return

    def observe(self, headers: Mapping[str, str]) -> None:
        """Learn from the ``x-ratelimit-*`` headers of an answer or a 429.

        ``limit`` sets the rate of a limit that is not configured (or is configured higher);
        ``remaining`` caps the credit a bucket holds; ``reset`` (time until the server's bucket
        is full again) with ``remaining`` and the rate tells the server's burst capacity.
        """
        found: dict[str, str] = {}
        for name, value in headers.items():
            if name[:12].lower() == _HEADER_PREFIX:
                found[name.lower()] = value
        if not found:
            return
        now = self._loop.time()
        for kind in _KINDS:
            limit = _number(found.get(f"x-ratelimit-limit-{kind}"))
            bucket = self.buckets.get(kind)
            if limit:
                configured = self.configured[kind]
                rate = min(limit, configured) if configured else limit
                if bucket is None:
                    bucket = self.buckets[kind] = PacedBucket(rate, now)
                elif bucket.per_minute != rate:
                    bucket.set_rate(rate, now)
                if rate != configured:
                    self.learned[kind] = rate
            if bucket is None:
                continue
            remaining = _number(found.get(f"x-ratelimit-remaining-{kind}"))
            if remaining is None:
                continue
            reset = found.get(f"x-ratelimit-reset-{kind}")
            refill = parse_duration(reset) if reset is not None else None
            if refill is not None:
                # The server's bucket holds remaining + refill x rate when full; bursting more
                # than half of that would leave no room for the jitter of arrivals.
                depth = (remaining + refill * bucket.per_minute / 60.0) * 60.0 / bucket.per_minute
                bucket.burst = min(BURST_SECONDS, depth / 2)
            bucket.limit_credit(remaining, now)
