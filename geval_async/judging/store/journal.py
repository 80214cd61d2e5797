"""The answers' journal: each answer on disk the moment it arrives, before diskcache has it.

A run's answers go into the cache (diskcache's sqlite table) in large groups, off the event
loop (:mod:`.writer`), because a sqlite commit costs much the same for 2 rows as for 100, and
a worker that waited for its answer's commit sent nothing meanwhile (docs/benchmarks.md
section 2, "Session 10: the journal", has what that wait cost). What makes an answer safe the
moment it arrives is this file instead: the loop appends every answer of its turn to the run's
journal in one ``writev`` (a few microseconds into the page cache), and only then does the
answer's item count as done or its worker send anything else. So a SIGKILL still costs at
most the requests in flight.

The journal is ``<cache>/journal/``: one lock file a writer (``<token>.lock``, held with
``flock`` while its process lives) and that writer's segments (``<token>-<number>.journal``,
a new one every 8 MB). A segment is deleted once every answer in it is in the cache, and the
journal with its lock when the run ends. A journal whose lock can be taken belongs to a process
that died: whoever opens the cache folder to write next (:class:`~.cache.JudgeCache`) folds its
answers into the cache first, and deletes it; before that they are invisible to a reader
(``status``, ``score``), which finds those items missing and the resumed run finds them stored.

A record is ``<key length (u16), value length (u32), crc32 of the key (u32), replace (u8)>``,
the key, and the entry's bytes as the cache stores them (:mod:`.stored`, checksummed). A
record cut short (the disk filled up mid-write) or damaged ends the segment's reading: what
follows it was never counted as stored. The journal is as durable as the cache's own commits
(sqlite's ``synchronous = NORMAL``): a process killed loses nothing written, a power cut may.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import struct
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from .stored import intact

try:
    import fcntl
except ImportError:  # not POSIX: journals work unlocked, and orphans are left, not folded
    fcntl = None  # type: ignore[assignment]

__all__ = ["Journal", "Record", "fold_orphans", "orphaned_answers"]

# (key, the entry's bytes as stored, whether it replaces what the key holds)
Record = tuple[str, bytes, bool]

_HEAD = struct.Struct("<HIIB")
_SEGMENT_BYTES = 8 * 2**20
_FOLD_ROWS = 512  # records stored together when a dead run's journal is folded
_SEGMENT = re.compile(r"(?P<token>[0-9a-f-]+)-(?P<number>\d{6})\.journal")


def _flock(fd: int, *, exclusive: bool, wait: bool) -> None:
    """``flock`` the file; OSError when it is held elsewhere (and not ``wait``), or cannot be."""
    if fcntl is None:
        raise OSError("no flock here")
    flags = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    fcntl.flock(fd, flags if wait else flags | fcntl.LOCK_NB)


def _folder(cache_directory: Path) -> Path:
    return Path(cache_directory) / "journal"


def _parts(records: Sequence[Record]) -> list[bytes]:
    """The pieces of ``records``' bytes, in order (written with one ``writev``, not copied)."""
    parts: list[bytes] = []
    for key, value, replace in records:
        raw = key.encode()
        # The key's checksum: the entry carries its own (checked when read back, below).
        parts += (_HEAD.pack(len(raw), len(value), zlib.crc32(raw), replace) + raw, value)
    return parts


def encode(records: Sequence[Record]) -> bytes:
    """The bytes of ``records``, one after the other."""
    return b"".join(_parts(records))


def decode(data: bytes) -> Iterator[Record]:
    """The records of a segment's bytes, up to the first one cut short or damaged."""
    view, at, end = memoryview(data), 0, len(data)
    while at + _HEAD.size <= end:
        size, length, crc, replace = _HEAD.unpack_from(view, at)
        key_at = at + _HEAD.size
        value_at = key_at + size
        at = value_at + length
        if at > end:
            return
        raw, value = bytes(view[key_at:value_at]), bytes(view[value_at:at])
        if zlib.crc32(raw) != crc or not intact(value):
            return
        yield raw.decode(), value, bool(replace)


class Journal:
    """One run's journal in a cache folder: appended to by the loop, its segments deleted by
    the writer's thread as their answers reach the cache. Opened at the run's first answer."""

    def __init__(self, cache_directory: Path) -> None:
        self.folder = _folder(cache_directory)
        self.folder.mkdir(exist_ok=True)
        self._token = f"{os.getpid()}-{secrets.token_hex(6)}"
        # Locked before it has its name: a folder reader never finds it unlocked.
        hidden = self.folder / f".{self._token}.lock"
        self._lock_fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        # A file system without flock (some network and FUSE mounts): the journal still
        # keeps the answers; no other process can tell it is orphaned (see fold_orphans).
        with contextlib.suppress(OSError):
            _flock(self._lock_fd, exclusive=True, wait=True)
        os.replace(hidden, self.folder / f"{self._token}.lock")
        self._guard = threading.Lock()  # the segments: the loop opens them, the thread deletes
        self._segments: list[int] = []
        self._fd = -1
        self._size = 0
        self._open(0)

    def _path(self, number: int) -> Path:
        return self.folder / f"{self._token}-{number:06d}.journal"

    def _open(self, number: int) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        self._fd = os.open(self._path(number), flags, 0o644)
        self._size = 0
        with self._guard:
            self._segments.append(number)

    @property
    def segment(self) -> int:
        """The number of the segment being appended to."""
        return self._segments[-1]

    def append(self, records: Sequence[Record]) -> int:
        """Write ``records`` (raises OSError); the number of the segment they are in."""
        if self._size >= _SEGMENT_BYTES:
            os.close(self._fd)
            self._open(self.segment + 1)
        parts = _parts(records)
        # A regular file takes all of it in one call unless the disk is full (then raises);
        # at most 1024 pieces a call (the system's IOV_MAX).
        for at in range(0, len(parts), 1024):
            chunk = parts[at : at + 1024]
            size, written = sum(map(len, chunk)), os.writev(self._fd, chunk)
            if written < size:  # written in part: the rest, as one piece
                rest = memoryview(b"".join(chunk))[written:]
                while rest:
                    rest = rest[os.write(self._fd, rest) :]
            self._size += size
        return self.segment

    def forget(self, before: int) -> None:
        """Delete the segments numbered below ``before`` (their answers are in the cache)."""
        with self._guard:
            gone = [n for n in self._segments if n < before]
            self._segments = [n for n in self._segments if n >= before]
        for number in gone:
            self._path(number).unlink(missing_ok=True)

    def close(self, *, folded: bool) -> None:
        """Close the journal; deleted when ``folded`` (everything in it is in the cache), else
        left for the next open of the folder to fold."""
        os.close(self._fd)
        if folded:
            self.forget(self.segment + 1)
            (self.folder / f"{self._token}.lock").unlink(missing_ok=True)
        os.close(self._lock_fd)  # lets go of the lock


def fold_orphans(cache_directory: Path, store: Callable[[list[Record]], object]) -> int:
    """Store the records of every journal whose process is gone (``store``: a group at a
    time, in the order written), then delete it; how many records were folded.

    A journal whose lock another process holds is that process's, and is left alone.
    Raises OSError (or what ``store`` raises): the journal is then kept, whole.
    """
    folded = 0
    for lock, segments in _orphans(_folder(cache_directory), exclusive=True):
        for path in segments:
            records = list(decode(path.read_bytes()))
            for start in range(0, len(records), _FOLD_ROWS):
                store(records[start : start + _FOLD_ROWS])
            folded += len(records)
        for path in segments:  # only once all of them are in the cache
            path.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)
    return folded


def orphaned_answers(cache_directory: Path) -> int:
    """How many answers journals of runs that are gone hold (not in the table until the
    folder is next opened to write); read only: for ``status`` and ``run --dry-run``."""
    count = 0
    # Locked shared, and let go at once: a writer of the folder folds it then, or next time.
    # A journal this process may not read is not counted (the count is a note's).
    with contextlib.suppress(OSError):
        for _, segments in _orphans(_folder(cache_directory), exclusive=False):
            for path in segments:
                count += sum(1 for _ in decode(path.read_bytes()))
    return count


def _orphans(folder: Path, *, exclusive: bool) -> Iterator[tuple[Path, list[Path]]]:
    """Each journal of a process that is gone: its lock file and its segments in order,
    the lock held (``exclusive`` or shared) while the caller works on it.

    A journal whose lock another process holds is that process's (or, without flock, nobody
    can tell): skipped, as is a lock being made (hidden: locked, then named).
    """
    try:
        locks = sorted(folder.glob("[!.]*.lock"))
    except OSError:
        return
    for lock in locks:
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # folded by another process just now
        try:
            try:
                _flock(fd, exclusive=exclusive, wait=False)
            except OSError:
                continue
            token = lock.name.removesuffix(".lock")
            found = (
                (int(m["number"]), path)
                for path in folder.glob(f"{token}-*.journal")
                if (m := _SEGMENT.fullmatch(path.name)) and m["token"] == token
            )
            yield lock, [path for _, path in sorted(found)]
        finally:
            os.close(fd)
