"""Many rows of a diskcache at once: the hot path's reads and writes, one statement each.

diskcache's ``add``, ``get`` and ``delete`` each run three to five SQL statements through a
Python layer; at thousands of answers a second that was most of the client's time (the answer
and its claim written, the claim read and deleted: about nine statements a request). The
functions here do the same to many keys with one ``SELECT ... IN`` or one ``executemany``,
inside a transaction the caller opened with ``cache.transact()``.

They write exactly the rows diskcache writes for a ``str`` key and a ``bytes`` value kept in the
table (``raw = 1``, ``mode = MODE_RAW``, no expiry, no tag, size 0), so ``diskcache.Cache.get``
and everything else read them as its own; the table's triggers keep its count. Values are kept
in the table whatever their size (diskcache would move one over 32 kB to a file; it reads both).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import diskcache
import diskcache.core

__all__ = [
    "Execute",
    "count_rows",
    "delete_rows",
    "insert_rows",
    "read_rows",
    "scan_rows",
    "stored_keys",
]

# Runs one SQL statement with its parameters, as ``sqlite3.Connection.execute`` does.
Execute = Callable[[str, Sequence[Any]], sqlite3.Cursor]

# sqlite's default limit on the parameters of one statement is 32,766 (999 before 3.32).
_CHUNK = 900


def read_rows(execute: Execute, keys: Sequence[str]) -> dict[str, Any]:
    """The stored values of those ``keys`` that have a row; a value kept in a file is None.

    ``execute`` runs one statement: diskcache's ``Cache._sql`` (inside the caller's
    transaction) or a read-only store's connection. A value kept in a file (written by
    diskcache itself) reads as None: the caller goes through ``cache.get`` for it, which knows
    the file.
    """
    return {
        key: bytes(value) if mode == diskcache.core.MODE_RAW and value is not None else None
        for key, mode, value in _select(execute, "key, mode, value", keys)
    }


def count_rows(execute: Execute) -> int:
    """How many rows the table holds (sqlite counts them from the smallest index)."""
    return int(execute("SELECT count(*) FROM Cache", ()).fetchone()[0])


def scan_rows(execute: Execute) -> Iterator[tuple[str, Any]]:
    """Every row with a ``str`` key, as ``(key, value)`` in the table's own order: one pass
    over the file, the cheapest way to read most of it. A value kept in a file is None, as in
    :func:`read_rows`; a value in the row is given as sqlite gives it (bytes for an entry)."""
    return iter(
        execute(
            "SELECT key, CASE WHEN mode = ? THEN value END FROM Cache WHERE raw = 1",
            (diskcache.core.MODE_RAW,),
        )
    )


def stored_keys(execute: Execute, keys: Sequence[str]) -> set[str]:
    """Those of ``keys`` that have a row, without reading their values."""
    return {key for (key,) in _select(execute, "key", keys)}


def _select(execute: Execute, columns: str, keys: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    for start in range(0, len(keys), _CHUNK):
        chunk = list(keys[start : start + _CHUNK])
        marks = ",".join("?" * len(chunk))
        yield from execute(
            f"SELECT {columns} FROM Cache WHERE raw = 1 AND key IN ({marks})", chunk
        ).fetchall()


def insert_rows(cache: diskcache.Cache, rows: Iterable[tuple[str, bytes]]) -> None:
    """Insert ``(key, value)`` rows for keys that have none (checked by the caller)."""
    now = time.time()
    cache._con.executemany(
        "INSERT INTO Cache(key, raw, store_time, expire_time, access_time, access_count,"
        " tag, size, mode, filename, value) VALUES (?, 1, ?, NULL, ?, 0, NULL, 0, ?, NULL, ?)",
        [(key, now, now, diskcache.core.MODE_RAW, sqlite3.Binary(value)) for key, value in rows],
    )


def delete_rows(cache: diskcache.Cache, rows: Iterable[tuple[str, bytes]]) -> None:
    """Delete the ``(key, value)`` rows whose stored value is still exactly ``value``."""
    cache._con.executemany(
        "DELETE FROM Cache WHERE key = ? AND raw = 1 AND value = ?",
        [(key, sqlite3.Binary(value)) for key, value in rows],
    )
