"""The one form of a cache folder, marked in it; a folder of an older form is refused.

The read path knows one form: keys of the draw-chunk scheme (``g2-``,
:mod:`geval_async.study.keys`) and entries packed as :mod:`.stored` writes them. A folder in
that form holds a small file ``schema`` beside its ``cache.db``, written when geval-async
creates the folder or moves it to that form. A folder without it (written by a version before
the mark, or a ``cache.db`` copied alone) is checked when it is opened: one look in the key
index for the first scheme's keys (``g1-``) and one pass over the values for an entry stored
as JSON (the form before packing; 1.4 s for 100,000 entries on a busy machine); a folder that
holds neither is in the current form, and is marked when it may be written (so the check
runs once). Both looks read through :mod:`.readonly`, before diskcache writes anything, and
only in a folder that is not marked.

A folder of the older form is moved once, by ``geval-async cache migrate CONFIG``
(:mod:`.legacy`); every other command refuses it with one line naming the folder and that
command, and writes nothing. A folder marked by a newer geval-async is refused too.
"""

from __future__ import annotations

import errno
import shlex
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import diskcache

from ...errors import CacheError, ConfigError
from .readonly import ReadOnlyCache

__all__ = [
    "RESUME",
    "SCHEMA",
    "cache_errors",
    "check_form",
    "check_is_cache",
    "disk_full",
    "existing_cache",
    "journal_segments",
    "mark_current",
]

SCHEMA = 2
_MARK = "schema"
_TEXT = "geval-async cache schema {}\n"
_OLD_KEYS = "g1-"
_JSON_ENTRY = b"{"  # an entry stored as its JSON, before the packed form
JOURNAL = "journal"  # where older runs kept answers before storing them


def check_form(directory: Path, rows: Callable[[], ReadOnlyCache]) -> bool:
    """Whether the folder is in the current form and marked (False: current, not marked yet).
    ``rows`` gives the folder's entries, read only: asked for only when the folder is not
    marked (a marked folder is in its form without a look at its entries).

    Raises:
        CacheError: the folder holds entries of the older form, or was marked by a newer
            geval-async.
    """
    if journal_segments(directory):
        raise _old(directory, "answers of a stopped run in its journal (journal/)")
    marked = _marked(directory)
    if marked == SCHEMA:
        return True
    if marked is not None and marked > SCHEMA:
        raise CacheError(
            f"{directory}: this cache folder was written by a newer geval-async (cache schema "
            f"{marked}, this one reads {SCHEMA}); use that version, or upgrade"
        )
    entries = rows()
    keys = list(entries.iterkeys())
    if any(key.startswith(_OLD_KEYS) for key in keys):
        raise _old(directory, "keys of the first scheme (g1-)")
    for key in keys:
        value = entries.get(key)
        if isinstance(value, bytes) and value.startswith(_JSON_ENTRY):
            raise _old(directory, "entries stored as JSON")
    return False


# What geval-async itself keeps in a cache folder besides diskcache's files: a folder holding
# only these (or nothing) is taken as a cache; anything else is someone else's folder.
_OURS = frozenset({_MARK, JOURNAL, "claims", "batches", "endpoints.json", "spend.jsonl"})


def check_is_cache(directory: Path) -> None:
    """Refuse a folder without a cache.db that holds files of its own (ConfigError): a path
    given by mistake (a home folder, a data folder), which a run would fill with its files."""
    try:
        names = {path.name for path in directory.iterdir()}
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise ConfigError(
            f"{directory}: a file, not a cache folder: check --cache (or [cache] path)"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"{directory}: cannot read the cache folder ({exc.strerror}); fix its permissions "
            "or pass --cache with another folder"
        ) from None
    others = sorted(name for name in names if name not in _OURS and not name.startswith("."))
    if others:
        raise ConfigError(
            f"{directory}: not a cache folder (it holds {others[0]!r} and no cache.db); "
            "pass --cache with a new or empty folder"
        )


def journal_segments(directory: Path) -> list[Path]:
    """The segments of the journals that runs of an older geval-async kept in the folder (the
    answers they received before storing them), in the order written."""
    try:
        return sorted((directory / JOURNAL).glob("*.journal"))
    except OSError:
        return []


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
    ``{folder}: {doing} ({error}); {remedy}``. A database whose own structure is damaged (its
    schema text, which sqlite's error then quotes in bytes that do not decode) says so."""
    try:
        yield
    except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
        tail = f"; {remedy}" if remedy else ""
        raise CacheError(f"{folder}: {doing} ({exc}){tail}") from exc
    except UnicodeDecodeError as exc:
        raise CacheError(
            f"{folder}: {doing} (its database is damaged: "
            f"{exc.object[: exc.start].decode(errors='replace')}...); restore the folder from "
            "a copy, or move it aside and run again to ask its answers anew"
        ) from exc


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (a CacheError, or what it was translated from) says the disk holding the
    folder has no room left: SQLite's "database or disk is full", or an OSError of no space or
    of a full quota. Room may come back (the user frees some), so such a write is worth trying
    again, where a damaged or read-only folder's is not."""
    seen: BaseException | None = exc
    while seen is not None:
        if getattr(seen, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return True
        if isinstance(seen, sqlite3.OperationalError) and "disk is full" in str(seen):
            return True
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        seen = seen.__cause__
    return False


def existing_cache(path: Path, source: Path | None = None) -> Path:
    """``path``, when it is a cache folder; else ConfigError saying what is there instead
    (``source``: the study config whose cache it is, named in the command that fills it)."""
    path = Path(path)
    try:
        exists, is_dir = path.exists(), path.is_dir()
        has_database = is_dir and (path / "cache.db").is_file()
    except OSError as exc:  # a folder above it the user may not search
        raise ConfigError(
            f"{path}: cannot look at the cache folder ({exc.strerror}); fix the permissions "
            "of the folders above it, or pass --cache with another folder"
        ) from None
    if not exists:
        config = "CONFIG" if source is None else shlex.quote(str(source))
        raise ConfigError(
            f"{path}: no cache folder there: check --cache (or [cache] path), or run "
            f"`geval-async run {config}` first to fill it"
        )
    if not is_dir:
        raise ConfigError(f"{path}: a file, not a cache folder: check --cache (or [cache] path)")
    if not has_database:
        raise ConfigError(f"{path}: not a cache folder (no cache.db); check the path")
    return path
