"""New answers written into the cache's table many at a time: one INSERT statement a group.

A run stores each answer the moment it arrives, in groups (:mod:`.writer`). diskcache's public
API adds one key a call: ``Cache.add`` runs its own SELECT and INSERT through a Python layer
that holds the GIL, per answer, while the event loop's thread waits for that GIL. Storing an
answer that way cost 93-107 and 81-95 CPU us in groups of 6 and 25, against 60-71 and 35-53
here (``bench/writes.py``; the tree before, 887c86f, through diskcache's private connection:
71-75 and 50-53); at ``stub+250`` the writes' share of the writer thread's CPU a request fell
from 0.16 to 0.14 ms at 16 in flight and from 0.13 to 0.09 ms at 64.
diskcache has no call that adds many keys, so the new answers
of a group are written here, openly, with a connection of our own to the folder's
``cache.db``: one ``INSERT OR IGNORE`` of all the group's rows, a statement that is its own
transaction (atomic across processes, as ``add`` is); the table's unique key index skips a
key that has a row. Only when it skipped one (another writer's answer, rare) are the group's
rows read back to tell which. One statement a group, where ``BEGIN IMMEDIATE``, a ``SELECT
... IN`` of the keys, an ``executemany`` and ``COMMIT`` were three statements and a step a
row: each a hand-back of the GIL that the event loop's thread holds most of the time, so a
wait for it. In one thread (no GIL to wait for) an answer cost 81-86 against 95-98 CPU us in
groups of 4, 58-63 against 64-65 in 16; in the run at ``stub+250``, 16 in flight, the
writes 0.105-0.120 against 0.125-0.138 ms a request, three pairs.
An earlier try, one INSERT of many rows inside the same transaction
and SELECT, was neutral: the statements around it stayed.

The rows are exactly the ones ``Cache.add`` writes for a ``str`` key and a ``bytes`` value
kept in its row (what a cache opened as :class:`~geval_async.judging.store.cache.JudgeCache` opens
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

import functools
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["AnswerTable"]

# sqlite's default limit on the parameters of one statement is 32,766 (999 before 3.32).
_CHUNK = 900
_RAW_BYTES = 1  # diskcache's mode of a bytes value kept in its row (Cache.add writes it so)
# Rows a statement: 4 parameters each, under the limit of 999 of sqlite before 3.32.
_ROWS = 200
_ROW = f"(?, 1, ?, NULL, ?, 0, NULL, 0, {_RAW_BYTES}, NULL, ?)"


@functools.lru_cache(maxsize=_ROWS)
def _insert(count: int) -> str:
    """The statement that adds ``count`` rows, each unless its key has one (the key index
    ``Cache_key_raw`` is unique): one sqlite step and one hand-back of the GIL a group."""
    return (
        "INSERT OR IGNORE INTO Cache (key, raw, store_time, expire_time, access_time,"
        " access_count, tag, size, mode, filename, value) VALUES " + ",".join([_ROW] * count)
    )


class AnswerTable:
    """Adds rows for new keys to a cache folder's ``Cache`` table, many in one statement."""

    def __init__(self, directory: Path, *, timeout: float = 60.0) -> None:
        self._db = sqlite3.connect(
            str(directory / "cache.db"),
            timeout=timeout,
            isolation_level=None,  # autocommit: each statement its own transaction
            check_same_thread=False,
        )
        self._lock = threading.Lock()
        # As diskcache sets its connections (JudgeCache keeps its defaults for these two).
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")

    def add_new(self, rows: Sequence[tuple[str, bytes]]) -> list[bool]:
        """Store each ``(key, value)`` whose key has no row yet.

        Returns, for each, whether it was stored: False when the key had a row (another
        writer's, or an earlier pair's of ``rows``), which is left as it is. Up to
        ``_ROWS`` rows are written in one statement, its own transaction.
        """
        done: list[bool] = []
        now = time.time()
        with self._lock:
            for start in range(0, len(rows), _ROWS):
                chunk = rows[start : start + _ROWS]
                params: list[object] = []
                for key, value in chunk:
                    params += (key, now, now, value)
                cursor = self._db.execute(_insert(len(chunk)), params)
                inserted = cursor.rowcount
                if inserted == len(chunk):
                    done += [True] * inserted
                else:
                    done += self._inserted(chunk, inserted, cursor.lastrowid or 0)
        return done

    def _inserted(self, rows: Sequence[tuple[str, bytes]], inserted: int, last: int) -> list[bool]:
        """Which of ``rows`` an insert that skipped some stored: the statement's own rows
        are the last ``inserted`` rowids, up to ``last`` (sqlite gives a new row the largest
        rowid plus one, and the statement held the write lock throughout)."""
        if not inserted:
            return [False] * len(rows)
        ours = {
            key
            for key, rowid in self._rows([key for key, _ in rows], "key, rowid")
            if last - inserted < rowid <= last
        }
        done = []
        for key, _ in rows:
            done.append(key in ours)
            ours.discard(key)  # a second pair of the same key was not stored
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
        return {key for (key,) in self._rows(keys, "key")}

    def _rows(self, keys: Sequence[str], columns: str) -> list[Any]:
        found: list[Any] = []
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            found += self._db.execute(
                f"SELECT {columns} FROM Cache WHERE raw = 1 AND key IN ({marks})", chunk
            )
        return found

    def close(self) -> None:
        with self._lock:
            self._db.close()
