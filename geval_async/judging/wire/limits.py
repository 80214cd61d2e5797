"""Client-side rate limits, learned from the server when not configured, and the 429 cool-down.

Two paced buckets hold the run under the requests-per-minute and tokens-per-minute limits; a
request costs one request and its estimated tokens (prompt estimate plus ``max_tokens x n``,
the way providers count it). A cache hit never reaches this module.

Pacing, not bursting. Providers enforce their per-minute limits over much shorter windows
(the stub of ``bench/`` over any one second), so a limit is honoured as a steady rate: each
send leaves at least its cost's share of a minute after the send before it actually left,
never in a burst, not at the start and not after a stall. Each limit is a
:class:`~.pacer.Pacer`, a GCRA with :data:`~.pacer.CATCH_UP_SECONDS` of tolerance (our own:
its module says why aiolimiter's public API cannot pace this way). One lock takes
the sends through both buckets at once, so a request that waited for tokens does not leave on
the heels of the one before. The pace
is a little below the limit (:data:`CONFIGURED_SHARE`): the server counts arrivals, and the
loopback, the network or a loaded machine moves them by a few milliseconds, enough to put
one request too many into a server's second; each such 429 pauses every worker, which costs
far more than the margin. The margin goes while the server's ``x-ratelimit-remaining-*``
says it could take at least a second's worth at once (a token bucket with room, like the
simulated judge's: a few milliseconds of bunching cannot overflow it, so the pace is the full
limit and a late send may be caught up by :data:`~.pacer.SPARE_CATCH_UP_SECONDS`), and comes
back for good at the first 429. A server that counts over one second never says so: after it
admitted a request, at most a second's worth less one remains.

The limits come from the config (``rpm``/``tpm``) or, when a limit is not configured, from the
``x-ratelimit-limit-*`` headers of the server's answers (:meth:`RateLimits.observe`, called for
every answer and every 429); when both exist the lower one holds. Until the first reply
arrives nothing is known, so the run begins small: at most :data:`START_IN_FLIGHT` requests
go out until then (:meth:`RateLimits.replied`), and only then do the workers open up, paced by
whatever the headers said; a learned limit is paced further below what the server advertises
(:data:`LEARNED_SHARE`), as those first requests went out unpaced. A ``remaining`` header
without a ``limit`` header says nothing about the rate and is ignored.

A 429 pauses every worker, not just the one that got it: all of them wait on one shared
:class:`CoolDown` until the time the server asked for (:mod:`.server_waits` reads it), and
after the pause they leave at the paced rate, not all at once. Without that, N workers would
each discover the limit on their own and hit the server again together (a thundering herd).
The refused request's costs go back to the buckets (:meth:`RateLimits.refused`).

A stop (Ctrl-C, SIGTERM, ``--max-cost``) ends every wait here at once. A learned limit no
account has (below one request a minute, or one request's tokens) is ignored with a warning.

Buckets and cool-down belong to one event loop; create them inside the running loop.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping

from multidict import CIMultiDict, CIMultiDictProxy

from ...errors import ConfigError
from .pacer import Pacer

_HEADER_PREFIX = "x-ratelimit-"
_KINDS = ("requests", "tokens")
# Header mappings that look names up without regard to case (aiohttp's), and the headers
# observe() reads.
_CASE_FREE = (CIMultiDictProxy, CIMultiDict)
_READ = tuple(
    f"{_HEADER_PREFIX}{part}-{kind}" for part in ("limit", "remaining") for kind in _KINDS
)
_FLOOR_WORDS = {"requests": "one request", "tokens": "the tokens of one request"}

#: Seconds of tokens kept for a request that the requests limit held back: a short prompt
#: (fewer tokens than a request's share of the TPM) leaves them to the long one after it, so
#: a plan of mixed prompt sizes uses the whole TPM. Requests keep none (no bunching).
TOKENS_CARRY_SECONDS = 0.1
_CARRY = {"requests": 0.0, "tokens": TOKENS_CARRY_SECONDS}

#: The share of a configured limit the client paces at (with a margin).
CONFIGURED_SHARE = 0.99

#: Requests in flight before the first reply (and its rate-limit headers) has arrived.
START_IN_FLIGHT = 4

#: The share of an advertised (learned) limit the client paces at (with a margin).
LEARNED_SHARE = 0.97


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
        self.pauses = 0  # how many 429s paused the run

    @property
    def remaining(self) -> float:
        """Seconds left in the current pause (0 when none)."""
        return max(0.0, self.until - self._loop.time())

    def pause(self, seconds: float) -> None:
        """Pause every worker for ``seconds`` from now (an earlier, longer pause stands)."""
        self.until = max(self.until, self._loop.time() + seconds)
        self.pauses += 1


def check_request_fits(tokens: int, tpm: float | None) -> None:
    """Raise ConfigError for a request that a TPM limit of ``tpm`` can never let through (the
    run's check, and ``--dry-run``'s, which says the same before anything is sent)."""
    if tpm and tokens > tpm:
        raise ConfigError(
            f"one request is estimated at {tokens} tokens, more than the tpm limit "
            f"({tpm:g}): raise --tpm or lower max_tokens / n"
        )


class RateLimits:
    """The requests and tokens buckets plus the cool-down; one per run, made inside the loop.

    Args:
        rpm: requests per minute from the config, or None to learn it from the server.
        tpm: tokens per minute from the config, or None to learn it from the server.
    """

    def __init__(
        self,
        rpm: float | None,
        tpm: float | None,
        *,
        stop: asyncio.Event | None = None,
        warn: Callable[[str], None] | None = None,
        max_wait: float = math.inf,
    ) -> None:
        self.rpm, self.tpm = rpm, tpm
        # A stop ends every wait here at once (the caller looks at it after acquire()).
        self.stop = stop if stop is not None else asyncio.Event()
        self.warn = warn if warn is not None else (lambda line: None)
        self.largest = 0  # the most tokens one request asked for so far
        self.max_wait = max_wait
        self._warned: set[str] = set()
        self.configured: dict[str, float | None] = {"requests": rpm, "tokens": tpm}
        self.learned: dict[str, float] = {}
        self.buckets: dict[str, Pacer] = {
            kind: Pacer(limit, CONFIGURED_SHARE, carry=_CARRY[kind])
            for kind, limit in self.configured.items()
            if limit
        }
        self.cooldown = CoolDown()
        # One send at a time through the buckets, in the order the workers asked: each one's
        # spacing is measured from the one before it actually left.
        self._turn = asyncio.Lock()
        # Begin small: until a reply tells the limits, only a few requests go out (unless both
        # limits are configured: then nothing is left to learn).
        self.opened = asyncio.Event()
        if rpm and tpm:
            self.opened.set()
        # What went out before the first reply: a bucket learned from it starts that much used.
        self._probes = {"requests": 0, "tokens": 0}

    def check_request(self, tokens: int) -> None:
        """Raise ConfigError for a request that the configured TPM limit can never let through."""
        check_request_fits(tokens, self.tpm)

    def clear(self, tokens: int) -> bool:
        """Whether a request of ``tokens`` may go at once, without :meth:`acquire`: no limit
        configured or learned, the run open and not paused (then it is counted as acquire
        would count it). Spares the usual unlimited run a coroutine or two a request."""
        if self.buckets or not self.opened.is_set():
            return False
        cooldown = self.cooldown
        if cooldown.until and cooldown.remaining > 0:  # 0.0: the run was never paused
            return False
        if tokens > self.largest:
            self.largest = tokens
        return True

    async def acquire(self, tokens: int) -> None:
        """Wait for the cool-down and for this request's turn in both buckets.

        Returns at once when the run's ``stop`` is set (then nothing is charged).
        """
        self.largest = max(self.largest, tokens)
        if not self.opened.is_set():
            if self._probes["requests"] >= START_IN_FLIGHT:
                await self._until(self.opened)
                if self.stop.is_set():
                    return
            else:
                self._probes["requests"] += 1
                self._probes["tokens"] += tokens
        if not self.buckets:
            await self._pause()
            return
        async with self._turn:
            # Both buckets at once (the longer of their waits, then both charged): a request
            # that passed the requests bucket and then waited for tokens would leave closer to
            # the next one than the requests rate allows.
            # Re-read after every sleep: a 429 may have paused the run, a header changed a rate.
            while (wait := self._wait()) > 0:  # noqa: ASYNC110
                if await self._stopped_within(wait):
                    return
            for kind, cost in (("requests", 1), ("tokens", tokens)):
                bucket = self.buckets.get(kind)
                if bucket is not None:
                    bucket.charge(cost)

    def _wait(self) -> float:
        if self.cooldown.pauses:
            # The server has refused at this pace: the margin is back, whatever it says.
            for bucket in self.buckets.values():
                bucket.reshape(bucket.per_minute, spare=False)
        ready = max(bucket.wait() for bucket in self.buckets.values())
        return max(self.cooldown.remaining, ready)

    def refused(self, tokens: int, seconds: float) -> None:
        """A 429: pause every worker for ``seconds``, and give the request's costs back.

        Servers do not count a request they refuse (OpenAI's buckets, the simulated judge,
        ``bench/stub.py``), so neither do the buckets: the retry after the pause takes the
        slot the refused request would have used, instead of one more behind it.
        """
        self.cooldown.pause(seconds)
        for kind, cost in (("requests", 1), ("tokens", tokens)):
            bucket = self.buckets.get(kind)
            if bucket is not None:
                bucket.refund(cost)

    def _plausible(self, kind: str, limit: float) -> bool:
        """Whether a learned limit can be a real account's (pacing by 1e-9 a minute would send
        nothing for good); says once when it is not, or when it paces one request further
        apart than ``max_wait``."""
        header = f"x-ratelimit-limit-{kind}: {limit:g}"
        floor = 1.0 if kind == "requests" else max(1.0, float(self.largest))
        if limit < floor:
            self._say_once(
                f"ignored {kind}",
                f"ignored {header}: below {_FLOOR_WORDS[kind]} a minute, which no account has; "
                "pacing without it",
            )
            return False
        spacing = 60.0 * (1.0 if kind == "requests" else self.largest) / limit
        if spacing > self.max_wait:
            self._say_once(
                f"slow {kind}",
                f"the server's {header} paces one request every {spacing:.0f} s (more than "
                f"[limits] max_wait, {self.max_wait:g} s): the run will be slow; Ctrl-C stops it",
            )
        return True

    def _say_once(self, key: str, line: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.warn(line)

    def replied(self) -> None:
        """A request came back (an answer, a 429 or a failure): open up after the first.

        Call :meth:`observe` with a reply's headers before, so that the workers let through
        now are paced by what they said.
        """
        self.opened.set()

    async def _pause(self) -> None:
        # A plain sleep, not an Event: the pause can grow while we sleep; re-check on waking.
        while (left := self.cooldown.remaining) > 0:  # noqa: ASYNC110
            if await self._stopped_within(left):
                return

    async def _stopped_within(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the run stops first; whether it stopped."""
        if self.stop.is_set():
            return True
        try:
            async with asyncio.timeout(seconds):
                await self.stop.wait()
        except TimeoutError:
            return False
        return True

    async def _until(self, event: asyncio.Event) -> None:
        """Wait for ``event`` or the run's stop, whichever comes first."""
        waiters = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(self.stop.wait())]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    def observe(self, headers: Mapping[str, str]) -> None:
        """Learn from the ``x-ratelimit-*`` headers of an answer or a 429.

        A ``limit`` sets the pace of a limit that is not configured, and of one configured
        higher than the server says: the server's figure is the one it enforces. A
        ``remaining`` of at least a second's worth of the limit lets the pace drop its margin
        (the server has room for a few milliseconds' bunching), until the first 429.
        """
        self.opened.set()  # a reply: the run opens up, paced by what it says
        found: dict[str, str] = {}
        if isinstance(headers, _CASE_FREE):
            # As aiohttp hands them over (looked up without regard to case): the four names
            # read below, each the last of its kind as the loop below keeps it, instead of a
            # look at every header of every answer (1 us an answer; 0.3 without rate headers).
            for name in _READ:
                values = headers.getall(name, None)
                if values:
                    found[name] = values[-1]
        else:
            for name, value in headers.items():
                if name[:12].lower() == _HEADER_PREFIX:
                    found[name.lower()] = value
        if not found:
            return
        for kind in _KINDS:
            limit = _number(found.get(f"x-ratelimit-limit-{kind}"))
            if not limit or not self._plausible(kind, limit):
                continue
            configured = self.configured[kind]
            if not configured or limit < configured:
                self.learned[kind] = limit
            else:
                limit = configured
            bucket = self.buckets.get(kind)
            if bucket is None:
                bucket = self.buckets[kind] = Pacer(
                    limit, LEARNED_SHARE, spent=self._probes[kind], carry=_CARRY[kind]
                )
            remaining = _number(found.get(f"x-ratelimit-remaining-{kind}"))
            spare = not self.cooldown.pauses and remaining is not None and remaining >= limit / 60.0
            # In place: the requests already waiting go at the new pace too.
            bucket.reshape(limit, spare)
