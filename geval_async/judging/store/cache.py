"""The judge-response cache: a thin layer over ``diskcache.Cache``.

One entry per request key, written the moment the answer arrives. An entry holds the raw
response body as received plus small metadata (time, latency, usage, attempts, HTTP status), so
every later stage can re-score from it. A permanent refusal (400, content filter, context too
long) is stored too, as a ``rejected`` entry, so a rerun does not pay for it again; transient
failures are never stored.

Entries are never evicted (``eviction_policy="none"``): a cache is a record of paid-for answers,
not a best-effort memo. ``add`` is atomic across processes, so two runs of one plan store each
answer once. diskcache is used through its public API only; the reads of many entries at once
(a rerun's lookups) and the writes of many new ones (a run's answers, :mod:`.answer_table`),
which that API has no call for, are our own (:mod:`.rows`), and so is a folder open to read
only. Errors of diskcache and sqlite become :class:`~geval_async.errors.CacheError` in
:mod:`.cache_errors`. An entry that does not decode is counted as corrupted and treated as
missing. How an entry becomes bytes, and is checked when read back, is :mod:`.stored`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import diskcache

from ...errors import CacheError
from .answer_table import AnswerTable
from .folder import RESUME, cache_errors, check_form, mark_current
from .journal import Record, fold_orphans
from .rows import CacheRows
from .stored import ENTRY_VERSION, CachedResponse, EntryHead, decode_head, decode_heads

if TYPE_CHECKING:
    from .head_table import HeadTable

__all__ = ["ENTRY_VERSION", "CachedResponse", "EntryHead", "JudgeCache"]

_E = TypeVar("_E", CachedResponse, EntryHead)

_PROBE_KEY = "geval-async:probe"
_ABSENT = object()  # diskcache's default for a missing key; a stored NULL reads as None
# scan_heads reads the whole table when it holds at most this many rows per planned lookup.
_SCAN_RATIO = 2
# ... and at most _DICT_ROWS rows, their heads in a dict (0.15 kB each); or _TABLE_ROWS to
# _SCAN_ROWS rows, as digests in sorted arrays (:mod:`.head_table`: 41 bytes each, and numpy's
# 12 MB). In between and beyond, keyed batches cost seconds, not memory: the arrays would take
# a rerun of 400,000 (138 MB keyed) over its 150 MB floor; a million keyed lookups cost 12
# CPU s, over issue 22's 15 s floor with the rest of the rerun.
_DICT_ROWS = 150_000
_TABLE_ROWS = 500_000
_SCAN_ROWS = 3_000_000


class HeadDict:
    """The heads of a small cache's entries by key, in a dict (:meth:`JudgeCache.scan_heads`;
    a large cache's are a :class:`~.head_table.HeadTable`, which answers the same)."""

    def __init__(self, heads: dict[str, EntryHead], unread: set[str]) -> None:
        self._heads = heads
        self.unread = unread  # the keys the pass could not judge, left to head()

    def get(self, key: str) -> EntryHead | None:
        return self._heads.get(key)

    def find(self, keys: Sequence[str]) -> list[EntryHead | None]:
        return list(map(self._heads.get, keys))


@dataclass
class JudgeCache:
    """The cache folder of a study.

    Use as a context manager. With ``create=False`` the folder is opened to read only: nothing
    in it is created or changed, a missing folder reads as an empty cache, and a folder the
    user may not write can be read (``status``, the scoring stage, ``cache export``; see
    :mod:`geval_async.judging.store.rows`).

    A folder of an older form is refused (CacheError naming ``geval-async cache migrate``,
    before anything is written; :mod:`.schema`), unless ``migrating``: only that command.
    """

    directory: Path
    create: bool = True
    migrating: bool = False
    corrupted: set[str] = field(default_factory=set)
    _cache: diskcache.Cache | CacheRows | None = None
    _rows: CacheRows | None = None  # our reader of many rows (the same object read-only)
    _answers: AnswerTable | None = None  # our writer of many new entries (the writer thread's)
    _ahead: dict[str, Any] = field(default_factory=dict)
    # Set by scan_heads: every entry's head by key (the keys left to head() to read in it).
    _heads: HeadDict | HeadTable | None = None

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        exists = (self.directory / "cache.db").exists()
        if not self.create:
            if exists:
                self._cache = self._rows = self._open_rows()
                try:
                    if not self.migrating:
                        with cache_errors(self.directory, "cannot read the cache folder"):
                            check_form(self.directory, self._rows)
                except BaseException:
                    self.close()
                    raise
            return
        marked = self.migrating or (exists and self._checked_before_writing())
        with cache_errors(
            self.directory,
            "cannot open the cache folder",
            "check that it is writable or pass --cache with another folder",
        ):
            self._cache = diskcache.Cache(
                str(self.directory),
                eviction_policy="none",
                size_limit=2**62,
                cull_limit=0,
                timeout=60,
                # Every entry kept in its row, whatever its size, where our reader of many
                # rows finds it (diskcache would move a value over 32 kB to a file of its own).
                disk_min_file_size=2**62,
                # A run writes and reads each entry about once: sqlite's page cache and memory
                # map (diskcache's defaults, 32 + 64 MB) would only hold the resident set up.
                sqlite_cache_size=2**11,
                sqlite_mmap_size=0,
            )
            if not marked:  # new, or checked above: in the current form
                mark_current(self.directory)
            # The answers of a run that died before they reached the table (:mod:`.journal`).
            fold_orphans(self.directory, self.put_records)

    def _checked_before_writing(self) -> bool:
        """Check the folder's form with our reader, before diskcache writes its settings;
        whether it is marked. A database without its table is another process's new folder,
        made this instant: new, so in the current form, and not marked yet."""
        with cache_errors(self.directory, "cannot read the cache folder"):
            try:
                rows = CacheRows(self.directory)
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                return False
            try:
                return check_form(self.directory, rows)
            finally:
                rows.close()

    def _open_rows(self) -> CacheRows:
        with cache_errors(
            self.directory,
            "cannot read the cache folder",
            "check that it is a geval-async cache folder you may read",
        ):
            return CacheRows(self.directory)

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._answers is not None:
            self._answers.close()
            self._answers = None
        if self._rows is not None and self._rows is not self._cache:
            self._rows.close()
        self._rows = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def check_writable(self) -> None:
        """Write and delete a probe entry, so a read-only or full disk fails before any request."""
        cache = self._require()
        with cache_errors(
            self.directory,
            "the cache folder is not writable",
            "free space, fix its permissions or pass --cache with another folder",
        ):
            cache.set(_PROBE_KEY, b"probe")
            cache.delete(_PROBE_KEY)

    def _reader(self) -> CacheRows:
        """Our reader of many rows; opened on first use in a writable folder (a second,
        read-only connection that sees what diskcache's has committed)."""
        if self._rows is None:
            if self._cache is None:
                raise CacheError(f"{self.directory}: the cache folder is not open")
            with cache_errors(self.directory, "cannot read the cache"):
                self._rows = CacheRows(self.directory)
        return self._rows

    def prefetch(self, keys: Sequence[str]) -> None:
        """Read the entries of many keys in one query; the next :meth:`get` of each is served
        from memory (a rerun of a large plan reads every entry once, without a query each).
        After :meth:`scan_heads`, heads need no prefetch: it does nothing.
        """
        self._ahead = {}
        if self._cache is None or not keys or self._heads is not None:
            return
        with cache_errors(self.directory, "cannot read the cache"):
            # A value not kept in its row (None) is left to get(), which reads its file.
            found = self._reader().read(keys)
        ahead: dict[str, Any] = dict.fromkeys(keys, _ABSENT)
        for key, value in found.items():
            if value is None:
                del ahead[key]
            else:
                ahead[key] = value
        self._ahead = ahead

    def scan_heads(self, planned: int) -> bool:
        """Read every entry's head in one pass over the table, when the cache holds at most
        twice ``planned`` entries (a plan's lookups), and at most 150,000 or from 500,000 to
        3,000,000 (see ``_TABLE_ROWS``); False (nothing read) otherwise.

        Then :meth:`head` and :meth:`heads` answer from memory until :meth:`forget_heads`: a
        key the table did not hold is absent, a damaged entry counts as corrupted when looked
        up, as before. The pass reads each entry once, in the file's order, and keeps its head
        only (a large cache's compactly, :mod:`.head_table`): a sixth of the CPU of the plan's
        keys asked for in ``IN (...)`` batches, whose rows lie all over the file. A small plan
        in a big (shared) cache keeps to those batches.
        """
        if self._cache is None or planned <= 0:
            return False
        with cache_errors(self.directory, "cannot read the cache"):
            rows = self._reader()
            count = rows.count()
            if count > _SCAN_RATIO * planned or count > _SCAN_ROWS:
                return False
            if _DICT_ROWS < count < _TABLE_ROWS:
                return False
            if count <= _DICT_ROWS:
                heads, others = decode_heads(rows.scan())
                self._heads = HeadDict(heads, set(others))
            else:
                from .head_table import HeadTable  # numpy, for a large cache only

                self._heads = HeadTable.read(rows.scan(), count)
        return True

    def forget_heads(self) -> None:
        """Drop what :meth:`scan_heads` read (call it before writing: it would go stale)."""
        self._heads = None

    def heads(self, keys: Sequence[str]) -> list[EntryHead | None]:
        """:meth:`head` of each of ``keys``, found together: from what :meth:`scan_heads`
        read, or in one batch of queries (:meth:`prefetch`)."""
        table = self._heads
        if table is None:
            self.prefetch(keys)
            return [self.head(key) for key in keys]
        found = table.find(keys)
        if table.unread:
            for index, key in enumerate(keys):
                if found[index] is None and key in table.unread:
                    found[index] = self.head(key)
        return found

    def get(self, key: str) -> CachedResponse | None:
        """The entry for ``key``; None when absent or corrupted (then added to ``corrupted``)."""
        return self._read(key, CachedResponse.decode)

    def head(self, key: str) -> EntryHead | None:
        """What a lookup needs of the entry for ``key`` (the entry checked whole, not parsed);
        None when absent or corrupted, as :meth:`get`."""
        if self._heads is not None:
            head = self._heads.get(key)
            if head is not None or key not in self._heads.unread:
                return head  # None: the table did not hold the key
            # Damaged, kept in a file or not an entry: read and judged as one at a time.
        # As _read, two calls fewer: the hot path of a rerun's walk (one lookup per item).
        raw = self._ahead.pop(key, None)
        if raw is None or self._cache is None:
            return self._read(key, decode_head)
        return None if raw is _ABSENT else self._decode(key, raw, decode_head)

    def _read(self, key: str, decode: Callable[[Any], _E]) -> _E | None:
        if self._cache is None:
            return None
        raw = self._ahead.pop(key, None)
        if raw is None:
            try:
                with cache_errors(self.directory, "cannot read the cache"):
                    raw = self._cache.get(key, default=_ABSENT)
            except CacheError:
                raise
            except Exception:  # noqa: BLE001 - an undecodable pickle or a lost file is damage
                self.corrupted.add(key)
                return None
        if raw is _ABSENT:
            return None
        return self._decode(key, raw, decode)

    def stored_value(self, key: str) -> Any:
        """The value stored under ``key`` as it is (None when absent), not decoded: for
        ``cache migrate``, which reads entries of an older form."""
        if self._cache is None:
            return None
        with cache_errors(self.directory, "cannot read the cache"):
            return self._cache.get(key)

    def _decode(self, key: str, raw: Any, decode: Callable[[Any], _E]) -> _E | None:
        try:
            return decode(raw)
        except (ValueError, TypeError):
            self.corrupted.add(key)
            return None

    def stored(self, keys: Sequence[str]) -> set[str]:
        """Those of ``keys`` that have an entry (readable or not): see AnswerTable.present."""
        self._require()
        with cache_errors(self.directory, "cannot read the cache"):
            if self._answers is None:
                self._answers = AnswerTable(self.directory)
            return self._answers.present(keys)

    def put(self, entry: CachedResponse, *, overwrite: bool = False) -> bool:
        """Store an entry (``overwrite``: replace one, as ``--retry-failed`` replaces a
        refusal); False when another writer stored this key first."""
        return self.put_many([(entry, overwrite)])[0]

    def put_many(self, entries: Sequence[tuple[CachedResponse, bool]]) -> list[bool]:
        """Store ``(entry, overwrite)`` pairs: :meth:`put_records` of their bytes."""
        return self.put_records([(e.key, e.encode(), overwrite) for e, overwrite in entries])

    def put_records(self, records: Sequence[Record]) -> list[bool]:
        """Store ``(key, entry's bytes, overwrite)`` records, on disk when this returns.

        Returns, for each, whether it was stored (False: another writer, or an earlier record,
        stored that key first). A group's new keys are written in one transaction of our own
        (:mod:`.answer_table`); a record that replaces an entry, and a key that turned out to
        be stored, go through diskcache's ``transact()``, after it.
        """
        cache = self._require()
        with cache_errors(self.directory, "cannot write to the cache", RESUME):
            if any(overwrite for _, _, overwrite in records):
                done = [False] * len(records)  # in order: a replacement may precede an add
            else:
                if self._answers is None:
                    self._answers = AnswerTable(self.directory)
                done = self._answers.add_new([(key, value) for key, value, _ in records])
            if all(done):
                return done
            with cache.transact():
                for index, (key, value, overwrite) in enumerate(records):
                    if not done[index]:
                        done[index] = self._put(cache, key, value, overwrite)
            return done

    def keys(self, prefix: str = "") -> Iterator[str]:
        """The stored keys that start with ``prefix``, in sorted order."""
        if self._cache is None:
            return
        with cache_errors(self.directory, "cannot read the cache"):
            # diskcache walks its key index in order, so the keys of one prefix are adjacent.
            for key in self._cache.iterkeys():
                if not isinstance(key, str) or key < prefix:
                    continue
                if not key.startswith(prefix):
                    return
                yield key

    def delete(self, key: str) -> None:
        """Remove an entry (absent keys are ignored)."""
        cache = self._require()
        with cache_errors(self.directory, "cannot write to the cache"):
            cache.delete(key)

    def _put(self, cache: diskcache.Cache, key: str, value: bytes, overwrite: bool) -> bool:
        """Store one entry of a transaction (``add``: atomic, the first writer wins)."""
        if overwrite:
            cache.set(key, value)
            return True
        if cache.add(key, value):
            return True
        if self._decode(key, cache.get(key), CachedResponse.decode) is not None:
            return False  # another writer stored it first
        # The key is there but unreadable (damaged, its value file gone): replace it, or
        # every later run would pay for this answer again.
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
        if isinstance(self._cache, CacheRows):
            raise CacheError(f"{self.directory}: the cache folder is open to read only")
        return self._cache
