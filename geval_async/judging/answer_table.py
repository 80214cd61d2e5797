"""New answers written into the cache's table many at a time: one SELECT and one INSERT a group.

A run stores each answer the moment it arrives, in groups (:mod:`.writer`). diskcache's public
API adds one key a call: ``Cache.add`` runs its own SELECT and INSERT through a Python layer
that holds the GIL, per answer, while the event loop's thread waits for that GIL. Storing an
answer that way cost 93-107 and 81-95 CPU us in groups of 6 and 25, against 60-71 and 35-53
here (``bench/writes.py``; the tree before, 887c86f, through diskcache's private connection:
71-75 and 50-53); at ``stub+250`` the writes' share of the writer thread's CPU a request fell
from 0.16 to 0.14 ms at 16 in flight and from 0.13 to 0.09 ms at 64 (docs/benchmarks.md, "The
answers' own grouped write"). diskcache has no call that adds many keys, so the new answers
of a group are written here, openly, with a connection of our own to the folder's
``cache.db``: in one ``BEGIN IMMEDIATE`` transaction (atomic across processes, as ``add``
is), the keys that already have a row are read with one ``SELECT ... IN`` and the others
inserted with one ``executemany``.

The rows are exactly the ones ``Cache.add`` writes for a ``str`` key and a ``bytes`` value
kept in its row (what a cache opened as :class:`~geval_async.judging.cache.JudgeCache` opens
it always writes): ``raw = 1``, ``mode = 1`` (diskcache's raw bytes), ``size = 0``, no expiry,
no tag, no file, the value as a BLOB, store and access time now. diskcache keeps its count and
size in its ``Settings`` table with triggers on that table, so they stay right
(``tests/test_answer_table.py`` reads the rows back through ``diskcache.Cache.get``, ``len``
and ``check``). Everything else, replacing an entry (``--retry-failed``, a damaged one) and
an answer another writer stored first, stays with diskcache's public API (:mod:`.cache`).

sqlite is set as diskcache sets its own connections (write-ahead log, ``synchronous =
NORMAL``): a commit is as durable as ``add``'s. The connection is made in the writer thread
when it first writes and used under a lock.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["AnswerTable"]

# sqlite's default limit on the parameters of one statement is 32,766 (999 before 3.32).
_CHUNK = 900
_RAW_BYTES = 1  # diskcache's mode of a bytes value kept in its row (Cache.add writes it so)
_INSERT = (
    "INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count, tag,"
    f" size, mode, filename, value) VALUES (?, 1, ?, NULL, ?, 0, NULL, 0, {_RAW_BYTES}, NULL, ?)"
)


class AnswerTable:
    """Adds rows for new keys to a cache folder's ``Cache`` table, many in one transaction."""

    def __init__(self, directory: Path, *, timeout: float = 60.0) -> None:
        self._db = sqlite3.connect(
            str(directory / "cache.db"),
            timeout=timeout,
            isolation_level=None,  # transactions begun and ended here, explicitly
            check_same_thread=False,
        )
        self._lock = threading.Lock()
        # As diskcache sets its connections (JudgeCache keeps its defaults for these two).
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")

    def add_new(self, rows: Sequence[tuple[str, bytes]]) -> list[bool]:
        """Store each ``(key, value)`` whose key has no row yet, in one transaction.

        Returns, for each, whether it was stored: False when the key had a row (another
        writer's, or an earlier pair's of ``rows``), which is left as it is.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                present = self._present([key for key, _ in rows])
                fresh: list[tuple[str, float, float, bytes]] = []
                done: list[bool] = []
                now = time.time()
                for key, value in rows:
                    new = key not in present
                    if new:
                        present.add(key)
                        fresh.append((key, now, now, value))
                    done.append(new)
                self._db.executemany(_INSERT, fresh)
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # a failed COMMIT may have ended it already
                    self._db.execute("ROLLBACK")
                raise
        return done

    def present(self, keys: Sequence[str]) -> set[str]:
        """Those of ``keys`` that have a row (as committed by any writer), in one query.

        The run's writer asks it between its commits (:mod:`.writer`: what a claim found
        stored): on this connection, whose own commits leave its pages current, it costs
        half what it does on our reader's (:mod:`.rows`), which finds the file changed by
        every commit and reads the key index's pages again (6 against 12 us an answer at
        ``stub+250``, docs/benchmarks.md section 2).
        """
        with self._lock:
            return self._present(keys)

    def _present(self, keys: Sequence[str]) -> set[str]:
        present: set[str] = set()
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            present.update(
                key
                for (key,) in self._db.execute(
                    f"SELECT key FROM Cache WHERE raw = 1 AND key IN ({marks})", chunk
                )
            )
        return present

    def close(self) -> None:
        with self._lock:
            self._db.close()
