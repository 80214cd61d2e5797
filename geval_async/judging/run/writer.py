"""The run's writer: each turn's answers stored in one transaction, off the event loop.

A worker's answer counts as done, and its worker sends its next request, only once the answer
is on disk: a SIGKILL costs at most the requests in flight. Storing each answer alone would
cost a commit each; so the answers that arrive in one turn of the loop are handed together to
a thread of the writer's own, which stores them in one ``transact()`` of the cache
(:meth:`~geval_async.judging.store.cache.JudgeCache.put_records`), then tells their workers.
While it writes, the next turns' answers gather into the next group: the busier the run, the
larger the groups, and a commit's cost is shared by more answers. At the rates real judges
allow (500 requests a second at most), a group is a few answers and a commit a millisecond.

After storing a group the thread lets go of its claims (:mod:`geval_async.judging.store.claims`):
another process that waits for one of those answers finds it in the cache when it finds the
claim gone. Those claims are let go with the next claims taken, or once half a second or 512
keys have gathered, and when the run ends. The claims the producer asks for
(:meth:`Writer.claim_many`: it waits for them) go to the thread at once.
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

from ..store.cache import CachedResponse, JudgeCache, Record
from ..store.claims import Claims

Claimed = list[tuple[bool, bool]]

# Claims of answers stored are let go with the next claims taken, or at the latest when this
# many have gathered or this many seconds have passed since the last letting go.
_LET_GO_KEYS = 512
_LET_GO_AFTER = 0.5


@dataclass
class _Group:
    """What one turn of the thread writes, and who waits for it."""

    puts: list[Record] = field(default_factory=list)
    waiting: list[asyncio.Future[None]] = field(default_factory=list)  # stored when resolved
    releases: list[str] = field(default_factory=list)  # claims to let go once puts are in
    claims: list[tuple[list[str], asyncio.Future[Claimed]]] = field(default_factory=list)
    # Filled by the commit:
    error: BaseException | None = None
    claimed: list[Claimed] = field(default_factory=list)
    settled: bool = False

    def __bool__(self) -> bool:
        return bool(self.puts or self.releases or self.claims)


class Writer:
    """Stores answers, lets go of and takes claims; one per run, made inside the loop.

    Use :meth:`close` when the run ends: it stores what is left and stops the thread.
    """

    def __init__(self, cache: JudgeCache, claims: Claims) -> None:
        self.cache, self.claims = cache, claims
        self._loop = asyncio.get_running_loop()
        self._turn: list[Record] = []  # this turn's answers, not handed over yet
        self._waiting: list[tuple[str, asyncio.Future[None]]] = []  # releases waiting for them
        self._next = _Group()  # handed over, not given to the thread yet; claims asked for
        self._jobs: SimpleQueue[_Group | None] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._scheduled = False
        self._busy: _Group | None = None  # the group the thread is writing
        self._closed = False
        self._error: BaseException | None = None
        # The writer thread's: claims whose answers are stored, not let go yet, and when
        # claims were last let go.
        self._letting_go: list[str] = []
        self._let_go_at = time.monotonic()

    @property
    def error(self) -> BaseException | None:
        """The first error writing the cache (then the run stops)."""
        return self._error

    def put(self, entry: CachedResponse, *, overwrite: bool) -> None:
        """Store ``entry`` with this turn's answers (await :meth:`release` of its key to
        know it is stored)."""
        if not self._turn:  # the turn's first answer: handed over at the turn's end
            # call_soon runs after every callback already due in this turn: the workers woken
            # by the answers that arrived together all hand theirs over before it.
            self._loop.call_soon(self._flush)
        self._turn.append((entry.key, entry.encode(), overwrite))

    def release(self, key: str) -> asyncio.Future[None]:
        """Let go of the claim on ``key`` once everything put before is stored.

        The future resolves when everything put before is stored, and raises the CacheError
        of the cache if it could not be written.
        """
        done: asyncio.Future[None] = self._loop.create_future()
        if self._turn:  # with this turn's answers: let go only after they are stored
            self._waiting.append((key, done))
        elif self._next.puts:  # handed over, not stored yet
            self._next.releases.append(key)
            self._next.waiting.append(done)
        elif self._busy is not None and self._busy.puts:  # being stored now
            self._busy.waiting.append(done)
            self._next.releases.append(key)
        else:
            self._next.releases.append(key)
            if self._error is not None:
                _fail(done, self._error)
            else:
                done.set_result(None)
        return done

    async def claim(self, key: str) -> tuple[bool, bool]:
        """Claim ``key``; see :meth:`claim_many`."""
        return (await self.claim_many([key]))[0]

    async def claim_many(self, keys: Sequence[str]) -> Claimed:
        """Claim ``keys`` (see :meth:`Claims.claim`) in the thread's next turn.

        Returns, for each, whether the claim was taken, and whether the cache holds an entry
        under the key by then (a holder may have stored the answer just before it let go).
        """
        taken: asyncio.Future[Claimed] = self._loop.create_future()
        self._next.claims.append((list(keys), taken))
        self._schedule()
        return await taken

    def close(self) -> None:
        """Store everything handed over so far and stop the thread (the run has ended);
        :attr:`error` says whether all of it reached the cache.

        Waits for a group under way; what was handed over after it is stored here.
        """
        self._closed = True
        self._flush()
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
        if self._busy is not None:  # written, but its waiters not told yet
            self._done(self._busy)
        group, self._next = self._next, _Group()
        if group:
            self._commit(group)
            self._settle(group)
        if self._letting_go:
            keys, self._letting_go = self._letting_go, []
            self.claims.release_many(keys)

    def _flush(self) -> None:
        """Hand this turn's answers to the next group (the loop's)."""
        records, self._turn = self._turn, []
        waiting, self._waiting = self._waiting, []
        group = self._next
        if records and self._error is None:
            group.puts += records
            group.waiting += [done for _, done in waiting]
        else:
            for _, done in waiting:
                if self._error is None:
                    done.set_result(None)
                else:
                    _fail(done, self._error)
        # Let go with the group their answers are in (or, when those failed, anyway: nobody
        # should wait for an answer not coming).
        group.releases += [key for key, _ in waiting]
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled and self._busy is None and not self._closed:
            self._scheduled = True
            self._loop.call_soon(self._start)

    def _start(self) -> None:
        """Hand the thread the next group: the answers handed over and the claims asked for."""
        self._scheduled = False
        if self._busy is not None or self._closed:
            return
        group = self._next
        if not (group.puts or group.claims or self._let_go_due()):
            return
        self._next = _Group()
        self._busy = group
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="geval-writer", daemon=True)
            self._thread.start()
        self._jobs.put(group)

    def _serve(self) -> None:
        """The writer's thread: write each group, then tell the loop."""
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
            self._schedule()  # what came meanwhile

    def _commit(self, group: _Group) -> None:
        """Write one group (in the writer's thread: sqlite only, nothing of asyncio)."""
        # A failed write fails every later waiter too: nothing after it is known to be stored.
        error = self._error
        if group.puts and error is None:
            try:
                # A lock another process holds is waited for until the run closes the writer.
                self.cache.put_records(group.puts, stop=lambda: self._closed)
            except Exception as exc:  # noqa: BLE001 - handed to every later waiter
                error = self._error = exc
        # One claims transaction: let go (even when the write failed: nobody should wait on
        # an answer not coming), then take; when there is nothing to take, only now and then.
        self._letting_go += group.releases
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
        """Hand the group's claims to their waiters (on the loop).

        The workers waiting for its answers are told they are stored (or why not). The
        claims of a waiter cancelled meanwhile are let go here, on the loop's thread.
        That never meets a write of the writer's thread: a group is settled by :meth:`_done`,
        which the thread asks for once it has finished writing that group, and the next group
        is handed to it only after (``_busy`` holds until then); or by :meth:`close`, after
        the thread has ended.
        ``tests/test_claims.py`` checks that those claims are let go.
        """
        group.settled = True
        for done in group.waiting:
            if group.error is None:
                if not done.done():
                    done.set_result(None)
            else:
                _fail(done, group.error)
        for index, (keys, future) in enumerate(group.claims):
            if index >= len(group.claimed):
                _fail(future, group.error or RuntimeError("claims not written"))
            elif future.done():
                # Its worker is gone (cancelled): do not keep the claims.
                held = [k for k, (t, _) in zip(keys, group.claimed[index], strict=True) if t]
                if held:
                    self.claims.release_many(held)
            else:
                future.set_result(group.claimed[index])


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if future.done():
        return
    future.set_exception(error)
    # Whoever awaits it still gets the error; a waiter that was cancelled meanwhile does not
    # leave a "Future exception was never retrieved" (the run fails with the first one).
    future.exception()
