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
from collections.abc import Iterable, Sequence
from typing import Any

import diskcache
import diskcache.core

__all__ = ["delete_rows", "insert_rows", "read_rows"]

# sqlite's default limit on the parameters of one statement is 32,766 (999 before 3.32).
_CHUNK = 900


def read_rows(cache: diskcache.Cache, keys: Sequence[str]) -> dict[str, Any]:
    """The stored values of those ``keys`` that have a row; a value kept in a file is None.

    A value kept in a file (written by diskcache itself) reads as None: the caller goes
    through ``cache.get`` for it, which knows the file.
    """
    found: dict[str, Any] = {}
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        rows = cache._sql(  # diskcache's own connection, inside the caller's transaction
            f"SELECT key, mode, value FROM Cache WHERE raw = 1 AND key IN ({marks})", chunk
        ).fetchall()
        for key, mode, value in rows:
            found[key] = (
                bytes(value) if mode == diskcache.core.MODE_RAW and value is not None else None
            )
    return found


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
