"""Our own reader of a cache folder's rows: many entries at once, straight from its sqlite file.

diskcache's public API reads one key a call (``Cache.get``: its SELECT and a Python layer).
A rerun looks up every entry of its plan, and ``status`` and the scoring stage read them all:
the heads of 100,000 entries through ``Cache.get`` took 3.2-3.5 CPU s, against 0.56-0.66 s
for one pass over the file here (the same cache, the same loaded machine; docs/benchmarks.md,
"The store through diskcache's public API"), and the rerun's whole floor is 1.5 s (benchmark
3). diskcache has no call that reads many keys or walks the values in the file's order, so
those reads are ours, here, with a connection of our own that only reads. Everything else
(every write but a group's new answers, :mod:`.answer_table`; a single ``get``, the count, the
keys in order in a writable folder) goes through diskcache's public API. A folder the user
may not write is read here entirely: ``diskcache.Cache`` creates its tables and stores its
settings on every open, so it cannot open such a folder.

What this relies on, and nothing more, of the file diskcache writes (``tests/test_rows.py``
writes it through diskcache's public API and reads it back here, so that a diskcache release
that changes any of it fails that test, not a user's cache):

* the folder's ``cache.db``, a table ``Cache`` with one row per key;
* its column ``key``: a ``str`` key as sqlite TEXT (other keys never hold an entry);
* its column ``value``: a ``bytes`` value kept in the row as a BLOB, else NULL;
* its column ``filename``: where a value not kept in the row is, relative to the folder.

geval-async opens its caches with ``disk_min_file_size`` above any answer, so every entry it
writes is kept in its row; a value in a file (a cache written before, or another tool's) reads
as None from the bulk calls, and the caller reads it alone (``Cache.get``, or :meth:`get`).

sqlite needs a ``-shm`` file beside a WAL database to share it with writers. When the folder
can be written, or a writer has the database open (its ``-wal`` file exists), the database is
opened ``mode=ro`` and reads alongside writers. When the folder cannot be written and nobody
has it open, nobody can be writing it: it is opened ``immutable``, which creates no file.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = ["CacheRows"]

# sqlite's default limit on the parameters of one statement is 32,766 (999 before 3.32).
_CHUNK = 900
_STR_KEY = "typeof(key) = 'text'"
_IN_ROW = "CASE WHEN typeof(value) = 'blob' THEN value END"
# sqlite's page cache per connection (its default is 2 MB): a rerun's keyed lookups of a
# 1,000,000-entry cache (1.1 GB) read 40% fewer pages from the file with 16 MB, which hold the
# interior pages of the table and its key index (docs/benchmarks.md section 9). Filled only as
# pages are read: a small cache costs nothing more.
_PAGE_CACHE = "PRAGMA cache_size = -16384"


class CacheRows:
    """The rows of a cache folder, read-only: many keys at once, one pass, or one key.

    Each thread reads through a connection of its own (a run's writer thread asks which keys
    are stored while the event loop's thread reads ahead), as diskcache does.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        database = directory / "cache.db"
        wal = directory / "cache.db-wal"
        path = quote(str(database.resolve()))
        shared = os.access(directory, os.W_OK) or wal.exists()
        self._uri = f"file:{path}?mode=ro" if shared else f"file:{path}?immutable=1"
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            self._db.execute("SELECT key FROM Cache LIMIT 1").fetchall()
        except sqlite3.OperationalError:
            self.close()
            if not shared or (wal.exists() and wal.stat().st_size > 0):
                raise
            # A WAL database in a folder we may not write: no -shm can be made, but with an
            # empty write-ahead log the database file itself is complete.
            self._uri = f"file:{path}?immutable=1"
            try:
                self._db.execute("SELECT key FROM Cache LIMIT 1").fetchall()
            except sqlite3.Error:
                self.close()
                raise

    @property
    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
            db.execute(_PAGE_CACHE)
            with self._lock:
                self._connections.append(db)
            self._local.db = db
        return db

    def read(self, keys: Sequence[str]) -> dict[str, bytes | None]:
        """The values of those ``keys`` that have a row; a value not kept in the row is None."""
        return dict(self._select(f"key, {_IN_ROW}", keys))

    def stored(self, keys: Sequence[str]) -> set[str]:
        """Those of ``keys`` that have a row, without reading their values."""
        return {key for (key,) in self._select("key", keys)}

    def scan(self) -> Iterator[tuple[str, bytes | None]]:
        """Every row with a ``str`` key, as ``(key, value)`` in the file's order: one pass over
        it, the cheapest way to read most of it (a value not kept in the row is None)."""
        return iter(self._db.execute(f"SELECT key, {_IN_ROW} FROM Cache WHERE {_STR_KEY}"))

    def count(self) -> int:
        """How many rows the table holds (sqlite counts them from the smallest index)."""
        return int(self._db.execute("SELECT count(*) FROM Cache").fetchone()[0])

    def get(self, key: str, default: object = None) -> object:
        """The value of ``key`` (bytes, or a str a tool stored as text), read from its row or
        its file; ``default`` when absent. ValueError: its file is gone (the entry is damaged).
        """
        row = self._db.execute(
            f"SELECT value, filename FROM Cache WHERE key = ? AND {_STR_KEY}", (key,)
        ).fetchone()
        if row is None:
            return default
        value, filename = row
        if value is not None or filename is None:
            return value
        try:
            return (self.directory / filename).read_bytes()
        except FileNotFoundError as exc:
            raise ValueError(f"the file of {key} is gone") from exc

    def first_key(self, prefix: str) -> str | None:
        """The first ``str`` key that starts with ``prefix`` (one look in the key index)."""
        row = self._db.execute(
            f"SELECT key FROM Cache WHERE {_STR_KEY} AND key >= ? ORDER BY key LIMIT 1",
            (prefix,),
        ).fetchone()
        return str(row[0]) if row is not None and str(row[0]).startswith(prefix) else None

    def first_value(self, start: bytes) -> str | None:
        """The key of a row whose value, kept in the row, starts with ``start`` (one pass)."""
        row = self._db.execute(
            f"SELECT key FROM Cache WHERE {_STR_KEY} AND typeof(value) = 'blob'"
            " AND substr(value, 1, ?) = ? LIMIT 1",
            (len(start), start),
        ).fetchone()
        return None if row is None else str(row[0])

    def iterkeys(self) -> Iterator[str]:
        """The ``str`` keys in sorted order."""
        for (key,) in self._db.execute(f"SELECT key FROM Cache WHERE {_STR_KEY} ORDER BY key"):
            yield key

    def __len__(self) -> int:
        return self.count()

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for db in connections:
            db.close()
        self._local = threading.local()

    def _select(self, columns: str, keys: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        for start in range(0, len(keys), _CHUNK):
            chunk = list(keys[start : start + _CHUNK])
            marks = ",".join("?" * len(chunk))
            yield from self._db.execute(
                f"SELECT {columns} FROM Cache WHERE {_STR_KEY} AND key IN ({marks})", chunk
            ).fetchall()
