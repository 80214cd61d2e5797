"""Write-behind for the hot path: answers journaled on the loop, stored in groups off it.

At thousands of answers a second, a sqlite commit per answer (plus one to take and one to let
go of its claim) was most of the client's time, and a worker that waited for its answer's
commit sent nothing meanwhile. So the :class:`Writer` keeps two things apart:

* **safe**: the answers that arrive in one turn of the loop are appended to the run's journal
  (:mod:`.journal`) in one ``writev``, at the end of that turn; a worker's :meth:`Writer.release`
  resolves then, so its item counts as done and it sends its next request only once its answer
  is on disk. A SIGKILL loses at most the requests in flight, as before.
* **stored**: a thread of the writer's own folds the journaled answers into the cache (one
  ``INSERT`` of up to 256 rows, :mod:`.answer_table`) once 256 have gathered or the oldest has
  waited 0.1 s, and then lets go of their claims (:mod:`.claims`): another process that waits
  for one of those answers finds it in the cache when it finds the claim gone. A commit costs
  something whatever its size: a row 44 CPU us in groups of 6, 25 in groups of 256
  (``bench/writes.py --groups 6,256``; 58 and 44 on a busier machine), and each commit's
  hand-backs of the GIL cost the loop's thread a wait.

The claims the producer asks for (:meth:`Writer.claim_many`: it waits for them) go to the
thread at once, alone when no fold is due. The claims of answers stored are let go with the
next claims taken, or once half a second or 512 keys have gathered, and when the run ends
(letting go at every fold would be a claims transaction more each time).

Between a journal write and its fold, the answers are in the journal only: this run does not
read them back (its claims keep anyone from asking for them, itself included), and a run that
died before folding them leaves them for the next writer of the folder (:mod:`.journal`), or
for a run that takes over its claims (:meth:`Writer._commit` folds that journal first).
sqlite lets go of the GIL while it writes, and diskcache gives each thread its own connection.
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

from ..store.cache import CachedResponse, JudgeCache
from ..store.claims import Claims
from ..store.folder import RESUME, cache_errors
from ..store.journal import Journal, Record, fold_orphans

Claimed = list[tuple[bool, bool]]

# Claims of answers stored are let go with the next claims taken, or at the latest when this
# many have gathered or this many seconds have passed since the last letting go.
_LET_GO_KEYS = 512
_LET_GO_AFTER = 0.5
# Journaled answers are folded into the cache once this many have gathered, or once the
# oldest has waited this long (see the module's docstring).
_FOLD_ROWS = 256
_FOLD_AFTER = 0.1


@dataclass
class _Group:
    """What one turn of the thread writes, and who waits for it."""

    puts: list[Record] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)  # claims to let go once puts are in
    claims: list[tuple[list[str], asyncio.Future[Claimed]]] = field(default_factory=list)
    segment: int = 0  # the journal's segment of the last of puts
    # Filled by the commit:
    error: BaseException | None = None
    claimed: list[Claimed] = field(default_factory=list)
    settled: bool = False

    def __bool__(self) -> bool:
        return bool(self.puts or self.releases or self.claims)


class Writer:
    """Journals and stores answers, lets go of and takes claims; one per run, made inside
    the loop.

    Use :meth:`close` when the run ends: it stores what is left and stops the thread.
    """

    def __init__(self, cache: JudgeCache, claims: Claims) -> None:
        self.cache, self.claims = cache, claims
        self._loop = asyncio.get_running_loop()
        self._journal: Journal | None = None  # opened with the first answer
        self._turn: list[Record] = []  # this turn's answers, not journaled yet
        self._waiting: list[tuple[str, asyncio.Future[None]]] = []  # releases waiting for them
        self._next = _Group()  # journaled, not handed to the thread yet; claims asked for
        # Set off by the next group's first answer: when it has waited _FOLD_AFTER, ripe.
        self._timer: asyncio.TimerHandle | None = None
        self._ripe = False
        self._winding_down = False  # the last items are out: fold whenever the thread is free
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
        """The first error writing the journal or the cache (then the run stops)."""
        return self._error

    def put(self, entry: CachedResponse, *, overwrite: bool) -> None:
        """Journal ``entry`` at the end of this turn (await :meth:`release` of its key to
        know), and store it with a later group."""
        if not self._turn:  # the turn's first answer: its write is due at the turn's end
            # call_soon runs after every callback already due in this turn: the workers woken
            # by the answers that arrived together all hand theirs over before the write.
            self._loop.call_soon(self._flush)
        self._turn.append((entry.key, entry.encode(), overwrite))

    def release(self, key: str) -> asyncio.Future[None]:
        """Let go of the claim on ``key`` once everything put before is stored (with the next
        claims taken, or soon after; see the module's docstring).

        The future resolves when everything put before is journaled, and raises the
        CacheError of the journal or the cache if either could not be written.
        """
        done: asyncio.Future[None] = self._loop.create_future()
        if self._turn:  # with this turn's answers: let go only after they are stored
            self._waiting.append((key, done))
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

    def wind_down(self) -> None:
        """The run has handed out its last items: from now on the journaled answers are
        folded whenever the thread is free, while the last requests are in flight, so that
        :meth:`close` is left with the last few, not up to ``_FOLD_ROWS``: the time from the
        last answer to the run's end is the run's, not a fold's."""
        self._winding_down = True
        if self._next.puts:
            self._schedule()

    def close(self) -> None:
        """Journal and store everything handed over so far and stop the thread (the run has
        ended); :attr:`error` says whether all of it reached the cache.

        Waits for a group under way; what was handed over after it is stored here. The
        journal is deleted once its answers are all in the cache, else kept for the next run.
        """
        self._closed = True
        self._flush()
        if self._timer is not None:
            self._timer.cancel()
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
        if self._journal is not None:
            self._journal.close(folded=self._error is None)
            self._journal = None

    def _flush(self) -> None:
        """Journal this turn's answers, then tell the workers waiting for them (the loop's)."""
        records, self._turn = self._turn, []
        waiting, self._waiting = self._waiting, []
        if records and self._error is None:
            try:
                with cache_errors(self.cache.directory, "cannot write to the cache", RESUME):
                    if self._journal is None:
                        self._journal = Journal(self.cache.directory)
                    segment = self._journal.append(records)
            except Exception as exc:  # noqa: BLE001 - handed to every waiter
                self._error = exc
            else:
                group = self._next
                if not group.puts:
                    self._timer = self._loop.call_later(_FOLD_AFTER, self._due)
                group.puts += records
                group.segment = segment
                if self._winding_down or len(group.puts) >= _FOLD_ROWS:
                    self._schedule()
        # Let go with the group their answers are in (or, when those failed, anyway: nobody
        # should wait for an answer not coming).
        self._next.releases += [key for key, _ in waiting]
        for _, done in waiting:
            if self._error is None:
                done.set_result(None)
            else:
                _fail(done, self._error)

    def _due(self) -> None:
        self._timer, self._ripe = None, True
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled and self._busy is None and not self._closed:
            self._scheduled = True
            self._loop.call_soon(self._start)

    def _start(self) -> None:
        """Hand the thread its next turn: the journaled answers when a fold is due, and the
        claims asked for."""
        self._scheduled = False
        if self._busy is not None or self._closed:
            return
        group = self._next
        if group.puts and (self._ripe or self._winding_down or len(group.puts) >= _FOLD_ROWS):
            self._next, self._ripe = _Group(), False
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        elif group.claims:
            claims, group.claims = group.claims, []
            group = _Group(claims=claims)
        else:
            return
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
            self._schedule()  # what came meanwhile, if it is due (_start decides)

    def _commit(self, group: _Group) -> None:
        """Write one group (in the writer's thread: sqlite only, nothing of asyncio)."""
        # A failed write fails every later waiter too: nothing after it is known to be stored.
        error = self._error
        if group.puts and error is None:
            try:
                self.cache.put_records(group.puts)
                if self._journal is not None:  # what is before the group's segment is in
                    self._journal.forget(group.segment)
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
            if self.claims.took_over:  # a dead run's claims: its journal's answers first
                self.claims.took_over = False
                with cache_errors(self.cache.directory, "cannot write to the cache", RESUME):
                    fold_orphans(self.cache.directory, self.cache.put_records)
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

        The claims of a waiter cancelled meanwhile are let go here, on the loop's thread.
        That never meets a write of the writer's thread: a group is settled by :meth:`_done`,
        which the thread asks for once it has finished writing that group, and the next group
        is handed to it only after (``_busy`` holds until then); or by :meth:`close`, after
        the thread has ended. The claims' table is also used under a lock
        (:mod:`.claim_table`), so a worker's ``renew`` meanwhile waits its turn.
        ``tests/test_claims.py`` checks that those claims are let go.
        """
        group.settled = True
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
