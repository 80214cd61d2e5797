"""Reading a cache folder without writing a byte: for status, scoring, export and checks.

``diskcache.Cache`` cannot open a folder it may not write: it creates its tables and stores its
settings on every open. A co-author's copy, a published archive unpacked on a read-only mount,
or a cache shared on a group drive must still be readable, and reading must not touch it. So
the commands that only read open the folder's ``cache.db`` through sqlite directly, read-only,
and decode values the way diskcache stored them (in the row, or in a file next to it).

sqlite needs a ``-shm`` file beside a WAL database to share it with writers. When the folder
can be written, or a writer has the database open (its ``-wal`` file exists), the database is
opened ``mode=ro`` and reads alongside writers. When the folder cannot be written and nobody
has it open, nobody can be writing it: it is opened ``immutable``, which creates no file.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

# How diskcache stores a value (diskcache.core.MODE_*): in the row, or in a file.
_MODE_RAW, _MODE_BINARY, _MODE_TEXT = 1, 2, 3


class ReadOnlyStore:
    """The entries of a diskcache folder, read-only: ``get``, ``iterkeys``, ``len``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        database = directory / "cache.db"
        wal = directory / "cache.db-wal"
        path = quote(str(database.resolve()))
        shared = os.access(directory, os.W_OK) or wal.exists()
        uri = f"file:{path}?mode=ro" if shared else f"file:{path}?immutable=1"
        self._db = sqlite3.connect(uri, uri=True, check_same_thread=False)
        try:
            self._db.execute("SELECT key FROM Cache LIMIT 1").fetchall()
        except sqlite3.OperationalError:
            self._db.close()
            if not shared or (wal.exists() and wal.stat().st_size > 0):
                raise
            # A WAL database in a folder we may not write: no -shm can be made, but with an
            # empty write-ahead log the database file itself is complete.
            self._db = sqlite3.connect(
                f"file:{path}?immutable=1", uri=True, check_same_thread=False
            )

    def get(self, key: str, default: object = None) -> object:
        row = self._db.execute(
            "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1",
            (key,),
        ).fetchone()
        if row is None:
            return default
        mode, filename, value = row
        if mode == _MODE_RAW:
            return bytes(value) if isinstance(value, bytes | memoryview) else value
        if mode == _MODE_BINARY:
            return (self.directory / filename).read_bytes()
        if mode == _MODE_TEXT:
            return (self.directory / filename).read_text(encoding="utf-8")
        # A pickled value: never written by geval-async, so not an entry.
        raise ValueError(f"value stored in diskcache mode {mode}")

    def iterkeys(self) -> Iterator[object]:
        cursor = self._db.execute("SELECT key FROM Cache WHERE raw = 1 ORDER BY key")
        for (key,) in cursor:
            yield key

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM Cache").fetchone()[0])

    def close(self) -> None:
        self._db.close()
