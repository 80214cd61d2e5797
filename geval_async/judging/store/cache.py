"""The judge-response cache: a ``diskcache.Cache`` keyed by request, read and written through
its public API.

One entry per request key. An entry holds the raw response body as received plus small
metadata (time, latency, usage, attempts, HTTP status), so every later stage can re-score from
it; how an entry becomes bytes, and is checked when read back, is :mod:`.stored`. A permanent
refusal (400, content filter, context too long) is stored too, as a ``rejected`` entry, so a
rerun does not pay for it again; transient failures are never stored.

Entries are never evicted (``eviction_policy="none"``): a cache is a record of paid-for
answers, not a best-effort memo. ``add`` is atomic across processes, so two runs of one plan
store each answer once; a run's answers of one turn are stored in one ``transact()``. Every
row goes through :class:`~.disk.EntryDisk`, which keeps and reads raw bytes in the row only:
nothing a folder holds is unpickled, and no file a row names is read or deleted. An entry that
does not decode is counted as corrupted and treated as missing. The commands that only read
(``status``, the scoring stage, ``cache verify`` and ``export``) open the folder through
diskcache too, except where diskcache cannot: it writes its settings whenever it opens a
folder, so a folder the user may not write is read by :mod:`.readonly`, as are a folder not
marked yet (looked at before anything is written) and one holding a key that is not valid
text (diskcache's listing stops at it).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import diskcache

from ...errors import CacheError
from .disk import DAMAGED, EntryDisk
from .folder import RESUME, cache_errors, check_form, check_is_cache, mark_current
from .locks import LOCK_SLICE, said_if_slow, wait_for_lock
from .readonly import ReadOnlyCache
from .stored import ENTRY_VERSION, CachedResponse, EntryHead, decode_head, stored_under

__all__ = ["ENTRY_VERSION", "CachedResponse", "EntryHead", "JudgeCache", "Record"]

_E = TypeVar("_E", CachedResponse, EntryHead)

# (key, the entry's bytes as stored, whether it replaces what the key holds)
Record = tuple[str, bytes, bool]

_PROBE_KEY = "geval-async:probe"
_ABSENT = object()


def open_diskcache(directory: Path, **settings: Any) -> diskcache.Cache:
    """A folder opened with diskcache as every writer of ours opens it (raises what diskcache
    raises). Every setting is named, so none is taken from the folder's own Settings table;
    ``settings``: diskcache settings of this folder's own (the claims' synchronous writes)."""
    with said_if_slow(Path(directory)):
        return diskcache.Cache(
            str(directory),
            disk=EntryDisk,
            eviction_policy="none",
            statistics=False,
            tag_index=False,
            size_limit=2**62,
            cull_limit=0,
            # sqlite waits this long for another process's lock, then our loop looks again
            # (:mod:`.locks`): a Ctrl-C gets through, and the wait names who holds the lock.
            timeout=LOCK_SLICE,
            # A run writes and reads each entry about once: sqlite's page cache and memory map
            # (diskcache's defaults, 32 + 64 MB) would only hold the resident set up.
            sqlite_cache_size=2**11,
            sqlite_mmap_size=0,
            **settings,
        )


@dataclass
class JudgeCache:
    """The cache folder of a study.

    Use as a context manager. With ``create=False`` the folder is opened to read: no entry in
    it is created or changed, a missing folder reads as an empty cache, and a folder the user
    may not write can be read (``status``, the scoring stage, ``cache export``).

    A folder of an older form is refused (CacheError naming ``geval-async cache migrate``,
    before anything is written; :mod:`.folder`), unless ``migrating``: only that command.
    A folder that holds other files and no cache is refused too (ConfigError).
    """

    directory: Path
    create: bool = True
    migrating: bool = False
    corrupted: set[str] = field(default_factory=set)
    _cache: diskcache.Cache | ReadOnlyCache | None = None

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        with cache_errors(self.directory, "cannot read the cache folder"):
            exists = (self.directory / "cache.db").exists()
        if not self.create:
            if exists:
                self._open_to_read()
            return
        if not exists:
            check_is_cache(self.directory)
        marked = self.migrating or (exists and self._checked_before_writing())
        self._open(mark=not marked)  # new, or checked above: in the current form

    def _open(self, *, mark: bool = False) -> None:
        with cache_errors(
            self.directory,
            "cannot open the cache folder",
            "check that it is writable or pass --cache with another folder",
        ):
            self._cache = wait_for_lock(self.directory, lambda: open_diskcache(self.directory))
            if mark:
                mark_current(self.directory)

    def _open_to_read(self) -> None:
        """Open the folder for the commands that only read: through diskcache where the user
        may write it (its opening rewrites diskcache's settings, no entry), through
        :mod:`.readonly` where diskcache cannot open it (a folder the user may not write) or
        must not yet (a folder not marked, whose form is looked at before anything is
        written)."""
        database = self.directory / "cache.db"
        writable = os.access(self.directory, os.W_OK) and os.access(database, os.W_OK)
        if writable and not self.migrating:
            if self._checked_before_writing():
                self._open()
            else:  # in the current form, not marked: read as it is, marked by a writer
                self._cache = self._read_only()
            return
        rows = self._cache = self._read_only()
        try:
            if not self.migrating:
                with cache_errors(self.directory, "cannot read the cache folder"):
                    check_form(self.directory, lambda: rows)
        except BaseException:
            self.close()
            raise

    def _checked_before_writing(self) -> bool:
        """Check the folder's form, read only, before diskcache writes its settings; whether
        it is marked. A database without its table is another process's new folder, made
        this instant: new, so in the current form, and not marked yet."""
        opened: list[ReadOnlyCache] = []  # opened only for a folder not marked

        def rows() -> ReadOnlyCache:
            opened.append(ReadOnlyCache(self.directory))
            return opened[0]

        with cache_errors(self.directory, "cannot read the cache folder"):
            try:
                return check_form(self.directory, rows)
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                return False
            finally:
                for each in opened:
                    each.close()

    def _read_only(self) -> ReadOnlyCache:
        with cache_errors(
            self.directory,
            "cannot read the cache folder",
            "check that it is a geval-async cache folder you may read",
        ):
            return ReadOnlyCache(self.directory)

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._cache is not None:
            cache, self._cache = self._cache, None
            with cache_errors(self.directory, "cannot close the cache folder", RESUME):
                cache.close()

    def check_writable(self) -> None:
        """Write and delete a probe entry, so a read-only or full disk fails before any request."""
        cache = self._require()
        with cache_errors(
            self.directory,
            "the cache folder is not writable",
            "free space, fix its permissions or pass --cache with another folder",
        ):

            def probe() -> None:
                with cache.transact():
                    cache.set(_PROBE_KEY, b"probe")
                    cache.delete(_PROBE_KEY)

            wait_for_lock(self.directory, probe)

    def heads(self, keys: Sequence[str]) -> list[EntryHead | None]:
        """:meth:`head` of each of ``keys``."""
        return [self.head(key) for key in keys]

    def get(self, key: str) -> CachedResponse | None:
        """The entry for ``key``; None when absent or corrupted (then added to ``corrupted``)."""
        return self._read(key, CachedResponse.decode)

    def head(self, key: str) -> EntryHead | None:
        """What a lookup needs of the entry for ``key`` (the entry checked whole, not parsed);
        None when absent or corrupted, as :meth:`get`."""
        return self._read(key, decode_head)

    def _read(self, key: str, decode: Callable[[Any], _E]) -> _E | None:
        if self._cache is None:
            return None
        with cache_errors(self.directory, "cannot read the cache"):
            raw = self._cache.get(key, _ABSENT)
        if raw is _ABSENT:
            return None
        return self._decode(key, raw, decode)

    def stored_value(self, key: str) -> bytes | None:
        """The bytes stored under ``key`` as they are (None when absent or not bytes in the
        row), not decoded: for ``cache migrate``, which reads entries of an older form."""
        if self._cache is None:
            return None
        with cache_errors(self.directory, "cannot read the cache"):
            raw = self._cache.get(key, None)
        return raw if isinstance(raw, bytes) else None

    def _decode(self, key: str, raw: Any, decode: Callable[[Any], _E]) -> _E | None:
        """The entry ``raw`` holds for ``key``; None, and ``key`` counted as corrupted, when it
        is damaged or is the entry of another key."""
        if raw is DAMAGED or (type(raw) is bytes and not stored_under(raw, key)):
            self.corrupted.add(key)
            return None
        try:
            return decode(raw)
        except (ValueError, TypeError):
            self.corrupted.add(key)
            return None

    def stored(self, keys: Sequence[str]) -> set[str]:
        """Those of ``keys`` that have an entry (readable or not)."""
        cache = self._require()
        with cache_errors(self.directory, "cannot read the cache"):
            return {key for key in keys if key in cache}

    def put(self, entry: CachedResponse, *, overwrite: bool = False) -> bool:
        """Store an entry (``overwrite``: replace one, as ``--retry-failed`` replaces a
        refusal); False when another writer stored this key first."""
        return self.put_many([(entry, overwrite)])[0]

    def put_many(self, entries: Sequence[tuple[CachedResponse, bool]]) -> list[bool]:
        """Store ``(entry, overwrite)`` pairs: :meth:`put_records` of their bytes."""
        return self.put_records([(e.key, e.encode(), overwrite) for e, overwrite in entries])

    def put_records(
        self, records: Sequence[Record], *, stop: Callable[[], bool] | None = None
    ) -> list[bool]:
        """Store ``(key, entry's bytes, overwrite)`` records in one transaction: on disk, all
        of them or none, when this returns.

        Returns, for each, whether it was stored (False: another writer, or an earlier record,
        stored that key first). ``stop``: asked while another process holds the lock; True
        gives up waiting (CacheError).
        """
        cache = self._require()

        def store() -> list[bool]:
            with cache.transact():
                return [self._put(cache, *record) for record in records]

        with cache_errors(self.directory, "cannot write to the cache", RESUME):
            return wait_for_lock(self.directory, store, stop=stop)

    def move(
        self, entries: Sequence[CachedResponse], old_keys: Sequence[str], *, replace: bool
    ) -> None:
        """Store ``entries`` and delete ``old_keys``, in one transaction: an interrupted move
        leaves either the old keys or the new entries, never both. ``replace``: the first
        entry replaces what its key holds; the others are added (a key stored keeps its
        entry)."""
        cache = self._require()

        def move() -> None:
            with cache.transact():
                for index, entry in enumerate(entries):
                    self._put(cache, entry.key, entry.encode(), replace and index == 0)
                for key in old_keys:
                    cache.delete(key)

        with cache_errors(self.directory, "cannot write to the cache"):
            wait_for_lock(self.directory, move)

    def rewrite(self, records: Iterable[tuple[str, bytes]]) -> None:
        """Make ``records`` (``key, entry's bytes``) the folder's only entries, in one
        transaction: every row is cleared through diskcache (its ``clear`` selects rows by
        number, so a row whose key does not decode goes too) and the records stored. An
        interrupted rewrite leaves the folder as it was. ``records`` may be read from this
        folder opened to read only: that reader sees the rows as they were until this
        commits."""
        cache = self._require()

        def rewrite() -> None:
            with cache.transact():
                cache.clear()
                for key, value in records:
                    cache.set(key, value)

        with cache_errors(self.directory, "cannot write to the cache"):
            wait_for_lock(self.directory, rewrite)

    def keys(self, prefix: str = "") -> Iterator[str]:
        """The stored keys that start with ``prefix``, in sorted order."""
        if self._cache is None:
            return
        listed: str | None = None  # the last key listed
        with cache_errors(
            self.directory,
            "cannot list the cache's keys",
            "`geval-async cache verify --repair` removes what cannot be read",
        ):
            try:
                for key in self._listed(prefix):
                    listed = key
                    yield key
            except sqlite3.OperationalError as exc:
                if self.create or isinstance(self._cache, ReadOnlyCache):
                    raise
                if "decode" not in str(exc):
                    raise
                # A key that is not valid text ends diskcache's listing: opened to read, the
                # folder is read on by :mod:`.readonly`, which counts such keys and skips them.
                self._cache.close()
                self._cache = self._read_only()
                for key in self._listed(prefix):
                    if listed is None or key > listed:
                        yield key

    def _listed(self, prefix: str) -> Iterator[str]:
        assert self._cache is not None
        # diskcache walks its key index in order, so the keys of one prefix are adjacent.
        for key in self._cache.iterkeys():
            if not isinstance(key, str) or key < prefix:
                continue
            if not key.startswith(prefix):
                return
            yield key

    @property
    def unnamed(self) -> int:
        """Keys that do not decode as text, met by the last :meth:`keys` of a folder opened
        to read only (diskcache's own listing fails on one: a writer's :meth:`keys` raises
        then)."""
        return self._cache.unnamed if isinstance(self._cache, ReadOnlyCache) else 0

    def delete(self, key: str) -> None:
        """Remove an entry (absent keys are ignored)."""
        cache = self._require()
        with cache_errors(self.directory, "cannot write to the cache"):
            wait_for_lock(self.directory, lambda: cache.delete(key))

    def _put(self, cache: diskcache.Cache, key: str, value: bytes, overwrite: bool) -> bool:
        """Store one entry of a transaction (``add``: the first writer wins)."""
        if overwrite:
            cache.set(key, value)
            return True
        if cache.add(key, value):
            return True
        if self._decode(key, cache.get(key), CachedResponse.decode) is not None:
            return False  # another writer stored it first
        # The key is there but unreadable (damaged): replace it, or every later run would pay
        # for this answer again.
        cache.set(key, value)
        return True

    def __len__(self) -> int:
        if self._cache is None:
            return 0
        with cache_errors(self.directory, "cannot read the cache"):
            return len(self._cache)

    def _require(self) -> diskcache.Cache:
        if self._cache is None:
            raise CacheError(f"{self.directory}: the cache folder is not open")
        if isinstance(self._cache, ReadOnlyCache):
            raise CacheError(f"{self.directory}: the cache folder is open to read only")
        return self._cache
