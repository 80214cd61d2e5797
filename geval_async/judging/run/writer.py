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

A full disk does not lose the answers in flight, which were paid for: the thread keeps them
and tries again, a quarter of a second after the first failure and then doubling up to five
seconds, until there is room. Meanwhile no request is sent (an attempt waits for
:meth:`Writer.room`), the run says once, in one line, where the disk is full and how many
answers it holds, and goes on as before once they are stored. A stop (Ctrl-C) while they are
held ends the wait: the run ends with one line saying how many answers were lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from queue import SimpleQueue
from typing import Any, TypeVar

from ...errors import CacheError
from ..store.cache import CachedResponse, JudgeCache, Record
from ..store.claims import Claims
from ..store.folder import disk_full

_T = TypeVar("_T")

Claimed = list[tuple[bool, bool]]

# Claims of answers stored are let go with the next claims taken, or at the latest when this
# many have gathered or this many seconds have passed since the last letting go.
_LET_GO_KEYS = 512
_LET_GO_AFTER = 0.5
# While the disk is full, a write is tried again after this many seconds, doubling up to the
# most: room freed by the user is found within seconds, and a full disk costs no busy loop.
_ROOM_FIRST = 0.25
_ROOM_MOST = 5.0


@dataclass
class _Group:
    """What one turn of the thread writes, and who waits for it."""

    puts: list[Record] = field(default_factory=list)
    waiting: list[asyncio.Future[None]] = field(default_factory=list)  # stored when resolved
    releases: list[str] = field(default_factory=list)  # claims to let go once puts are in
    claims: list[tuple[list[str], asyncio.Future[Claimed]]] = field(default_factory=list)
    # Filled by the commit:
    stored: bool = False  # the puts are on disk (the claims may be under way still)
    error: BaseException | None = None
    claimed: list[Claimed] = field(default_factory=list)
    settled: bool = False

    def __bool__(self) -> bool:
        return bool(self.puts or self.releases or self.claims)


class Writer:
    """Stores answers, lets go of and takes claims; one per run, made inside the loop.

    Use :meth:`close` when the run ends: it stores what is left and stops the thread.
    ``stop``: the run's stop event, which ends a wait for room on a full disk; ``warn``: says
    a line to the user (that the disk is full, that there is room again).
    """

    def __init__(
        self,
        cache: JudgeCache,
        claims: Claims,
        *,
        stop: asyncio.Event | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.cache, self.claims = cache, claims
        self._stop, self._warn = stop, warn
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
        # A full disk: the loop's future that resolves once the answers held are stored (None:
        # not holding), the task that gives up at the run's stop, and the thread's signal to
        # give up with the error that says how many answers were lost.
        self._room: asyncio.Future[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._give_up = threading.Event()
        self._lost: AnswersLost | None = None

    @property
    def error(self) -> BaseException | None:
        """The first error writing the cache (then the run stops), or the answers a full
        disk kept from it until the run stopped."""
        if self._error is None and self._lost is not None and self._lost.answers:
            return self._lost
        return self._error

    @property
    def holding(self) -> bool:
        """Whether the disk is full and answers are held until there is room."""
        return self._room is not None

    async def room(self) -> None:
        """Wait while answers are held for room on a full disk (an attempt sends nothing
        meanwhile), or until the run stops."""
        if self._room is not None:
            await asyncio.shield(self._room)

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
        if self._room is not None:  # the run ended while the disk was full: nothing waits more
            self._lose()
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
            try:
                self.claims.release_many(keys, stop=self._stopped)
            except CacheError:
                # The run failed to write already (a full disk, say), and that error is the
                # one to show, or it was stopped; claims not let go lapse by themselves.
                if self._error is None and not self._stopped():
                    raise

    def _flush(self) -> None:
        """Hand this turn's answers to the next group (the loop's)."""
        records, self._turn = self._turn, []
        waiting, self._waiting = self._waiting, []
        group = self._next
        error = self._error or self._lost
        if records and error is None:
            group.puts += records
            group.waiting += [done for _, done in waiting]
        else:
            if self._lost is not None:
                self._lost.answers += len(records)
            for _, done in waiting:
                if error is None:
                    done.set_result(None)
                else:
                    _fail(done, error)
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
                puts = group.puts
                self._until_room(lambda: self.cache.put_records(puts, stop=self._giving_up))
                group.stored = True
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
                taken = self._until_room(
                    lambda: self.claims.settle(release, wanted, stop=self._stopped)
                )
            held = [key for key, took in zip(wanted, taken, strict=True) if took]
            stored = self.cache.stored(held) if held else set()
        except AnswersLost as exc:
            # The run stopped on a full disk: no claim is taken, and the stop drains the rest.
            group.error = error or exc
            group.claimed = [[(False, False)] * len(keys) for keys, _ in group.claims]
            return
        except CacheError as exc:
            if not self._stopped():
                group.error = error or exc
                return
            # The run was stopped while another process held the claims' lock: it takes no
            # claim now, and what it holds lapses, or is taken over, once it has ended.
            group.error = error
            group.claimed = [[(False, False)] * len(keys) for keys, _ in group.claims]
            return
        except Exception as exc:  # noqa: BLE001
            group.error = error or exc
            return
        group.error = error
        results = iter(zip(taken, (key in stored for key in wanted), strict=True))
        group.claimed = [[next(results) for _ in keys] for keys, _ in group.claims]

    def _giving_up(self) -> bool:
        return self._closed or self._give_up.is_set()

    def _stopped(self) -> bool:
        """Whether the run was stopped (Ctrl-C, SIGTERM, a full disk given up on): a wait for
        the claims' lock then ends, since a stopped run sends nothing more. Its answers are
        still stored: only :meth:`_giving_up` ends a wait to write them."""
        stop = self._stop
        return self._give_up.is_set() or (stop is not None and stop.is_set())

    def _until_room(self, write: Callable[[], _T]) -> _T:
        """``write()``, tried again while the disk is full (in the writer's thread: the answers
        are held meanwhile) until it succeeds, or the run stops (then the CacheError that says
        how many answers were lost). Elsewhere (:meth:`close`, after the thread) once."""
        if threading.current_thread() is not self._thread:
            return write()
        if self._lost is not None:  # counted as lost already: not tried again
            raise self._lost
        delay, held = _ROOM_FIRST, False
        while True:
            try:
                result = write()
            except CacheError as exc:
                if not disk_full(exc) or self._closed:
                    raise
                if not held:
                    held = True
                    self._tell_loop(self._hold, exc)
                if self._give_up.wait(delay):
                    if self._lost is None:
                        raise
                    raise self._lost from exc
                delay = min(2 * delay, _ROOM_MOST)
                continue
            if held:
                self._tell_loop(self._unhold)
            return result

    def _tell_loop(self, callback: Callable[..., None], *args: Any) -> None:
        # A closed loop raises RuntimeError: the run is over, nobody is left to tell.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(callback, *args)

    def _held(self) -> int:
        """The answers received and not stored yet (on the loop)."""
        busy = self._busy
        held = len(busy.puts) if busy is not None and not busy.stored else 0
        return held + len(self._next.puts) + len(self._turn)

    def _hold(self, error: CacheError) -> None:
        """The disk is full: no request is sent until the answers held are stored (on the
        loop); said once."""
        if self._room is not None or self._give_up.is_set():
            return
        self._room = self._loop.create_future()
        if self._stop is not None:
            self._watch = self._loop.create_task(self._lose_at_stop(self._stop))
        if self._warn is not None:
            self._warn(
                f"{self.cache.directory}: the disk is full; {self._held()} answers received "
                "are held until there is room: free space there and the run goes on "
                "(Ctrl-C stops it, and they are lost)"
            )

    def _unhold(self) -> None:
        """Room again: the answers held are stored; the run goes on (on the loop)."""
        room, self._room = self._room, None
        if room is None:
            return
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if not room.done():
            room.set_result(None)
        if self._warn is not None:
            self._warn(f"{self.cache.directory}: room again; the answers held are stored")

    async def _lose_at_stop(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._lose()

    def _lose(self) -> None:
        """Stop waiting for room: the answers held are lost (on the loop)."""
        # This turn's answers are counted when they are handed over (_flush), as are those
        # still in flight, which arrive after the stop.
        busy = self._busy
        held = len(self._next.puts) + (len(busy.puts) if busy and not busy.stored else 0)
        self._lost = AnswersLost(self.cache.directory, held)
        self._give_up.set()
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)  # the attempts waiting find the run stopped
        if self._watch is not None and self._watch is not asyncio.current_task():
            self._watch.cancel()
        self._watch = None

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


class AnswersLost(CacheError):
    """Answers received that a full disk kept from the cache until the run stopped.

    Its count grows while the answers in flight at the stop arrive; the line is made when it
    is shown, once the run is over.
    """

    def __init__(self, folder: Path, answers: int) -> None:
        super().__init__(folder, answers)
        self.folder, self.answers = folder, answers

    def __str__(self) -> str:
        return (
            f"{self.folder}: the disk is still full; {self.answers} answers received were "
            "lost (not stored: a rerun asks them again); free space there, then run again "
            "to resume"
        )


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if future.done():
        return
    future.set_exception(error)
    # Whoever awaits it still gets the error; a waiter that was cancelled meanwhile does not
    # leave a "Future exception was never retrieved" (the run fails with the first one).
    future.exception()
