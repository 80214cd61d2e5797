"""How a cache folder's rows become keys and values: raw bytes kept in the row, nothing else.

diskcache hands the conversion of keys and values to a ``diskcache.Disk`` (its documented
``disk=`` extension point). Its own Disk also keeps large values in files beside the table,
pickles anything that is not bytes, text or a number, and deletes a value's file when its
row is replaced. A cache folder travels (a shared drive, a co-author's copy, an unpacked
archive), so its rows are input: a row in diskcache's pickle mode would run code when read, and
a row naming a file (``/etc/passwd``, ``../../x``, ``/dev/zero``, a FIFO) would be read, or
deleted when the entry is replaced.

:class:`EntryDisk` stores and fetches only bytes kept in their row. A row of any other mode, or
one that names a file, reads as :data:`DAMAGED` (its file never opened, its pickle never
loaded), and its ``remove`` never touches a path, so replacing or deleting such a row deletes
the row alone. A key not stored as text reads as :data:`DAMAGED` too (diskcache pickles keys
that are not text, bytes or numbers). The rows it writes are diskcache's own raw rows: a plain
``diskcache.Cache`` on the folder reads every answer through ``get``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import diskcache
from diskcache import UNKNOWN

__all__ = ["DAMAGED", "EntryDisk", "in_row"]

# The mode this Disk gives a value it stores (what diskcache's own Disk calls MODE_RAW: the
# value kept as it is, in the row); ``fetch`` is handed back what ``store`` returned.
MODE_RAW = 1


class _Damaged:
    """What a row that is not raw bytes kept in the row reads as."""

    def __repr__(self) -> str:
        return "DAMAGED"


DAMAGED: Any = _Damaged()


def in_row(mode: object, filename: object, value: object) -> bytes | None:
    """The bytes of a row's value when it is raw bytes kept in the row; None otherwise (the
    one rule, shared with the reader of a read-only folder, :mod:`.readonly`)."""
    if mode == MODE_RAW and filename is None and isinstance(value, bytes):
        return value
    return None


class EntryDisk(diskcache.Disk):
    """A ``diskcache.Disk`` that keeps text keys and bytes values in their rows, and reads
    nothing else."""

    def __init__(self, directory: str, **settings: Any) -> None:
        # A folder's Settings table may name disk settings this class has no use for (another
        # tool's, or a damaged folder's): they are ignored, not a TypeError on open.
        super().__init__(directory, min_file_size=0, pickle_protocol=0)

    def put(self, key: Any) -> tuple[Any, bool]:
        if type(key) is not str:
            raise TypeError(f"a cache key is text, not {type(key).__name__}")
        return key, True

    def get(self, key: Any, raw: bool) -> Any:
        if raw and type(key) is str:
            return key
        return DAMAGED  # a pickled key (never loaded) or a bytes or number key

    def store(self, value: Any, read: bool, key: Any = UNKNOWN) -> tuple[int, int, None, Any]:
        if type(value) is not bytes or read:
            raise TypeError("a cache entry is stored as bytes")
        return 0, MODE_RAW, None, sqlite3.Binary(value)

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> Any:
        found = in_row(mode, filename, value)
        return DAMAGED if found is None else found

    def filename(self, key: Any = UNKNOWN, value: Any = UNKNOWN) -> tuple[str, str]:
        raise TypeError("a cache entry is kept in its row, never in a file")

    def remove(self, file_path: str) -> None:
        """Nothing: no value of ours lives in a file, and a row's file name is not to be
        trusted (it may name any file on the machine)."""
