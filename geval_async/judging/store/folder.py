"""The one form of a cache folder, marked in it; a folder of an older form is refused.

The read path knows one form: keys of the draw-chunk scheme (``g2-``,
:mod:`geval_async.study.keys`) and entries packed as :mod:`.stored` writes them. A folder in
that form holds a small file ``schema`` beside its ``cache.db``, written when geval-async
creates the folder or moves it to that form. A folder without it (written by a version before
the mark, or a ``cache.db`` copied alone) is checked when it is opened: one look in the key
index for the first scheme's keys (``g1-``) and one pass over the values for an entry stored
as JSON (the form before packing; 1.4 s for 100,000 entries on a busy machine); a folder that
holds neither is in the current form, and is marked when it may be written (so the check
runs once).

A folder of the older form is moved once, by ``geval-async cache migrate CONFIG``
(:mod:`.legacy`); every other command refuses it with one line naming the folder and that
command, and writes nothing. A folder marked by a newer geval-async is refused too.
"""

from __future__ import annotations

import shlex
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import diskcache

from ...errors import CacheError, ConfigError
from .rows import CacheRows

__all__ = ["RESUME", "SCHEMA", "cache_errors", "check_form", "existing_cache", "mark_current"]

SCHEMA = 2
_MARK = "schema"
_TEXT = "geval-async cache schema {}\n"
_OLD_KEYS = "g1-"
_JSON_ENTRY = b"{"  # an entry stored as its JSON, before the packed form


def check_form(directory: Path, rows: CacheRows) -> bool:
    """Whether the folder is in the current form and marked (False: current, not marked yet).

    Raises:
        CacheError: the folder holds entries of the older form, or was marked by a newer
            geval-async.
    """
    marked = _marked(directory)
    if marked == SCHEMA:
        return True
    if marked is not None and marked > SCHEMA:
        raise CacheError(
            f"{directory}: this cache folder was written by a newer geval-async (cache schema "
            f"{marked}, this one reads {SCHEMA}); use that version, or upgrade"
        )
    if rows.first_key(_OLD_KEYS) is not None:
        raise _old(directory, "keys of the first scheme (g1-)")
    if rows.first_value(_JSON_ENTRY) is not None:
        raise _old(directory, "entries stored as JSON")
    return False


def mark_current(directory: Path) -> None:
    """Mark the folder as in the current form (OSError when it cannot be written)."""
    (directory / _MARK).write_text(_TEXT.format(SCHEMA), encoding="utf-8")


def _marked(directory: Path) -> int | None:
    try:
        text = (directory / _MARK).read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    words = text.split()
    return int(words[-1]) if len(words) == 4 and words[-1].isdigit() else None


def _old(directory: Path, what: str) -> CacheError:
    return CacheError(
        f"{directory}: this cache folder holds {what}, written by an older geval-async; run "
        "`geval-async cache migrate CONFIG` once (with the study's config) to move it to the "
        "current form"
    )


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


def existing_cache(path: Path, source: Path | None = None) -> Path:
    """``path``, when it is a cache folder; else ConfigError saying what is there instead
    (``source``: the study config whose cache it is, named in the command that fills it)."""
    path = Path(path)
    if not path.exists():
        config = "CONFIG" if source is None else shlex.quote(str(source))
        raise ConfigError(
            f"{path}: no cache folder there: check --cache (or [cache] path), or run "
            f"`geval-async run {config}` first to fill it"
        )
    if not path.is_dir():
        raise ConfigError(f"{path}: a file, not a cache folder: check --cache (or [cache] path)")
    if not (path / "cache.db").is_file():
        raise ConfigError(f"{path}: not a cache folder (no cache.db); check the path")
    return path
