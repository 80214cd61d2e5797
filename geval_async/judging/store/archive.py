"""Cache archives: a study's judge answers as one compressed JSONL file, and back.

An archive is gzip-compressed JSON lines: a header (format and version), one line per entry
(its key and the entry as stored: raw response body plus metadata), and a trailer with the
number of entries and the SHA-256 of every line before it. A co-author imports it to re-score
without paying; a paper publishes it. Import reads the whole archive and checks it before it
writes anything, so a damaged archive (a bad gzip stream, a cut-off file, an edited line) is
refused with nothing imported. Entries are merged like caches (see
:mod:`geval_async.judging.store.maintenance`): the same key with a different answer keeps the first.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from itertools import chain
from pathlib import Path

import orjson

from ...errors import ConfigError
from ...study.config import EvalConfig
from ...study.evaluation_steps import steps_requests
from ...study.plan import Study
from ...study.prepare import prepare_study
from .cache import CachedResponse, JudgeCache
from .coverage import item_states
from .folder import existing_cache
from .maintenance import MergeReport, store_entry

ARCHIVE_FORMAT = "geval-async-cache"
ARCHIVE_VERSION = 1


def export_study(config: EvalConfig, path: Path) -> int:
    """``cache export``: the entries the config's study reads from its cache (a panel: every
    judge's), written to the archive ``path`` (whole or not at all); returns the count.

    Raises:
        ConfigError: the cache folder is missing or is not one.
    """
    studies = [prepare_study(member) for member in config.members()]
    with JudgeCache(existing_cache(config.cache_path, config.source), create=False) as cache:
        entries = chain.from_iterable(study_entries(study, cache) for study in studies)
        return write_archive(entries, path)


def study_entries(study: Study, cache: JudgeCache) -> Iterator[CachedResponse]:
    """The entries a study reads from a cache (answers and refusals), each key once."""
    seen: set[str] = set()
    for request in steps_requests(study):  # the generated steps the items' prompts hold
        entry = cache.get(request.key)
        if entry is not None:
            seen.add(entry.key)
            yield entry
    for state in item_states(study, cache):
        for entry in [*state.entries, *([state.refused] if state.refused else [])]:
            if entry.key not in seen:
                seen.add(entry.key)
                yield entry


def write_archive(entries: Iterable[CachedResponse], path: Path) -> int:
    """Write entries to a compressed JSONL archive (whole or not at all); returns the count."""
    path = Path(path)
    digest = hashlib.sha256()
    count = 0
    partial = path.with_name(path.name + ".partial")
    try:
        with gzip.open(partial, "wb") as out:

            def line(value: object) -> None:
                data = orjson.dumps(value) + b"\n"
                digest.update(data)
                out.write(data)

            line({"format": ARCHIVE_FORMAT, "version": ARCHIVE_VERSION})
            for entry in entries:
                line({"key": entry.key, "entry": asdict(entry)})
                count += 1
            out.write(orjson.dumps({"entries": count, "sha256": digest.hexdigest()}) + b"\n")
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ConfigError(f"{path}: cannot write the archive ({exc})") from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return count


def _damaged(path: Path, problem: str) -> ConfigError:
    return ConfigError(f"{path}: the archive is damaged ({problem}); nothing was imported")


def _entries(path: Path) -> Iterator[CachedResponse]:
    """Read an archive, checking each entry and, at the end, the count and checksum."""
    digest = hashlib.sha256()
    count = 0
    trailer: dict[str, object] | None = None
    try:
        with gzip.open(path, "rb") as lines:
            for number, raw in enumerate(lines, start=1):
                if trailer is not None:
                    raise _damaged(path, f"line {number} follows the checksum line")
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    raise _damaged(path, f"line {number} is not JSON") from None
                if not isinstance(record, dict):
                    raise _damaged(path, f"line {number} is not an object")
                if number == 1:
                    if record.get("format") != ARCHIVE_FORMAT:
                        raise ConfigError(f"{path}: not a geval-async cache archive")
                    if record.get("version") != ARCHIVE_VERSION:
                        raise ConfigError(
                            f"{path}: archive version {record.get('version')!r} is not "
                            f"{ARCHIVE_VERSION}; import it with the geval-async that wrote it"
                        )
                elif "sha256" in record:
                    trailer = record
                    continue
                else:
                    yield _entry(path, number, record)
                    count += 1
                digest.update(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise _damaged(path, f"not a complete gzip file: {exc}") from exc
    if trailer is None:
        raise _damaged(path, "it ends before its checksum line: cut off")
    if trailer.get("entries") != count or trailer.get("sha256") != digest.hexdigest():
        raise _damaged(path, "the checksum does not match its contents")


def _entry(path: Path, number: int, record: dict[str, object]) -> CachedResponse:
    try:
        entry = CachedResponse.from_fields(record.get("entry"))
    except (ValueError, TypeError) as exc:
        raise _damaged(path, f"line {number} is not a valid entry: {exc}") from None
    if entry.key != record.get("key"):
        raise _damaged(path, f"line {number}: the entry's key differs from the line's")
    return entry


def check_archive(path: Path) -> int:
    """Read a whole archive and check it; returns its number of entries.

    Raises:
        ConfigError: the file is missing, not an archive, or damaged.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such archive file")
    return sum(1 for _ in _entries(path))


def import_archive(path: Path, dest: Path) -> MergeReport:
    """Check an archive whole, then merge its entries into the cache folder ``dest`` (created
    only once the archive is found whole).

    Raises:
        ConfigError: the archive is missing or damaged (then nothing is written).
    """
    check_archive(path)
    report = MergeReport()
    with JudgeCache(dest) as into:
        for entry in _entries(Path(path)):
            store_entry(into, entry, report)
    return report
