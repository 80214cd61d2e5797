"""Claims on requests in flight, shared by every process that uses one cache folder.

Two runs of the same plan on one cache (two terminals, two notebook kernels, a job array)
would otherwise both send every request neither has stored yet. Before a worker sends a
request it claims the request's key, atomically, in a small table of its own next to the
answers (``<cache>/claims/claims.db``, :mod:`.claim_table`). A key another live process holds
is not sent: the worker waits for that process's answer to appear in the cache instead. A
claim names its process and host and lapses after a time-to-live that each attempt renews,
so the claims of a killed run never block the run that resumes it: a claim whose process is
gone on this host is taken over at once, and one from another host after it lapses.

The same claims make one run send a request once even when two items render the very same
request (identical records): the second waits for the first's answer.

A claim is only ever changed by its holder: ``renew`` and ``release`` first check, in one
transaction, that the stored claim is still this run's. A run that stalled past the
time-to-live, whose claim another process then took over, must not extend or delete the new
holder's claim (that would let a third process send the request again). Each claim carries
its own expiry, read against an injectable clock, so tests can move time instead of sleeping.

A batch job (:mod:`geval_async.judging.batch`) claims its requests too, for as long as the batch
lives rather than for a time-to-live: its claims name the batch, not a process, and hold while
the batch's record is in the cache's ledger (``<cache>/batches``), whatever happens to the
process that submitted it. Online runs skip those requests instead of waiting a day for them.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import orjson

from .claim_table import ClaimTable
from .folder import RESUME, cache_errors

__all__ = ["Claims"]

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
    """

    def __init__(
        self, cache_directory: Path, ttl: float, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.ttl, self.clock = ttl, clock
        # "run" tells this run's claims from those of another run in the same process.
        self._owner = {"pid": os.getpid(), "host": _HOST, "run": secrets.token_hex(8)}
        # The claims this run holds, with the value stored for each: letting go deletes a row
        # only while it still holds exactly that value (nobody took it over meanwhile).
        self._held: dict[str, bytes] = {}
        # Set when a claim of a run that died (or lapsed) is taken over: that run's last
        # answers may be in its journal still (:mod:`.journal`; the writer folds it then).
        self.took_over = False
        self.directory = Path(cache_directory) / "claims"
        with self._errors():
            self._table = ClaimTable(self.directory)

    def __enter__(self) -> Claims:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.release_many(list(self._held))
        self._table.close()

    def __len__(self) -> int:
        """How many claims the folder holds, of any run or batch."""
        with self._errors():
            return len(self._table)

    def claim(self, key: str) -> bool:
        """Claim ``key`` for this run; False when another live claim holds it."""
        return self.claim_many([key])[0]

    def claim_many(self, keys: Sequence[str]) -> list[bool]:
        """Claim several keys in one transaction (one commit); whether each was taken."""
        return self.settle([], keys)

    def _take_many(self, keys: Sequence[str]) -> list[bool]:
        stored = self._table.holders(keys)
        claim = self._claim()
        taken: dict[str, bytes] = {}
        done = [self._take(key, stored, claim, taken) for key in keys]
        self._table.put(taken.items())
        return done

    def _take(
        self, key: str, stored: dict[str, bytes], claim: bytes, taken: dict[str, bytes]
    ) -> bool:
        if key in self._held:
            return False  # this run is already asking (an identical request)
        if key in stored:
            holder = _holder_of(stored[key])
            if holder is not None and not self._lapsed(holder):
                return False  # a live claim; else a lapsed one (or a dead process's) taken over
            self.took_over = True
        taken[key] = self._held[key] = claim
        return True

    def renew(self, key: str) -> bool:
        """Extend this run's claim on ``key`` by the time-to-live (once per attempt).

        Returns False, and changes nothing, when the claim is no longer this run's: it lapsed
        and another process took it over (or released it with the answer stored).
        """
        with self._errors(), self._table.transact():
            mine = self._is_mine(self._holder(key))
            if mine:
                claim = self._claim()
                self._table.put([(key, claim)])
                self._held[key] = claim
        if not mine:
            self._held.pop(key, None)
        return mine

    def release(self, key: str) -> None:
        """Give up the claim on ``key`` (its answer is stored, or this run gave up).

        A claim that is no longer this run's is left to its holder.
        """
        self.release_many([key])

    def release_many(self, keys: Sequence[str]) -> None:
        """Give up several claims in one transaction (see :meth:`release`)."""
        self.settle(keys, [])

    def settle(self, release: Sequence[str], claim: Sequence[str]) -> list[bool]:
        """Give up the claims on ``release``, then claim ``claim``, in one transaction.

        Returns whether each key of ``claim`` was taken (see :meth:`claim_many`).
        """
        if not (release or claim):
            return []
        with self._errors(), self._table.transact():
            if release:
                held = self._held
                self._table.delete_if([(k, held.pop(k)) for k in release if k in held])
            return self._take_many(claim) if claim else []

    def _claim(self) -> bytes:
        return orjson.dumps({**self._owner, "until": self.clock() + self.ttl})

    def _holder(self, key: str) -> dict[str, Any] | None:
        return _holder_of(self._table.holder(key))

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
        claimed = []
        with self._errors(), self._table.transact():
            for key in keys:
                holder = self._holder(key)
                if holder is not None and not self._lapsed(holder):
                    continue
                self._table.put([(key, claim)])
                claimed.append(key)
        return claimed

    def release_batch(self, keys: Iterable[str], batch: str) -> None:
        """Give up the claims that batch ``batch`` holds on ``keys`` (the batch has ended)."""
        claim = orjson.dumps({"batch": batch})  # as claim_for_batch stored it
        with self._errors(), self._table.transact():
            self._table.delete_if((key, claim) for key in keys)

    def batch_of(self, key: str) -> str | None:
        """The live batch that holds ``key``, or None."""
        with self._errors():
            holder = self._holder(key)
        batch = None if holder is None else holder.get("batch")
        if batch is None or not is_live(self.directory.parent, str(batch)):
            return None
        return str(batch)

    def _errors(self) -> AbstractContextManager[None]:
        return cache_errors(
            self.directory.parent, "cannot write to the cache's claims folder", RESUME
        )


FOLDER = "batches"


def is_live(cache_directory: Path, name: str) -> bool:
    """Whether batch ``name`` has a live record in the ledger of ``cache_directory``."""
    return (Path(cache_directory) / FOLDER / f"{name}.json").exists()
