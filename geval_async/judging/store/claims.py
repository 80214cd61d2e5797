"""Claims on requests in flight, shared by every process that uses one cache folder.

Two runs of the same plan on one cache (two terminals, two notebook kernels, a job array)
would otherwise both send every request neither has stored yet. Before a worker sends a
request it claims the request's key, atomically, in a second diskcache next to the answers
(``<cache>/claims/``, read and written as the answers are, through :class:`~.disk.EntryDisk`):
``add`` with ``expire`` takes a key nobody holds, and a claim that lapsed is read and replaced
inside the same ``transact()``. A key another live process holds is not sent: the worker
waits for that process's answer to appear in the cache instead. A claim names its process
and host and lapses after a time-to-live that each attempt renews, so the claims of a killed
run never block the run that resumes it: a claim whose process is gone on this host is taken
over at once, and one from another host after it lapses.

The same claims make one run send a request once even when two items render the very same
request (identical records): the second waits for the first's answer.

A claim is only ever changed by its holder: ``renew`` and ``release`` first check, in one
``transact()``, that the stored claim is still this run's (a compare-and-release). A run that
stalled past the time-to-live, whose claim another process then took over, must not extend or
delete the new holder's claim (that would let a third process send the request again). Each
claim carries its own expiry, read against an injectable clock, so tests can move time instead
of sleeping; diskcache's own expiry (the same time-to-live) lets ``expire`` sweep the lapsed
ones away.

The claims are short-lived coordination, not results: a claims folder that cannot be read
(damaged) is reported with the one thing to do, deleting it once no run uses it.

A batch job (:mod:`geval_async.judging.batch`) claims its requests too, for as long as the batch
lives rather than for a time-to-live: its claims name the batch, not a process, and hold while
the batch's record is in the cache's ledger (``<cache>/batches``), whatever happens to the
process that submitted it. Online runs skip those requests instead of waiting a day for them.
"""

from __future__ import annotations

import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import diskcache
import orjson

from ...errors import CacheError
from .cache import open_diskcache
from .folder import RESUME, cache_errors
from .locks import wait_for_lock

__all__ = ["Claims"]

_T = TypeVar("_T")
_HOST = socket.gethostname()


def _holder_of(raw: Any) -> dict[str, Any] | None:
    """The holder a stored claim names; {} when unreadable (lapsed), None when there is none."""
    if raw is None:
        return None
    try:
        holder = orjson.loads(raw)
    except (TypeError, orjson.JSONDecodeError):
        return {}  # unreadable: lapsed, see Claims._lapsed
    return holder if isinstance(holder, dict) else {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


class Claims:
    """The claims folder of a cache. ``with Claims(cache_dir, ttl) as claims: ...``.

    Args:
        cache_directory: the cache folder; claims live in its ``claims`` subfolder.
        ttl: seconds a claim lasts unless renewed.
        clock: the time in seconds since the epoch (tests pass a fake one).
        stop: whether the run was stopped (Ctrl-C): then closing does not wait for another
            process's lock to let go of this run's claims, which lapse, or are taken over,
            once it has ended.
    """

    def __init__(
        self,
        cache_directory: Path,
        ttl: float,
        *,
        clock: Callable[[], float] = time.time,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        self.ttl, self.clock, self._stop = ttl, clock, stop
        # "run" tells this run's claims from those of another run in the same process.
        self._owner = {"pid": os.getpid(), "host": _HOST, "run": secrets.token_hex(8)}
        # The claims this run holds, with the value stored for each: letting go deletes a
        # claim only while it still holds exactly that value (nobody took it over meanwhile).
        # Used by the event loop's thread and the writer's thread.
        self._held: dict[str, bytes] = {}
        self._guard = threading.Lock()
        self.directory = Path(cache_directory) / "claims"
        with self._errors():
            self._store = wait_for_lock(self.directory, self._open)

    def _open(self) -> diskcache.Cache:
        # Claims are coordination, not results: a crash loses at most claims, which lapse.
        return open_diskcache(self.directory, sqlite_synchronous=0)

    def __enter__(self) -> Claims:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        try:
            self.close()
        except CacheError:
            # Leaving on an error already (a disk still full, say): that error is the one to
            # show, and the claims not let go lapse by themselves.
            if kind is None:
                raise
            with suppress(sqlite3.Error, OSError):
                self._store.close()

    def close(self) -> None:
        with self._guard:
            held = list(self._held)
        try:
            self.release_many(held, stop=self._stop)
            with self._errors():
                self._store.expire()  # the lapsed claims of runs gone
        except CacheError:
            if self._stop is None or not self._stop():
                raise
        with self._errors():
            self._store.close()

    def __len__(self) -> int:
        """How many claims the folder holds, of any run or batch."""
        with self._errors():
            return len(self._store)

    def claim(self, key: str) -> bool:
        """Claim ``key`` for this run; False when another live claim holds it."""
        return self.claim_many([key])[0]

    def claim_many(self, keys: Sequence[str]) -> list[bool]:
        """Claim several keys in one transaction (one commit); whether each was taken."""
        return self.settle([], keys)

    def holds(self, key: str) -> bool:
        """Whether this run still holds the claim on ``key`` (a stalled run's was taken over)."""
        with self._errors():
            raw = self._store.get(key)
        with self._guard:
            mine = self._held.get(key)
        return mine is not None and raw == mine

    def renew(self, key: str) -> bool:
        """Extend this run's claim on ``key`` by the time-to-live (once per attempt).

        Returns False, and changes nothing, when the claim is no longer this run's: it lapsed
        and another process took it over (or released it with the answer stored).
        """

        def renew() -> bytes | None:
            store = self._store
            with store.transact():
                if not self._is_mine(_holder_of(store.get(key))):
                    return None
                claim = self._claim()
                store.set(key, claim, expire=self.ttl)
                return claim

        claim = self._locked(renew)
        with self._guard:
            if claim is None:
                self._held.pop(key, None)
            else:
                self._held[key] = claim
        return claim is not None

    def release(self, key: str) -> None:
        """Give up the claim on ``key`` (its answer is stored, or this run gave up).

        A claim that is no longer this run's is left to its holder.
        """
        self.release_many([key])

    def release_many(self, keys: Sequence[str], *, stop: Callable[[], bool] | None = None) -> None:
        """Give up several claims in one transaction (see :meth:`release`)."""
        self.settle(keys, [], stop=stop)

    def settle(
        self,
        release: Sequence[str],
        claim: Sequence[str],
        *,
        stop: Callable[[], bool] | None = None,
    ) -> list[bool]:
        """Give up the claims on ``release``, then claim ``claim``, in one transaction.

        Returns whether each key of ``claim`` was taken (see :meth:`claim_many`). ``stop``:
        asked while another process holds the claims' lock; True gives up waiting
        (CacheError naming that process).
        """
        if not (release or claim):
            return []
        with self._guard:
            letting_go = [(key, self._held[key]) for key in release if key in self._held]
            held = set(self._held)
        mine = self._claim()

        def settle() -> list[str | None]:
            store = self._store
            with store.transact():
                for key, value in letting_go:
                    if store.get(key) == value:  # still this run's: compare, then release
                        store.delete(key)
                taking: set[str] = set()
                return [self._take(store, key, mine, held, taking) for key in claim]

        taken = self._locked(settle, stop=stop)
        with self._guard:
            for key, _ in letting_go:
                self._held.pop(key, None)
            for took in taken:
                if took is not None:
                    self._held[took] = mine
        return [took is not None for took in taken]

    def _take(
        self, store: diskcache.Cache, key: str, claim: bytes, held: set[str], taken: set[str]
    ) -> str | None:
        """Claim ``key`` inside the transaction; the key when taken, None when it is held."""
        if key in held or key in taken:
            return None  # this run is already asking (an identical request)
        if not store.add(key, claim, expire=self.ttl):
            holder = _holder_of(store.get(key))
            if holder is not None and not self._lapsed(holder):
                return None  # a live claim; else a lapsed one (or a dead process's) taken over
            store.set(key, claim, expire=self.ttl)
        taken.add(key)
        return key

    def _claim(self) -> bytes:
        return orjson.dumps({**self._owner, "until": self.clock() + self.ttl})

    def _is_mine(self, holder: dict[str, Any] | None) -> bool:
        return holder is not None and all(holder.get(k) == v for k, v in self._owner.items())

    def _lapsed(self, holder: dict[str, Any]) -> bool:
        if "batch" in holder:
            # A batch's claim holds while its record is in the ledger.
            return not is_live(self.directory.parent, str(holder["batch"]))
        try:
            pid, host, until = int(holder["pid"]), holder["host"], float(holder["until"])
        except (TypeError, ValueError, KeyError):
            return True  # unreadable: nobody can be relying on it
        if until < self.clock():
            return True
        return host == _HOST and not _alive(pid)

    def claim_for_batch(self, keys: Iterable[str], batch: str) -> list[str]:
        """Claim ``keys`` for the batch whose ledger record is ``batch``, with no time limit.

        Returns the keys claimed; a key a live run or another live batch holds is left out.
        """
        claim = orjson.dumps({"batch": batch})
        keys = list(keys)

        def take() -> list[str]:
            store, claimed = self._store, []
            with store.transact():
                for key in keys:
                    holder = _holder_of(store.get(key))
                    if holder is not None and not self._lapsed(holder):
                        continue
                    store.set(key, claim)
                    claimed.append(key)
            return claimed

        return self._locked(take)

    def release_batch(self, keys: Iterable[str], batch: str) -> None:
        """Give up the claims that batch ``batch`` holds on ``keys`` (the batch has ended)."""
        claim = orjson.dumps({"batch": batch})  # as claim_for_batch stored it
        keys = list(keys)

        def release() -> None:
            store = self._store
            with store.transact():
                for key in keys:
                    if store.get(key) == claim:
                        store.delete(key)

        self._locked(release)

    def batch_of(self, key: str) -> str | None:
        """The live batch that holds ``key``, or None."""
        with self._errors():
            holder = _holder_of(self._store.get(key))
        batch = None if holder is None else holder.get("batch")
        if batch is None or not is_live(self.directory.parent, str(batch)):
            return None
        return str(batch)

    def _locked(self, attempt: Callable[[], _T], *, stop: Callable[[], bool] | None = None) -> _T:
        with self._errors():
            return wait_for_lock(self.directory, attempt, stop=stop)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            with cache_errors(
                self.directory.parent, "cannot write to the cache's claims folder", RESUME
            ):
                yield
        except CacheError as exc:
            cause = exc.__cause__
            if isinstance(cause, UnicodeDecodeError) or (
                isinstance(cause, sqlite3.DatabaseError)
                and not isinstance(cause, sqlite3.OperationalError)
            ):
                raise CacheError(
                    f"{self.directory}: the claims folder is damaged ({cause}); it "
                    "holds only the claims of runs in flight: once no run uses this cache, "
                    "delete that folder and run again"
                ) from exc.__cause__
            raise


FOLDER = "batches"


def is_live(cache_directory: Path, name: str) -> bool:
    """Whether batch ``name`` has a live record in the ledger of ``cache_directory``."""
    return (Path(cache_directory) / FOLDER / f"{name}.json").exists()
