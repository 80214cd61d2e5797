"""What diskcache, sqlite and the file system raise about a cache folder, as one CacheError.

The one place where those errors become :class:`~geval_async.errors.CacheError`: the answers
(:mod:`.cache`), the claims beside them (:mod:`.claims`) and our reader of their rows
(:mod:`.rows`) open, read and write inside ``with cache_errors(folder, doing, remedy)``, so a
user sees one line naming the folder, what failed and what to do, never a traceback.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import diskcache

from ..errors import CacheError

__all__ = ["RESUME", "cache_errors"]

# What to do when a write failed: the run resumes from what was stored.
RESUME = "free space or fix permissions, then run again to resume"


@contextmanager
def cache_errors(folder: Path, doing: str, remedy: str = "") -> Iterator[None]:
    """Turn an OSError, sqlite3.Error or diskcache.Timeout inside into a CacheError that reads
    ``{folder}: {doing} ({error}); {remedy}``."""
    try:
        yield
    except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
        tail = f"; {remedy}" if remedy else ""
        raise CacheError(f"{folder}: {doing} ({exc}){tail}") from exc
