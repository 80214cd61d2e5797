"""The claims' own sqlite table: many claims taken, renewed and let go with one statement each.

Claims (:mod:`.claims`) were a diskcache: its public API changes one key a call, and letting
go of a claim "only while it still holds this run's value" takes a ``get`` and a ``delete``.
A run claims and lets go of every request it sends, so that was three calls a request: 53-64
CPU us a claim in groups of 25 and 118-180 alone, against 8-13 and 58-71 us here
(``bench/claims.py``; docs/benchmarks.md, "The store through diskcache's public API").
diskcache has no call for many keys nor a compare-and-delete, so the claims keep a table of
their own, written here openly, in ``<cache>/claims/claims.db``: a key, and the holder's bytes.

One connection per table, shared by the event loop's thread and the writer thread under a
lock; ``BEGIN IMMEDIATE`` makes each transaction atomic across processes, and a busy database
is waited on for up to ``timeout`` seconds. Claims are short-lived coordination, not results:
no fsync on every commit (``synchronous = OFF``; a crash loses at most claims, which lapse).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["ClaimTable"]

# sqlite's default limit on the parameters of one statement is 32,766 (999 before 3.32).
_CHUNK = 900


class ClaimTable:
    """``key -> holder`` rows in a sqlite file of our own; the writes inside :meth:`transact`,
    every use of the connection under its lock."""

    def __init__(self, directory: Path, *, timeout: float = 60.0) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            str(directory / "claims.db"),
            timeout=timeout,
            isolation_level=None,  # transactions begun and ended here, explicitly
            check_same_thread=False,
        )
        self._lock = threading.RLock()
        self._depth = 0
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS claim (key TEXT PRIMARY KEY, holder BLOB NOT NULL)"
            " WITHOUT ROWID"
        )

    @contextmanager
    def transact(self) -> Iterator[None]:
        """One atomic transaction (nested ones join the outer one)."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._db.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")
            finally:
                self._depth = 0

    def holders(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored holder of each of ``keys`` that has one."""
        found: dict[str, bytes] = {}
        with self._lock:
            for start in range(0, len(keys), _CHUNK):
                chunk = list(keys[start : start + _CHUNK])
                marks = ",".join("?" * len(chunk))
                found.update(
                    self._db.execute(
                        f"SELECT key, holder FROM claim WHERE key IN ({marks})", chunk
                    ).fetchall()
                )
        return found

    def holder(self, key: str) -> bytes | None:
        with self._lock:
            row = self._db.execute("SELECT holder FROM claim WHERE key = ?", (key,)).fetchone()
        return None if row is None else bytes(row[0])

    def put(self, rows: Iterable[tuple[str, bytes]]) -> None:
        """Store each ``(key, holder)``, replacing the key's holder if it has one."""
        self._db.executemany("INSERT OR REPLACE INTO claim (key, holder) VALUES (?, ?)", rows)

    def delete_if(self, rows: Iterable[tuple[str, bytes]]) -> None:
        """Delete each ``(key, holder)`` row whose stored holder is still exactly ``holder``."""
        self._db.executemany("DELETE FROM claim WHERE key = ? AND holder = ?", rows)

    def delete(self, keys: Iterable[str]) -> None:
        self._db.executemany("DELETE FROM claim WHERE key = ?", ((key,) for key in keys))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM claim").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
