"""Moving a cache folder of an older form to the current one, once: ``cache migrate``.

The migrations are numbered and run in order (as simonw/llm keeps its own); :mod:`.folder`
tells the older forms apart and refuses them everywhere else. Each moves an entry in one
transaction that stores it in its new form and drops what it replaces, so a migrate that is
interrupted (Ctrl-C, a kill, a full disk) and run again finishes the job and never counts an
answer twice:

1. **entries stored as JSON** (the body an escaped string inside), before the packed form of
   :mod:`.stored`: every such entry of the folder is repacked under its key;
2. **a journal** (``journal/``), where runs of an older geval-async kept the answers they had
   received before storing them: its answers are stored (one group a transaction, each key
   added once), then its files deleted. A damaged record is left out, and one cut short ends
   its segment; the line says how many were dropped: those requests are asked again;
3. **the first key scheme** (``g1``): until draws were keyed by their first sample
   (:mod:`geval_async.study.keys`), a key held the item's total n: draw 0 asked for all n
   answers, and a server that returned fewer was asked for the rest as draws 1, 2, ... with
   ``n = 1`` each. Such answers were paid for, so they are moved to the new keys of a study
   (:func:`migrate_study`), where raising n later adds to them: an item's new entries and the
   deletion of its old keys in one transaction. The old keys cannot be recomputed without the
   n they were asked with, so the sizes are read from the old entries themselves
   (:func:`legacy_sizes`); when an item was judged with several n (a pilot with 5, the study
   with 10, each paid for), every chain is kept, smallest n first. Old entries of other
   studies stay where they are (``cache stats`` counts them) until their own study is
   migrated.

The folder is then marked as in the current form. Nothing on the read path knows these forms.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import struct
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from ...study.config import EvalConfig
from ...study.keys import canonical_json
from ...study.plan import JudgeRequest, Study, chunk_request, first_request, plan_items
from ...study.prepare import prepare_study
from .cache import CachedResponse, JudgeCache, Record
from .folder import JOURNAL, cache_errors, existing_cache, journal_segments, mark_current
from .stored import intact

__all__ = ["MIGRATIONS", "Migration", "legacy_key", "migrate_cache", "migrate_folder"]

LEGACY_VERSION = "g1"
_JSON_ENTRY = b"{"


@dataclass(frozen=True)
class Migration:
    """What ``cache migrate`` did for one study: entries repacked, a journal's answers stored
    (and records dropped as damaged), entries moved to new keys, and old ones left."""

    repacked: int
    moved: int
    left: int  # entries under old keys that belong to no item of the study
    folded: int = 0
    dropped: int = 0


def migrate_folder(config: EvalConfig) -> list[Migration]:
    """``cache migrate``: the config's cache folder moved to the current form for its study;
    on a panel, for every judge (in the config's order), each one's old entries moved to its
    own new keys. The ``left`` of the last one counts what no judge of the config reads.

    Raises:
        ConfigError: the cache folder is missing or is not one.
    """
    studies = [prepare_study(member) for member in config.members()]
    with JudgeCache(existing_cache(config.cache_path, config.source), migrating=True) as cache:
        return [migrate_cache(study, cache) for study in studies]


def migrate_cache(study: Study, cache: JudgeCache) -> Migration:
    """Move ``cache`` (opened with ``migrating=True``) to the current form for ``study``:
    every migration in order (:data:`MIGRATIONS`), then mark the folder."""
    done: dict[str, int] = {}
    for migration in MIGRATIONS:
        done.update(migration(study, cache))
    done["left"] = sum(1 for _ in cache.keys(f"{LEGACY_VERSION}-"))
    with cache_errors(cache.directory, "cannot write to the cache folder"):
        mark_current(cache.directory)
    return Migration(**done)


def m001_repack_json_entries(study: Study, cache: JudgeCache) -> dict[str, int]:
    """1: entries stored as JSON, repacked under their keys."""
    return {"repacked": repack_entries(cache)}


def m002_store_journals(study: Study, cache: JudgeCache) -> dict[str, int]:
    """2: the answers of journals older runs left, stored; the journals deleted."""
    folded, dropped = fold_journal(cache)
    return {"folded": folded, "dropped": dropped}


def m003_first_key_scheme(study: Study, cache: JudgeCache) -> dict[str, int]:
    """3: the study's entries under the first scheme's keys, moved to the new keys."""
    return {"moved": migrate_study(study, cache)}


# The migrations in the order they run; each may run again on a folder it has moved already.
MIGRATIONS: tuple[Callable[[Study, JudgeCache], dict[str, int]], ...] = (
    m001_repack_json_entries,
    m002_store_journals,
    m003_first_key_scheme,
)


def repack_entries(cache: JudgeCache) -> int:
    """Store every entry kept as JSON in the packed form, under its key; how many were.
    A value that does not decode as an entry is left as it is (damage, as ``cache verify``
    reports it)."""
    repacked = 0
    for key in list(cache.keys()):
        raw = cache.stored_value(key)
        if not isinstance(raw, bytes) or not raw.startswith(_JSON_ENTRY):
            continue
        try:
            entry = CachedResponse.from_fields(orjson.loads(raw))
        except (ValueError, TypeError):
            continue
        if entry.key == key:
            cache.put(entry, overwrite=True)  # one key: replaced in one transaction
            repacked += 1
    return repacked


_RECORD = struct.Struct("<HIIB")  # key length, value length, crc32 of the key, replace
_FOLD_ROWS = 512  # a journal's records stored in one transaction


def journal_records(data: bytes) -> tuple[list[Record], int]:
    """The records of a journal segment's bytes, and how many could not be read.

    A record whose entry is damaged (its own checksum fails) is left out and the next one
    read, so one flipped byte costs one answer, not the rest of the segment. A wrong length
    cannot let a wrong record in: a key is taken only when its checksum holds and an entry
    only when its own does. A record cut short, or one whose key fails its checksum, ends the
    segment (counted once: where the next record starts is not known).
    """
    records: list[Record] = []
    damaged = 0
    view, at, end = memoryview(data), 0, len(data)
    while at < end:
        if at + _RECORD.size > end:
            return records, damaged + 1
        size, length, crc, replace_ = _RECORD.unpack_from(view, at)
        key_at = at + _RECORD.size
        value_at = key_at + size
        if value_at + length > end:
            return records, damaged + 1
        raw, value = bytes(view[key_at:value_at]), bytes(view[value_at : value_at + length])
        try:
            key = raw.decode() if zlib.crc32(raw) == crc else None
        except UnicodeDecodeError:
            key = None
        if key is None:
            return records, damaged + 1
        if intact(value):
            records.append((key, value, bool(replace_)))
        else:
            damaged += 1
        at = value_at + length
    return records, damaged


def fold_journal(cache: JudgeCache) -> tuple[int, int]:
    """Store the answers of the journals older runs left in the folder, a group a transaction
    (a key already stored keeps its entry), then delete the journals; (answers stored,
    records that could not be read: see :func:`journal_records`)."""
    folded = damaged = 0
    segments = journal_segments(cache.directory)
    for segment in segments:
        with cache_errors(cache.directory, "cannot read the cache's journal"):
            records, unread = journal_records(segment.read_bytes())
        damaged += unread
        for start in range(0, len(records), _FOLD_ROWS):
            folded += sum(cache.put_records(records[start : start + _FOLD_ROWS]))
    with cache_errors(cache.directory, "cannot delete the cache's journal"):
        for segment in segments:  # only once all of them are stored
            segment.unlink(missing_ok=True)
        for lock in (cache.directory / JOURNAL).glob("*.lock"):
            lock.unlink(missing_ok=True)
        if segments or (cache.directory / JOURNAL).is_dir():
            _remove_empty(cache.directory / JOURNAL)
    return folded, damaged


def _remove_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # something else is in it: left as it is
        os.rmdir(folder)


def legacy_key(body: Mapping[str, Any], draw: int) -> str:
    """The key the first scheme gave a request body sent as draw ``draw`` (n included)."""
    digest = hashlib.sha256(canonical_json({"body": body, "draw": draw})).hexdigest()
    return f"{LEGACY_VERSION}-{digest}"


def legacy_sizes(cache: JudgeCache) -> tuple[int, ...]:
    """Every n an old draw 0 in the cache was asked with, smallest first."""
    sizes: set[int] = set()
    for key in cache.keys(f"{LEGACY_VERSION}-"):
        entry = cache.get(key)
        if entry is not None and entry.draw == 0:
            sizes.add(entry.n)
    return tuple(sorted(sizes))


@dataclass
class LegacyAnswers:
    """An item's answers under old keys: the ok entries in sample order, and a refusal."""

    entries: list[CachedResponse] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    refusal: CachedResponse | None = None

    def take(self, key: str, entry: CachedResponse) -> bool:
        """Add ``entry``, found under ``key``; whether it is an answer (a refusal is kept as
        the item's, the first one found, and ends its draws)."""
        self.keys.append(key)
        if not entry.ok:
            self.refusal = self.refusal or entry
            return False
        self.entries.append(entry)
        return True


def legacy_answers(first: JudgeRequest, cache: JudgeCache, sizes: tuple[int, ...]) -> LegacyAnswers:
    """What the cache holds for an item under old keys, for each n in ``sizes``."""
    found = LegacyAnswers()
    seed = first.body.get("seed")
    for size in sizes:
        key = legacy_key({**first.body, "n": size}, 0)
        entry = cache.get(key)
        if entry is None or not found.take(key, entry):
            continue
        for draw in range(1, size - entry.received + 1):
            body = {**first.body, "n": 1}
            if seed is not None:
                body["seed"] = seed + draw
            key = legacy_key(body, draw)
            further = cache.get(key)
            if further is None or not found.take(key, further):
                break
    return found


def migrate_study(study: Study, cache: JudgeCache) -> int:
    """Move the old entries of a study's items to the new keys; returns how many moved.

    An item's old answers become its chunks in sample order, after any answers the new keys
    already hold for it (samples are independent, so every paid-for answer stays usable when
    n grows). A refusal moves only when the item has no answer; an old answer replaces a new
    refusal. Items of other studies keep their old entries.
    """
    sizes = legacy_sizes(cache)
    if not sizes:
        return 0
    moved = 0
    # A criterion whose steps are still to be generated is newer than the old keys.
    study = replace(study, criteria=tuple(c for c in study.criteria if not c.steps_pending))
    for item in plan_items(study):
        first = first_request(item, study.config)
        found = legacy_answers(first, cache, sizes)
        if not found.keys:
            continue
        start, blocked = _chain_end(first, cache, study.config)
        entries = found.entries
        if not entries and found.refusal is not None and start == 0 and not blocked:
            entries = [found.refusal]
        chain: list[CachedResponse] = []
        for entry in entries:
            chain.append(_moved(entry, chunk_request(first, start, study.config)))
            start += entry.received
        # The first may land on a refusal (or damaged entry) of the new keys: it replaces it.
        cache.move(chain, found.keys, replace=blocked)
        moved += len(chain)
    return moved


def _chain_end(first: JudgeRequest, cache: JudgeCache, config: EvalConfig) -> tuple[int, bool]:
    """Where an item's answers under the new keys end (the samples they hold), and whether
    that key holds something else already (a refusal, or a damaged entry)."""
    start, request = 0, first
    while (entry := cache.get(request.key)) is not None and entry.ok:
        start += entry.received
        request = chunk_request(first, start, config)
    return start, entry is not None or request.key in cache.corrupted


def _moved(entry: CachedResponse, request: JudgeRequest) -> CachedResponse:
    return dataclasses.replace(entry, key=request.key, draw=request.draw)
