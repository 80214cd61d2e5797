"""Client-side rate limits, learned from the server when not configured, and the 429 cool-down.

Two paced buckets hold the run under the requests-per-minute and tokens-per-minute limits; a
request costs one request and its estimated tokens (prompt estimate plus ``max_tokens x n``,
the way providers count it). A cache hit never reaches this module.

The limits come from the config (``rpm``/``tpm``) or, when a limit is not configured, from the
``x-ratelimit-limit-*`` headers of the server's answers (:meth:`RateLimits.observe`, called for
every answer and every 429); when both exist the lower one holds. Until the first reply
arrives nothing is known, so the run begins small: at most :data:`START_IN_FLIGHT` requests
go out until then (:meth:`RateLimits.replied`), and only then do the workers open up, paced by
whatever the headers said. A learned limit is paced a little below what the server advertises
(:data:`LEARNED_SHARE`): the server counts arrivals, and the loopback or the network moves
them by a few milliseconds, enough to put one request too many into a window of a second.
A ``remaining`` header without a ``limit`` header says nothing about the rate and is ignored.

Pacing, not bursting: each bucket is an aiolimiter ``AsyncLimiter`` that holds at most
:data:`BURST_SECONDS` of credit, so requests go out at the steady rate even when the server
would take a minute's worth at once. Providers enforce their per-minute limits over much shorter
windows, so a client that empties a minute of quota in its first seconds meets 429s there. For
the same reason a bucket starts without credit, and loses the credit it saved during a 429 pause.
``x-ratelimit-remaining-*`` with ``x-ratelimit-reset-*`` tells how deep the server's bucket is,
and the burst stays within half of it.

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

from aiolimiter import AsyncLimiter

from ..errors import ConfigError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_HEADER_PREFIX = "x-ratelimit-"
_KINDS = ("requests", "tokens")

#: Seconds of credit a bucket may hold: the largest burst the client sends.
BURST_SECONDS = 0.25

#: Requests in flight before the first reply (and its rate-limit headers) has arrived.
START_IN_FLIGHT = 4

#: The share of an advertised (learned) limit the client paces at.
LEARNED_SHARE = 0.97


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
    """``per_minute`` units a minute at a steady pace, holding ``burst`` seconds of credit.

    An :class:`aiolimiter.AsyncLimiter` whose period is the burst, not the minute: a limiter of
    ``max_rate = per_minute`` per 60 s would let a whole minute of quota out at once, which
    providers (who enforce their per-minute limits over much shorter windows) answer with 429s.
    A cost bigger than the credit (one long prompt against a small TPM) is taken in steps of the
    credit, so it waits as long as its size asks and the rate holds for any mix of sizes.
    """

    def __init__(
        self, per_minute: float, burst: float = BURST_SECONDS, *, spent: float = 0.0
    ) -> None:
        self.per_minute = per_minute
        self.burst = burst
        self.limiter = AsyncLimiter(per_minute / 60.0 * burst, burst)
        # No credit to start with (see RateLimits): the first request waits 1/rate.
        self.drain(spent)

    def drain(self, spent: float = 0.0) -> None:
        """Take away the credit, and ``spent`` more: what was sent before this bucket knew."""
        # aiolimiter has no public way to start a limiter partly used; its level is the
        # credit used, leaking at the rate.
        limiter = self.limiter
        limiter._level = limiter.max_rate + spent
        limiter._last_check = asyncio.get_running_loop().time()
        limiter._wake_next()  # re-time the next waiter's wake-up for the new level

    async def acquire(self, cost: float) -> None:
        """Wait until ``cost`` units may be spent, and spend them."""
        limiter = self.limiter
        while cost > 0:
            step = min(cost, limiter.max_rate)
            await limiter.acquire(step)
            cost -= step

    def reshape(self, per_minute: float, burst: float) -> None:
        """Change the rate or the burst, for the requests already waiting too.

        The limiter is changed in place: a new limiter would let the waiters of the old one
        go at the old pace while new requests go at the new one, twice the rate for a while.
        """
        if (per_minute, burst) != (self.per_minute, self.burst):
            self.per_minute, self.burst = per_minute, burst
            limiter = self.limiter
            limiter.max_rate = per_minute / 60.0 * burst
            limiter.time_period = burst
            limiter._rate_per_sec = per_minute / 60.0
            self.drain()


class RateLimits:
    """The requests and tokens buckets plus the cool-down; one per run, made inside the loop.

    Args:
        rpm: requests per minute from the config, or None to learn it from the server.
        tpm: tokens per minute from the config, or None to learn it from the server.
    """

    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self.rpm, self.tpm = rpm, tpm
        self.configured: dict[str, float | None] = {"requests": rpm, "tokens": tpm}
        self.learned: dict[str, float] = {}
        self.buckets: dict[str, PacedBucket] = {
            # Starting without credit: a burst at the start is what a server that enforces
            # its limit over one second answers with 429s.
            kind: PacedBucket(limit)
            for kind, limit in self.configured.items()
            if limit
        }
        self.cooldown = CoolDown()
        # Begin small: until a reply tells the limits, only a few requests go out (unless both
        # limits are configured: then nothing is left to learn).
        self.opened = asyncio.Event()
        if rpm and tpm:
            self.opened.set()
        # What went out before the first reply: a bucket learned from it starts that much used.
        self._probes = {"requests": 0, "tokens": 0}

    def check_request(self, tokens: int) -> None:
        """Raise ConfigError for a request that the configured TPM limit can never let through."""
        if self.tpm and tokens > self.tpm:
            raise ConfigError(
                f"one request is estimated at {tokens} tokens, more than the tpm limit "
                f"({self.tpm:g}): raise --tpm or lower max_tokens / n"
            )

    async def acquire(self, tokens: int) -> None:
        """Wait for the cool-down and for this request's share of both buckets."""
        if not self.opened.is_set():
            if self._probes["requests"] >= START_IN_FLIGHT:
                await self.opened.wait()
            else:
                self._probes["requests"] += 1
                self._probes["tokens"] += tokens
        while True:
            await self._pause()
            for kind, cost in (("requests", 1), ("tokens", tokens)):
                bucket = self.buckets.get(kind)
                if bucket is not None:
                    await bucket.acquire(cost)
            # A 429 that arrived while this worker waited in the buckets: wait out the pause,
            # then queue again, so the workers leave it at the paced rate, not all at once.
            if self.cooldown.remaining <= 0:
                return

    def replied(self) -> None:
        """A request came back (an answer, a 429 or a failure): open up after the first.

        Call :meth:`observe` with a reply's headers before, so that the workers let through
        now are paced by what they said.
        """
        self.opened.set()

    async def _pause(self) -> None:
        # A plain sleep, not an Event: the pause can grow while we sleep; re-check on waking.
        paused = False
        while (left := self.cooldown.remaining) > 0:  # noqa: ASYNC110
            await asyncio.sleep(left)
            paused = True
        if paused:
            # The credit saved up during the pause is not the server's to give: it just said
            # no. Leave the pause at the paced rate, without a burst into the new window.
            for bucket in self.buckets.values():
                bucket.drain()

    def observe(self, headers: Mapping[str, str]) -> None:
        """Learn from the ``x-ratelimit-*`` headers of an answer or a 429.

        ``limit`` sets the rate of a limit that is not configured (or is configured higher);
        ``remaining`` plus ``reset`` (time until the server's bucket is full again) x the rate
        tells how deep the server's bucket is, and the client's burst stays within half of it.
        """
        self.opened.set()  # a reply: the run opens up, paced by what it says
        found: dict[str, str] = {}
        for name, value in headers.items():
            if name[:12].lower() == _HEADER_PREFIX:
                found[name.lower()] = value
        if not found:
            return
        for kind in _KINDS:
            limit = _number(found.get(f"x-ratelimit-limit-{kind}"))
            bucket = self.buckets.get(kind)
            rate = bucket.per_minute if bucket is not None else None
            if limit:
                configured = self.configured[kind]
                # A configured limit the server allows holds as it is; otherwise the
                # advertised one, a little below (LEARNED_SHARE).
                rate = configured if configured and configured <= limit else limit * LEARNED_SHARE
                if rate != configured:
                    self.learned[kind] = rate
            if rate is None:
                continue
            burst = bucket.burst if bucket is not None else BURST_SECONDS
            remaining = _number(found.get(f"x-ratelimit-remaining-{kind}"))
            reset = found.get(f"x-ratelimit-reset-{kind}")
            refill = parse_duration(reset) if reset is not None else None
            if remaining is not None and refill is not None:
                depth = remaining * 60.0 / rate + refill
                # Bursting more than half the server's bucket leaves no room for the jitter of
                # arrivals. Only a clearly smaller depth reshapes the bucket (which starts it
                # afresh), so the noise of successive headers does not.
                if depth / 2 < burst * 0.8:
                    burst = depth / 2
            if bucket is None:
                self.buckets[kind] = PacedBucket(rate, burst, spent=self._probes[kind])
            else:
                bucket.reshape(rate, burst)
