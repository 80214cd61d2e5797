"""Write-behind for the hot path: answers and claims committed in groups, off the event loop.

At thousands of answers a second, one sqlite transaction per answer (plus one to take and one
to let go of its claim) was most of the client's time, and while the loop waited on a commit
no request went out. The :class:`Writer` collects what the workers hand it and commits it in a
thread of its own: the answers in one cache transaction, then the claims to let go and to take
in one claims transaction (:mod:`.rows`: a few statements for the whole group). While one
group commits, the loop goes on sending and receiving, and the next group collects: the
slower the disk, the larger the groups (group commit). sqlite lets go of the GIL while it
writes, and diskcache gives each thread its own connection.

A commit costs much the same for 2 answers as for 10 (its statements, the pages every commit
writes: diskcache's count, the table's inner pages; the thread's wake-up and the loop's): in
one thread, 128 CPU us an answer in groups of 2, 95-108 in groups of 4, 81 in 8, 66-70 in 16.
So a young group waits for more answers while more requests are out than answers wait for
it, for at most 4 ms after its first answer; claims asked for (the producer waits for them)
send it at once. While the server has a queue, the wait costs no request: at ``stub+250``,
16 in flight, groups grew from 3.9-4.1 answers to 6.3-6.5 and the writer thread's CPU fell
from 0.19-0.21 to 0.14-0.19 ms a request, requests a second unchanged or higher
(docs/benchmarks.md, "Session 9: the store"). A group waits only while answers arrive less
than 2 ms apart on average (more than 500 a second): a real judge answering 16 requests in
flight in tenths of a second, 50-100 answers a second, would make each answer wait the whole
4 ms for a group that hardly grows, so there every group goes at once, as before.

The order is what makes it crash-safe. A worker waits for :meth:`Writer.release` of its
request, which resolves only after that request's answer (handed over before, with
:meth:`Writer.put`) is committed. So an answer is on disk before its item counts as done,
before its worker sends anything else, and before its claim is let go, so before another
process may ask for it again; a SIGKILL loses at most the answers of the group being
committed or gathered (below), which were neither counted nor released (the claims of a
dead process are taken over at once).

The claims are let go a little later than the answers are written: with the next claims the
run takes (the producer claims a batch of items as large as the pool of workers), or once
half a second or 512 keys have gathered, and when the run ends. Letting go at every commit was
a claims transaction for every group of answers (groups of 3-10 at ``stub+250``: 0.04-0.05 ms
of the writer's CPU a request, docs/benchmarks.md "The answers' own grouped write"). Until
then another process that wants one of those keys finds the claim held, and finds the answer
in the cache when it looks again (:mod:`.worker`, every 0.2 s), as it does now whenever it
asks while the answer is being written.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from queue import SimpleQueue
from typing import Any

from .cache import CachedResponse, JudgeCache
from .claims import Claims
from .progress import RunCounters

Claimed = list[tuple[bool, bool]]

# Claims of answers written are let go with the next claims taken, or at the latest when this
# many have gathered or this many seconds have passed since the last letting go.
_LET_GO_KEYS = 512
_LET_GO_AFTER = 0.5
# A group of answers waits at most this long after its first answer for more to join it (see
# the module's docstring).
_GATHER = 0.004
# ... and only while answers arrive closer together than this on average (an exponential
# mean of the gaps between them): a judge answering a few times a second would make every
# request wait the whole gathering time for a group that does not grow.
_GATHER_GAP = _GATHER / 2  # two more answers, on average, within the gathering time


@dataclass
class _Group:
    """What one commit writes, and who waits for it."""

    puts: list[tuple[CachedResponse, bool]] = field(default_factory=list)
    releases: list[tuple[str, asyncio.Future[None]]] = field(default_factory=list)
    claims: list[tuple[list[str], asyncio.Future[Claimed]]] = field(default_factory=list)
    # Filled by the commit:
    error: BaseException | None = None
    claimed: list[Claimed] = field(default_factory=list)
    settled: bool = False

    def __bool__(self) -> bool:
        return bool(self.puts or self.releases or self.claims)


class Writer:
    """Batches cache puts, claim releases and claims; one per run, made inside the loop.

    Use :meth:`close` when the run ends: it commits what is left and stops the thread.
    """

    def __init__(
        self, cache: JudgeCache, claims: Claims, *, counters: RunCounters | None = None
    ) -> None:
        self.cache, self.claims = cache, claims
        self._loop = asyncio.get_running_loop()
        # The run's requests in flight: while more are out than answers wait, a young group
        # waits for them (up to _GATHER). Without counters every group goes at once.
        self._counters = counters
        self._first = 0.0  # when the next group's first answer was handed over (loop time)
        self._last = 0.0  # when the last answer was handed over
        self._gap = 1.0  # the mean gap between answers handed over (seconds, exponential)
        self._gathering: asyncio.TimerHandle | None = None
        self._jobs: SimpleQueue[_Group | None] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._next = _Group()
        self._scheduled = False
        self._busy: _Group | None = None  # the group being committed in the thread
        self._closed = False
        self._error: BaseException | None = None
        # The writer thread's: claims whose answers are committed, not let go yet, and when
        # claims were last let go.
        self._letting_go: list[str] = []
        self._let_go_at = time.monotonic()

    def put(self, entry: CachedResponse, *, overwrite: bool) -> None:
        """Store ``entry`` in the next commit (await :meth:`release` of its key to know)."""
        puts = self._next.puts
        now = self._loop.time()
        self._gap += 0.2 * (min(now - self._last, 1.0) - self._gap)
        self._last = now
        if not puts:
            self._first = now
        puts.append((entry, overwrite))
        if self._gathering is not None and not self._worth_waiting(puts):
            self._hurry()
        self._schedule()

    def release(self, key: str) -> asyncio.Future[None]:
        """Let go of the claim on ``key`` once everything put before is committed (then, or
        with the next claims taken; see the module's docstring).

        The future resolves when everything put before is committed, and raises the commit's
        CacheError if the answers could not be written.
        """
        done: asyncio.Future[None] = self._loop.create_future()
        self._next.releases.append((key, done))
        self._schedule()
        return done

    async def claim(self, key: str) -> tuple[bool, bool]:
        """Claim ``key``; see :meth:`claim_many`."""
        return (await self.claim_many([key]))[0]

    async def claim_many(self, keys: Sequence[str]) -> Claimed:
        """Claim ``keys`` (see :meth:`Claims.claim`) with the next commit.

        Returns, for each, whether the claim was taken, and whether the cache holds an entry
        under the key by then (a holder may have stored the answer just before it let go).
        """
        taken: asyncio.Future[Claimed] = self._loop.create_future()
        self._next.claims.append((list(keys), taken))
        if self._gathering is not None:
            self._hurry()  # the producer waits for its claims: the group goes now
        self._schedule()
        return await taken

    def close(self) -> None:
        """Commit everything handed over so far and stop the thread (the run has ended).

        Waits for a commit under way; what was handed over after it is committed here.
        """
        self._closed = True
        self._hurry()
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
        if self._busy is not None:  # committed, but its waiters not told yet
            self._done(self._busy)
        group, self._next = self._next, _Group()
        if group:
            self._commit(group)
            self._settle(group)
        if self._letting_go:
            keys, self._letting_go = self._letting_go, []
            self.claims.release_many(keys)

    def _schedule(self) -> None:
        # call_soon runs after every callback already due in this turn: the workers woken by
        # the answers that arrived together all hand over their writes before the commit.
        if not self._scheduled and self._busy is None and not self._closed:
            self._scheduled = True
            self._loop.call_soon(self._start)

    def _hurry(self) -> None:
        """Hand the next group over without waiting out its gathering time."""
        if self._gathering is not None:
            self._gathering.cancel()
            self._gathering = None
            self._scheduled = False

    def _worth_waiting(self, puts: list[tuple[CachedResponse, bool]]) -> bool:
        """Whether answers waiting to be written are fewer than the requests still out, and
        answers come fast enough for more to join within the gathering time."""
        return (
            bool(puts)
            and self._counters is not None
            and self._gap < _GATHER_GAP
            and len(puts) < self._counters.in_flight
        )

    def _start(self) -> None:
        self._scheduled = False
        self._gathering = None
        if self._busy is not None or self._closed or not self._next:
            return
        group = self._next
        if not group.claims and self._worth_waiting(group.puts):
            due = self._first + _GATHER
            if self._loop.time() < due:  # young, and more answers coming than waiting
                self._scheduled = True
                self._gathering = self._loop.call_at(due, self._start)
                return
        self._next = _Group()
        self._busy = group
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="geval-writer", daemon=True)
            self._thread.start()
        self._jobs.put(group)

    def _serve(self) -> None:
        """The writer's thread: commit each group, then tell the loop."""
        while (group := self._jobs.get()) is not None:
            self._commit(group)
            # A closed loop raises RuntimeError: close() tells the waiters then.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._done, group)

    def _done(self, group: _Group) -> None:
        if group.settled:
            return
        self._busy = None
        self._settle(group)
        if self._next:
            self._schedule()

    def _commit(self, group: _Group) -> None:
        """Write one group (in the writer's thread: sqlite only, nothing of asyncio)."""
        # A failed commit fails every later waiter too: nothing after it is known to be stored.
        error = self._error
        if group.puts and error is None:
            try:
                self.cache.put_many(group.puts)
            except Exception as exc:  # noqa: BLE001 - handed to every waiter of this group
                error = self._error = exc
        # One claims transaction: let go (even when the write failed: nobody should wait on
        # an answer not coming), then take; when there is nothing to take, only now and then.
        self._letting_go += [key for key, _ in group.releases]
        wanted = [key for keys, _ in group.claims for key in keys]
        try:
            taken: list[bool] = []
            if wanted or self._let_go_due():
                release, self._letting_go = self._letting_go, []
                self._let_go_at = time.monotonic()
                taken = self.claims.settle(release, wanted)
            held = [key for key, took in zip(wanted, taken, strict=True) if took]
            stored = self.cache.stored(held) if held else set()
        except Exception as exc:  # noqa: BLE001
            group.error = error or exc
            return
        group.error = error
        results = iter(zip(taken, (key in stored for key in wanted), strict=True))
        group.claimed = [[next(results) for _ in keys] for keys, _ in group.claims]

    def _let_go_due(self) -> bool:
        return bool(self._letting_go) and (
            len(self._letting_go) >= _LET_GO_KEYS
            or time.monotonic() - self._let_go_at >= _LET_GO_AFTER
        )

    def _settle(self, group: _Group) -> None:
        """Hand the group's outcome to its waiters (on the loop).

        The claims of a waiter cancelled meanwhile are let go here, on the loop's thread.
        That never meets a commit of the writer's thread: a group is settled by
        :meth:`_done`, which the thread asks for once it has finished committing that group,
        and the next group is handed to it only after (``_busy`` holds until then); or by
        :meth:`close`, after the thread has ended. The claims' table is also used under a
        lock (:mod:`.claim_table`), so a worker's ``renew`` meanwhile waits its turn.
        ``tests/test_claims.py`` checks that those claims are let go.
        """
        group.settled = True
        for _, done in group.releases:
            _settle(done, group.error, None)
        for index, (keys, future) in enumerate(group.claims):
            if index >= len(group.claimed):
                _settle(future, group.error or RuntimeError("claims not written"), None)
            elif future.done():
                # Its worker is gone (cancelled): do not keep the claims.
                held = [k for k, (t, _) in zip(keys, group.claimed[index], strict=True) if t]
                if held:
                    self.claims.release_many(held)
            else:
                future.set_result(group.claimed[index])


def _settle(future: asyncio.Future[Any], error: BaseException | None, result: Any) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(result)
        return
    future.set_exception(error)
    # Whoever awaits it still gets the error; a waiter that was cancelled meanwhile does not
    # leave a "Future exception was never retrieved" (the run fails with the first one).
    future.exception()
