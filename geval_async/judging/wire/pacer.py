"""The pacer: one limit (requests or tokens a minute) held as a steady rate, our own algorithm.

A :class:`Pacer` is a generic cell rate algorithm (GCRA, the "virtual scheduling" form): it
keeps ``due``, the time by which everything sent so far is paid for at the rate. A send may
leave once the clock is within the tolerance of ``due`` (:data:`CATCH_UP_SECONDS`, plus a
carry), and moves ``due`` on by its cost from when it actually left, never from the past. So

* a send that left late does not let the next one catch up: no burst after a stall, and idle
  time saves no credit (``due`` never lags the clock);
* a cost of many units (one long prompt against the TPM) makes the next send wait as long as
  its size asks, whatever the mix of sizes, and is admitted even when it exceeds a second's
  worth (the admission looks at what was sent before, the charge comes after);
* the rate can change in place (a learned limit, the margin going or coming back): what is
  owed is kept in units and re-timed at the new rate, so the waiting sends go at the new pace;
* a refused request's cost goes back (a 429: the server did not count it), and the sends
  made before the limit was known (a learned limit's probes) are owed from the start.

Why not aiolimiter (the design card's limiter). ``AsyncLimiter`` is a leaky bucket whose
public API is ``acquire(amount)`` and ``has_capacity(amount)``: it waits *before* a send until
the cost fits under the capacity, refuses a cost above the capacity (``ValueError``), has no
way to give a cost back, to start owing, or to change its rate with sends waiting; and its
capacity is credit saved while idle, spent at once. Paced through that API alone, each limit
an ``AsyncLimiter`` of one second's worth, a run bursts at its start and after every lull;
against ``bench/stub.py``'s limit over any one second that is 429s, each a pause of every
worker: 29 in 240 requests at 600 a minute, against 2 for this pacer on the same loaded machine
(``bench/pacers.py``, docs/benchmarks.md section 1, "The pacer against aiolimiter's public
API"). Given room for one request only, an ``AsyncLimiter`` spaces exactly but cannot catch up
a timer that woke late, nor take a request larger than its room. Until issue 18 the buckets
were aiolimiters driven through their private ``_level`` and ``_rate_per_sec``; this module is
that algorithm, owned openly (a few lines of arithmetic on the loop's clock), with no third
party's internals to break in a release.

The clock is the running loop's ``time()`` (the fake-clock tests patch it); the pacer never
sleeps: :class:`~.limits.RateLimits` asks :meth:`Pacer.wait` and sleeps, interruptibly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

#: Seconds a send may leave ahead of its paced time, to make up for the previous one leaving
#: late by as much (an event loop wakes a timer a little late, often by a millisecond; at 100
#: requests a second, losing that every time would cost a tenth of the rate). Any 11 sends
#: paced at 99 % of 10 a second still span 1.0101 s less this.
CATCH_UP_SECONDS = 0.002

#: The catch-up allowed while the server says it has a second's worth of room to spare.
SPARE_CATCH_UP_SECONDS = 0.05


class Pacer:
    """``per_minute`` units a minute (times ``share``), each send spaced from the last by its cost.

    Any window of W seconds carries at most ``(W + catch-up + carry) x rate`` units plus one
    send's cost.

    Args:
        per_minute: the limit honoured.
        share: the fraction of it paced at while a send must leave room for jitter (a margin).
        spent: units sent before this pacer knew, paid for first (a learned limit's probes).
        carry: seconds of credit kept for a send that another limit held back.
        clock: the time in seconds (the running loop's ``time`` unless given).
    """

    def __init__(
        self,
        per_minute: float,
        share: float,
        *,
        spent: float = 0.0,
        carry: float = 0.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.per_minute = per_minute
        self.share = share
        self.carry = carry
        # The server's last answer said it could take a second's worth at once, and no 429
        # has come (RateLimits.observe): no margin, and more catch-up.
        self.spare = False
        self.clock = clock if clock is not None else asyncio.get_running_loop().time
        self.rate = self._rate()
        # No credit at the start: the carry is kept for later, not given away at once.
        self.due = self.clock() + spent / self.rate + carry

    def _rate(self) -> float:
        return self.per_minute / 60.0 * (1.0 if self.spare else self.share)

    @property
    def tolerance(self) -> float:
        """Seconds ahead of ``due`` a send may leave."""
        return (SPARE_CATCH_UP_SECONDS if self.spare else CATCH_UP_SECONDS) + self.carry

    @property
    def owed(self) -> float:
        """Units sent and not yet paid for by the rate (0 when idle)."""
        return max(0.0, self.due - self.clock()) * self.rate

    def reshape(self, per_minute: float, spare: bool) -> None:
        """Pace at ``per_minute`` (without the margin if ``spare``), the waiting sends too."""
        if (per_minute, spare) != (self.per_minute, self.spare):
            owed = self.owed  # at the old rate, up to now
            self.per_minute, self.spare = per_minute, spare
            self.rate = self._rate()
            self.due = self.clock() + owed / self.rate

    def wait(self) -> float:
        """Seconds until the next send may leave (0: now)."""
        return max(0.0, self.due - self.tolerance - self.clock())

    def charge(self, cost: float) -> None:
        """A send of ``cost`` units leaves now."""
        self.due = max(self.due, self.clock()) + cost / self.rate

    def refund(self, cost: float) -> None:
        """Give back a send's ``cost``: the server refused it (a 429) and did not count it."""
        # Not before now: a refund is the slot back, not credit for a burst.
        self.due = max(self.clock(), self.due - cost / self.rate)
