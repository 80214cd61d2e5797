"""Client-side rate limits, learned from the server when not configured, and the 429 cool-down.

Two limits hold the run under the requests-per-minute and tokens-per-minute limits; a request
costs one request and its estimated tokens (prompt estimate plus ``max_tokens x n``, the way
providers count it). A cache hit never reaches this module.

Pacing, not bursting. Providers enforce their per-minute limits over much shorter windows
(some over any one second), so a limit is honoured as a steady rate. Each
limit is an :class:`aiolimiter.AsyncLimiter`, a leaky bucket, used through its public API
only (``acquire``, ``has_capacity``, ``max_rate``, ``time_period``: a private name could change
in any release), with a small bucket: room for one request (the requests
limit) or for the largest request so far (the tokens limit), plus what the rate earns in
:data:`CATCH_UP_SECONDS`. Such a bucket spaces sends by their cost: it stores no idle credit
beyond that room, so nothing bursts at the start or after a lull; and the sliver of room past
one request lets a send whose timer woke a little late (the event loop rounds its sleeps up to
the millisecond) be followed on time, so a late wake-up costs no rate. The tokens bucket also
keeps :data:`TOKENS_CARRY_SECONDS` for the long prompt after a short one. A cost larger than a
bucket (the requests sent before a limit was learned, owed to it) is paid in pieces.

One lock takes the sends through both limits in turn, so a request that waited for tokens
does not leave on the heels of the one before; the requests limit is charged last, when the
request leaves, so its spacing is the spacing the server sees. The pace is a little below the
limit (:data:`CONFIGURED_SHARE`): the server counts arrivals, and the loopback, the network or
a loaded machine moves them by a few milliseconds, enough to put one request too many into a
server's second; each such 429 pauses every worker, which costs far more than the margin. The
margin goes while the server's ``x-ratelimit-remaining-*`` says it could take at least a
second's worth at once (a token bucket with room, like the simulated judge's: a few
milliseconds of bunching cannot overflow it, so the pace is the full limit and the bucket
holds :data:`SPARE_CATCH_UP_SECONDS` of catch-up), and comes back for good at the first 429. A
server that counts over one second never says so: after it admitted a request, at most a
second's worth less one remains.

The limits come from the config (``rpm``/``tpm``) or, when a limit is not configured, from the
``x-ratelimit-limit-*`` headers of the server's answers (:meth:`RateLimits.observe`, called for
every answer and every 429); when both exist the lower one holds. Until the first reply
arrives nothing is known, so the run begins small: at most :data:`START_IN_FLIGHT` requests
go out until then (:meth:`RateLimits.replied`), and only then do the workers open up, paced by
whatever the headers said; a learned limit is paced further below what the server advertises
(:data:`LEARNED_SHARE`), as those first requests went out unpaced, and they are owed to it
first. A ``remaining`` header without a ``limit`` header says nothing about the rate and is
ignored.

A limiter's rate and bucket are fixed when it is made, so a limit that changes mid-run (a
learned figure, the margin going or coming back, a request larger than any before against the
TPM) gets a new limiter, made at the next send. The new one is first charged what the last
send still owes at the old rate, so the change makes no burst.

A 429 pauses every worker, not just the one that got it: all of them wait on one shared
:class:`CoolDown` until the time the server asked for (:mod:`.server_waits` reads it), and
after the pause they leave at the paced rate, not all at once. Without that, N workers would
each discover the limit on their own and hit the server again together (a thundering herd).
A bucket takes no cost back, so the refused request's charge stays: at most one slot a 429.

A stop (Ctrl-C, SIGTERM, ``--max-cost``) ends every wait here at once (a wait for a limit
that cannot last beyond :data:`STOP_WITHIN_SECONDS` ends first). A learned limit no
account has (below one request a minute, or one request's tokens) is ignored with a warning.

Limiters and cool-down belong to one event loop: :class:`RateLimits` is made inside the
running loop, and it makes its limiters there.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator, Mapping

from aiolimiter import AsyncLimiter
from multidict import CIMultiDict, CIMultiDictProxy

from ...errors import ConfigError

_HEADER_PREFIX = "x-ratelimit-"
_KINDS = ("requests", "tokens")
# Header mappings that look names up without regard to case (aiohttp's), and the headers
# observe() reads.
_CASE_FREE = (CIMultiDictProxy, CIMultiDict)
_READ = tuple(
    f"{_HEADER_PREFIX}{part}-{kind}" for part in ("limit", "remaining") for kind in _KINDS
)
_FLOOR_WORDS = {"requests": "one request", "tokens": "the tokens of one request"}

#: Seconds of the rate a bucket holds beyond one request: a send whose timer woke up to this
#: late (an event loop rounds its sleeps up to the millisecond) is caught up by the next one.
#: Small against the margin: any second then carries at most one request more than the rate's
#: share, which the margin's 1 % leaves room for at 600 requests a minute and above.
CATCH_UP_SECONDS = 0.002

#: The catch-up allowed while the server says it has a second's worth of room to spare.
SPARE_CATCH_UP_SECONDS = 0.05

#: Seconds of tokens the tokens bucket holds beyond the largest request: a short prompt (fewer
#: tokens than a request's share of the TPM) leaves them to the long one after it, so a plan of
#: mixed prompt sizes uses the whole TPM, and a send held back by a busy machine is caught up.
#: A server's tokens limit counts a whole minute, or a second's worth at once (OpenAI's TPM
#: bucket): a tenth of a second's worth of bunching stays well inside it. Requests keep none.
TOKENS_CARRY_SECONDS = 0.1

# What each limit's bucket holds before the first request: one request, or the tokens carry
# (the largest request's tokens are added as requests come).
_ROOM = {"requests": {"unit": 1.0}, "tokens": {"unit": 0.0, "carry": TOKENS_CARRY_SECONDS}}

#: A wait for a limit this short is not cut by a stop: the stop takes effect when it ends.
STOP_WITHIN_SECONDS = 0.05

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


class Limit:
    """One limit (requests or tokens a minute) as an :class:`~aiolimiter.AsyncLimiter`.

    Args:
        per_minute: the limit honoured.
        share: the fraction of it paced at while a send must leave room for jitter (a margin).
        unit: one request's cost, the room the bucket keeps (1, or the largest request's tokens).
        carry: seconds of the rate the bucket holds beyond that (:data:`TOKENS_CARRY_SECONDS`).
        owed: units sent before this limit was known, paid for first (a learned limit's probes).
    """

    def __init__(
        self,
        per_minute: float,
        share: float,
        *,
        unit: float = 1.0,
        carry: float = 0.0,
        owed: float = 0.0,
    ) -> None:
        self.per_minute, self.share, self.unit, self.carry = per_minute, share, unit, carry
        # The server's last answer said it could take a second's worth at once, and no 429
        # has come (RateLimits.observe): no margin, and more catch-up.
        self.spare = False
        self.clock = asyncio.get_running_loop().time
        # What the last send (or the probes) still owes, as of ``owed_at``: charged to a new
        # limiter before anything else, so that a change of terms is no burst. The carry counts
        # as spent: it is room for later, not credit given away at once.
        self.owed, self.owed_at = owed + carry * self.rate, self.clock()
        self.limiter: AsyncLimiter | None = None  # made at the next send
        self.version = 0  # one more at each change of terms: a send that waited goes again

    @property
    def rate(self) -> float:
        """Units a second paced at."""
        return self.per_minute / 60.0 * (1.0 if self.spare else self.share)

    def reshape(self, per_minute: float, spare: bool) -> None:
        """Pace at ``per_minute`` (without the margin if ``spare``) from the next send on."""
        if (per_minute, spare) != (self.per_minute, self.spare):
            self._renew()
            self.per_minute, self.spare = per_minute, spare

    def fit(self, cost: float) -> None:
        """Make room for a request of ``cost`` units, the largest so far."""
        if cost > self.unit:
            self._renew()
            self.unit = cost

    def _renew(self) -> None:
        """Let the next send make a new limiter on the new terms, owing what is left now."""
        now = self.clock()
        self.owed = max(0.0, self.owed - (now - self.owed_at) * self.rate)
        self.owed_at = now
        self.limiter = None
        self.version += 1

    def bucket(self) -> tuple[AsyncLimiter, Iterator[float]]:
        """The limiter to acquire from, and what it is owed first, in pieces that fit in it."""
        owed = 0.0
        if self.limiter is None:
            catch_up = SPARE_CATCH_UP_SECONDS if self.spare else CATCH_UP_SECONDS
            rate = self.rate
            room = self.unit + (catch_up + self.carry) * rate
            self.limiter = AsyncLimiter(room, room / rate)
            owed = max(0.0, self.owed - (self.clock() - self.owed_at) * rate)
        return self.limiter, _split(owed, self.limiter.max_rate)

    def sent(self, cost: float) -> None:
        """A send of ``cost`` units leaves now."""
        self.owed, self.owed_at = cost + self.carry * self.rate, self.clock()


def _split(total: float, room: float) -> Iterator[float]:
    while total > room:
        yield room
        total -= room
    if total > 0:
        yield total


def check_request_fits(tokens: int, tpm: float | None) -> None:
    """Raise ConfigError for a request that a TPM limit of ``tpm`` can never let through (the
    run's check, and ``--dry-run``'s, which says the same before anything is sent)."""
    if tpm and tokens > tpm:
        raise ConfigError(
            f"one request is estimated at {tokens} tokens, more than the tpm limit "
            f"({tpm:g}): raise --tpm or lower max_tokens / n"
        )


class RateLimits:
    """The requests and tokens limits plus the cool-down; one per run, made inside the loop.

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
        self.limits: dict[str, Limit] = {
            kind: Limit(limit, CONFIGURED_SHARE, **_ROOM[kind])
            for kind, limit in self.configured.items()
            if limit
        }
        self.cooldown = CoolDown()
        # One send at a time through the limits, in the order the workers asked: each one's
        # spacing is measured from the one before it actually left.
        self._turn = asyncio.Lock()
        # Begin small: until a reply tells the limits, only a few requests go out (unless both
        # limits are configured: then nothing is left to learn).
        self.opened = asyncio.Event()
        if rpm and tpm:
            self.opened.set()
        # What went out before the first reply: a limit learned from it starts that much owed.
        self._probes = {"requests": 0, "tokens": 0}

    def check_request(self, tokens: int) -> None:
        """Raise ConfigError for a request that the configured TPM limit can never let through."""
        check_request_fits(tokens, self.tpm)

    def clear(self, tokens: int) -> bool:
        """Whether a request of ``tokens`` may go at once, without :meth:`acquire`: no limit
        configured or learned, the run open and not paused (then it is counted as acquire
        would count it). Spares the usual unlimited run a coroutine or two a request."""
        if self.limits or not self.opened.is_set():
            return False
        cooldown = self.cooldown
        if cooldown.until and cooldown.remaining > 0:  # 0.0: the run was never paused
            return False
        if tokens > self.largest:
            self.largest = tokens
        return True

    async def acquire(self, tokens: int) -> None:
        """Wait for the cool-down and for this request's turn in both limits.

        Returns at once when the run's ``stop`` is set; the wait it cuts short charges nothing.
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
        if not self.limits:
            await self._paused()
            return
        costs = {"tokens": tokens, "requests": 1}
        async with self._turn:
            # Tokens first, requests last: the requests limit is charged as the request leaves.
            # A charge made under terms that changed while it waited (a 429 paused the run, a
            # header changed a rate) does not count: that limit is paid again on the new terms.
            paid: dict[str, int] = {}
            while True:
                if await self._paused():
                    return
                for kind in ("tokens", "requests"):
                    limit = self.limits.get(kind)
                    if limit is None or paid.get(kind) == limit.version:
                        continue
                    if kind == "tokens":
                        limit.fit(tokens)
                    version = limit.version
                    if not await self._pay(limit, costs[kind]):
                        return
                    paid[kind] = version
                if self.cooldown.remaining > 0:
                    paid.clear()  # sent after the pause, paced from then
                elif all(paid.get(k) == limit.version for k, limit in self.limits.items()):
                    break
            for kind, limit in self.limits.items():
                limit.sent(costs[kind])

    async def _pay(self, limit: Limit, cost: float) -> bool:
        """Charge ``cost`` (and what is owed) to ``limit``; False if the run stopped first."""
        limiter, owed = limit.bucket()
        for piece in (*owed, *_split(cost, limiter.max_rate)):
            # The longest this piece can wait: the bucket drains it in its own time. A wait that
            # short is awaited as it is (a stop meanwhile takes effect as it ends); a longer one
            # races the stop, which costs two tasks a send, felt at hundreds of sends a second.
            if piece * limiter.time_period / limiter.max_rate <= STOP_WITHIN_SECONDS:
                await limiter.acquire(piece)
                continue
            acquiring = asyncio.ensure_future(limiter.acquire(piece))
            stopping = asyncio.ensure_future(self.stop.wait())
            try:
                await asyncio.wait((acquiring, stopping), return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
                stopped = not acquiring.done()
                if stopped:
                    acquiring.cancel()  # leaves the limiter's queue uncharged
            if stopped:
                return False
            acquiring.result()
        return True

    def refused(self, tokens: int, seconds: float) -> None:
        """A 429: pause every worker for ``seconds``; the margin is back for good."""
        self.cooldown.pause(seconds)
        for limit in self.limits.values():
            limit.reshape(limit.per_minute, spare=False)

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

    async def _paused(self) -> bool:
        """Wait out the cool-down; whether the run stopped first."""
        # A plain sleep, not an Event: the pause can grow while we sleep; re-check on waking.
        while (left := self.cooldown.remaining) > 0:  # noqa: ASYNC110
            if await self._stopped_within(left):
                return True
        return self.stop.is_set()

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
            # look at every header of every answer.
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
            paced = self.limits.get(kind)
            if paced is None:
                room = _ROOM[kind] | ({"unit": float(self.largest)} if kind == "tokens" else {})
                paced = self.limits[kind] = Limit(
                    limit, LEARNED_SHARE, owed=self._probes[kind], **room
                )
            remaining = _number(found.get(f"x-ratelimit-remaining-{kind}"))
            spare = not self.cooldown.pauses and remaining is not None and remaining >= limit / 60.0
            paced.reshape(limit, spare)
