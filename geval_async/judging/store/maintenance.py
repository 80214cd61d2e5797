"""Looking after cache folders: merge, verify, count, prune.

Entries are content-addressed, so caches put together by a merge (or an archive import, see
:mod:`geval_async.judging.store.archive`) are a union: an entry another cache already holds is
skipped, and the same key with a different answer keeps the first and is reported. Only keys
of judge entries (``g1-``, ``g2-``) are touched; anything else in a folder is left alone.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ConfigError
from ...study.evaluation_steps import steps_requests
from ...study.plan import Study
from .cache import CachedResponse, JudgeCache
from .coverage import item_states
from .folder import existing_cache
from .locks import lock_holders

ENTRY_PREFIXES = ("g1-", "g2-")


def entry_keys(cache: JudgeCache) -> list[str]:
    """The keys of every judge entry in a cache, sorted (a list: callers may write)."""
    return [key for prefix in ENTRY_PREFIXES for key in cache.keys(prefix)]


@dataclass
class MergeReport:
    """What a merge or import did: entries added, already there, clashing and damaged."""

    added: int = 0
    identical: int = 0
    conflicts: list[str] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)


def same_answer(a: CachedResponse, b: CachedResponse) -> bool:
    """Whether two entries hold the same answer: the same choices, or the same refusal.

    Response ids, creation times and latencies differ between two calls that answered alike.
    """
    if a.ok != b.ok:
        return False
    if not a.ok:
        return a.http_status == b.http_status
    return a.choices() == b.choices()


def store_entry(dest: JudgeCache, entry: CachedResponse, report: MergeReport) -> None:
    """Add an entry to ``dest`` unless it holds the key already (then compare the answers)."""
    if dest.put(entry):
        report.added += 1
        return
    existing = dest.get(entry.key)
    if existing is not None and same_answer(existing, entry):
        report.identical += 1
    else:
        report.conflicts.append(entry.key)


def read_entries(cache: JudgeCache, damaged: list[str]) -> Iterator[CachedResponse]:
    """Every judge entry of a cache; keys that do not decode go to ``damaged``."""
    for key in entry_keys(cache):
        entry = cache.get(key)
        if entry is None or entry.key != key:
            damaged.append(f"{cache.directory}: {key}")
            continue
        yield entry


def merge_caches(dest: Path, sources: Sequence[Path]) -> MergeReport:
    """Put every entry of the cache folders ``sources`` (read only) into the folder ``dest``
    (created): a union; on a clash the first one stays."""
    report = MergeReport()
    with ExitStack() as stack:
        opened = [
            stack.enter_context(JudgeCache(existing_cache(path), create=False)) for path in sources
        ]
        into = stack.enter_context(JudgeCache(dest))
        for source in opened:
            if source.directory.resolve() == into.directory.resolve():
                raise ConfigError(f"{source.directory}: cannot merge a cache folder into itself")
            for entry in read_entries(source, report.damaged):
                store_entry(into, entry, report)
    return report


@dataclass
class Damage:
    """A damaged entry: its key and what is wrong."""

    key: str
    problem: str


@dataclass
class Verified:
    """What ``cache verify`` found: entries, the damaged ones, and keys that do not decode."""

    entries: int
    damaged: list[Damage]
    unnamed: int  # rows whose key is not valid text: no command can name (or read) them


def verify_cache(directory: Path) -> Verified:
    """Decode every entry of a cache folder (read only) and parse every answer body."""
    damaged: list[Damage] = []
    with JudgeCache(existing_cache(directory), create=False) as cache:
        keys = entry_keys(cache)
        for key in keys:
            entry = cache.get(key)
            if entry is None:
                damaged.append(Damage(key, _unread(cache, key)))
            elif entry.ok and not entry.choices():
                damaged.append(Damage(key, "its response body has no choices"))
        return Verified(len(keys), damaged, cache.unnamed)


def _unread(cache: JudgeCache, key: str) -> str:
    """Why the entry of ``key`` reads as damaged."""
    try:
        other = CachedResponse.decode(cache.stored_value(key)).key
    except ValueError:
        return "does not decode (a damaged value, or not ours)"
    return f"holds the entry of another key ({other})"


def repair_cache(directory: Path) -> Verified:
    """``cache verify --repair``: remove what :func:`verify_cache` finds damaged, so that a
    run asks it again; what it found.

    A damaged entry is deleted through diskcache. Rows whose key does not decode cannot be
    named through diskcache at all: then the folder is rewritten with its readable entries
    alone, in one transaction (refused while another process has the folder open).
    """
    found = verify_cache(directory)
    if found.unnamed:
        rebuild_cache(Path(directory))
    elif found.damaged:
        with JudgeCache(Path(directory)) as cache:
            for damage in found.damaged:
                cache.delete(damage.key)
    return found


def rebuild_cache(directory: Path) -> None:
    """Keep every readable entry of ``directory`` and nothing else, through diskcache in one
    transaction (:meth:`JudgeCache.rewrite`): rows whose key does not decode cannot be named
    to diskcache's ``delete``, but go with its ``clear``."""
    database = directory / "cache.db"
    holders = lock_holders(database)
    if not holders.startswith("a process not visible"):
        raise ConfigError(
            f"{directory}: in use by {holders}; repair the folder once no run uses it"
        )
    with JudgeCache(directory, create=False) as source, JudgeCache(directory) as into:

        def readable() -> Iterator[tuple[str, bytes]]:
            for key in list(source.keys()):
                entry = source.get(key)
                value = source.stored_value(key) if entry is not None else None
                if entry is not None and entry.key == key and value is not None:
                    yield key, value

        into.rewrite(readable())


@dataclass
class CacheStats:
    """What a cache holds: entries, size, and answers and refusals by model and criterion."""

    entries: int = 0
    answers: int = 0
    refusals: int = 0
    damaged: int = 0
    samples: int = 0
    old_keys: int = 0
    size_bytes: int = 0
    by_model_criterion: Counter[tuple[str, str, str]] = field(default_factory=Counter)


def cache_stats(directory: Path) -> CacheStats:
    """Count the entries of a cache folder (read only; by model, criterion and status) and its
    size on disk."""
    stats = CacheStats()
    with JudgeCache(existing_cache(directory), create=False) as cache:
        for key in entry_keys(cache):
            stats.entries += 1
            stats.old_keys += key.startswith("g1-")
            entry = cache.get(key)
            if entry is None:
                stats.damaged += 1
                continue
            status = "answer" if entry.ok else "refusal"
            stats.answers += entry.ok
            stats.refusals += not entry.ok
            stats.samples += entry.received
            stats.by_model_criterion[(entry.model, entry.criterion, status)] += 1
    stats.size_bytes = _folder_size(Path(directory))
    return stats


def _folder_size(directory: Path) -> int:
    if not directory.exists():
        return 0
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def used_keys(study: Study, cache: JudgeCache) -> set[str]:
    """The keys a study reads from this cache (new or old scheme, answers and refusals)."""
    keys = {request.key for request in steps_requests(study)}  # its generated steps
    for state in item_states(study, cache):
        keys.update(entry.key for entry in state.entries)
        if state.refused is not None:
            keys.add(state.refused.key)
    return keys


@dataclass
class PruneSelection:
    """Which entries go: all the given conditions must hold (at least one is given)."""

    models: frozenset[str] = frozenset()
    older_than_days: float | None = None
    unused_by: tuple[Study, ...] = ()  # entries none of these studies reads (--unused-by)

    def __post_init__(self) -> None:
        if not self.models and self.older_than_days is None and not self.unused_by:
            raise ConfigError(
                "prune: say what goes: --model NAME, --older-than DAYS and/or "
                "--unused-by CONFIG [CONFIG ...]"
            )
        if self.older_than_days is not None and self.older_than_days < 0:
            raise ConfigError("--older-than must be 0 days or more")


@dataclass
class PruneReport:
    """What a prune removed (or would remove, on a dry run)."""

    removed: Counter[tuple[str, str]] = field(default_factory=Counter)
    kept: int = 0

    @property
    def total(self) -> int:
        return sum(self.removed.values())


def prune_cache(directory: Path, selection: PruneSelection, *, dry_run: bool) -> PruneReport:
    """Remove the entries of a cache folder the selection names (nothing on a dry run, which
    opens it read only); counts by model/criterion.

    A damaged entry has no model or age: it goes only when configs decide (``--unused-by``).
    """
    report = PruneReport()
    cutoff = None
    if selection.older_than_days is not None:
        cutoff = time.time() - selection.older_than_days * 86400
    with JudgeCache(existing_cache(directory), create=not dry_run) as cache:
        keep = keys_used_by(selection.unused_by, cache) if selection.unused_by else None
        for key in entry_keys(cache):
            entry = cache.get(key)
            if not _selected(key, entry, selection, cutoff, keep):
                report.kept += 1
                continue
            label = ("?", "damaged") if entry is None else (entry.model, entry.criterion)
            report.removed[label] += 1
            if not dry_run:
                cache.delete(key)
    return report


def _selected(
    key: str,
    entry: CachedResponse | None,
    selection: PruneSelection,
    cutoff: float | None,
    keep: set[str] | None,
) -> bool:
    if keep is not None and key in keep:
        return False
    if entry is None:
        return keep is not None and not selection.models and cutoff is None
    if selection.models and entry.model not in selection.models:
        return False
    return cutoff is None or entry.time < cutoff


def keys_used_by(studies: Iterable[Study], cache: JudgeCache) -> set[str]:
    """The union of the keys several studies read from one cache."""
    keys: set[str] = set()
    for study in studies:
        keys |= used_keys(study, cache)
    return keys
