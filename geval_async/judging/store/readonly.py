"""Reading a cache folder without writing to it: the one place that reads diskcache's table.

``diskcache.Cache`` writes its settings every time it opens a folder, so it cannot open one the
user may not write (a shared drive mounted read-only, a co-author's folder), nor look at a
folder before it is known to be a cache of ours; and its listing stops at a key that is not
valid text, which a damaged byte makes (``cache verify`` counts such keys, ``--repair`` removes
them). Those reads are done here, and only those: ``SELECT`` only,
through a SQLite connection opened ``mode=ro`` (or ``immutable`` when nobody can be writing
it), and nothing else. A row reads as an entry under the rule of :mod:`.disk` (raw bytes kept
in the row; anything else is :data:`~.disk.DAMAGED`), and no file a row names is opened.

What this relies on of the file diskcache writes (``tests/test_lookups.py`` and the fuzz
suite's cache rows write it through diskcache and read it back here and through diskcache
alike, so that a diskcache release that changes it fails those tests, not a user's cache):
``cache.db`` with a table ``Cache`` of one row per key, its columns ``key``, ``raw``,
``mode``, ``filename`` and ``value``.

sqlite needs a ``-shm`` file beside a WAL database to share it with writers. When the folder
can be written, or a writer has the database open (its ``-wal`` file exists), the database is
opened ``mode=ro`` and reads alongside writers; when the folder cannot be written and nobody
has it open, nobody can be writing it: it is opened ``immutable``, which creates no file.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .disk import DAMAGED, in_row

__all__ = ["ReadOnlyCache"]

_KEY = "raw = 1 AND typeof(key) = 'text'"


class ReadOnlyCache:
    """The entries of a cache folder, read without writing: the part of ``diskcache.Cache``'s
    API the read-only commands use (``get``, ``iterkeys``, ``in``, ``len``).

    Raises:
        sqlite3.Error: the folder's ``cache.db`` is not a cache diskcache wrote, or cannot be
            read.
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
        # Keys that are not valid text (a damaged byte) cannot be named: counted by iterkeys.
        self.unnamed = 0
        try:
            self._db.execute("SELECT key, raw, mode, filename, value FROM Cache LIMIT 1")
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
            # Text as bytes: a damaged key is told apart here instead of failing the query.
            db.text_factory = bytes
            with self._lock:
                self._connections.append(db)
            self._local.db = db
        return db

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` as :class:`~.disk.EntryDisk` fetches it; ``default`` when
        absent."""
        row = self._db.execute(
            f"SELECT mode, filename, value FROM Cache WHERE key = ? AND {_KEY}", (key,)
        ).fetchone()
        if row is None:
            return default
        found = in_row(*row)
        return DAMAGED if found is None else found

    def __contains__(self, key: str) -> bool:
        row = self._db.execute(f"SELECT 1 FROM Cache WHERE key = ? AND {_KEY}", (key,))
        return row.fetchone() is not None

    def iterkeys(self) -> Iterator[str]:
        """The text keys in sorted order (a key that does not decode is counted in
        :attr:`unnamed` and skipped)."""
        self.unnamed = 0
        for (raw,) in self._db.execute(f"SELECT key FROM Cache WHERE {_KEY} ORDER BY key"):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                self.unnamed += 1

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM Cache").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for db in connections:
            db.close()
        self._local = threading.local()
