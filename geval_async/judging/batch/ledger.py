"""The ledger of batch jobs: what was submitted, kept in the cache folder as it happens.

Every batch has a record in ``<cache>/batches/<name>.json`` and the cache keys of its requests
in ``<name>.keys``, written (and fsynced) before each step that could cost money: the record
exists before its requests are claimed, names the input file as soon as it is uploaded, and
the batch as soon as the provider created it. So a Ctrl-C, a SIGKILL or a reboot at any point
leaves enough behind for the next command to attach instead of paying again:

    preparing  the requests are being claimed and written; a record whose process is gone is
               dropped (nothing was uploaded that a batch could run)
    uploaded   the input file is on the provider; the next command finds the batch created
               from it (``batches.list``) or creates it
    submitted  the batch runs at the provider; polled until it ends, then collected

A collected batch's record moves to ``batches/done/`` (its history); its keys file goes.
Each record keeps its input's estimated tokens, which the provider's queue holds while the
batch runs, and the provider's words when it refused the batch for the queue limit; the limits
learned from such refusals are in ``batches/queue.limits`` (:mod:`.queue`).
A claim that names a batch (:mod:`geval_async.judging.store.claims`) holds while the record is live.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Collection, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ...errors import CacheError
from ...options import BatchState
from ..store.claims import FOLDER

PREPARING, UPLOADED, SUBMITTED = BatchState.PREPARING, BatchState.UPLOADED, BatchState.SUBMITTED
# The provider's statuses of a batch that has ended (nothing more will be answered).
ENDED = ("completed", "failed", "expired", "cancelled")


@dataclass
class BatchRecord:
    """One batch job as the ledger keeps it."""

    name: str
    requests: int
    state: BatchState = PREPARING
    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=socket.gethostname)
    created: float = field(default_factory=time.time)
    input_file_id: str | None = None
    batch_id: str | None = None
    status: str | None = None  # the provider's status at the last poll
    completed: int = 0  # the provider's request counts at the last poll
    failed: int = 0
    errors: list[str] = field(default_factory=list)  # why validation failed
    output_file_id: str | None = None
    error_file_id: str | None = None
    outcome: dict[str, int] = field(default_factory=dict)  # what collecting stored
    tokens: int = 0  # the input's estimated tokens, held in the provider's queue while it runs
    queue_refusal: str | None = None  # the provider's words when it refused it for the queue

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @property
    def label(self) -> str:
        return self.batch_id or self.name

    def in_hand(self, grace: float) -> bool:
        """Whether another live process is still submitting this record (on another host:
        whether it was created less than ``grace`` seconds ago)."""
        if self.pid == os.getpid():
            return False
        if self.host != socket.gethostname():
            return time.time() - self.created < grace
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


class Ledger:
    """The ``batches`` folder of a cache."""

    def __init__(self, cache_directory: Path) -> None:
        self.directory = Path(cache_directory) / FOLDER

    def new(self, requests: int) -> BatchRecord:
        """A new record, saved at once (before any request is claimed for it)."""
        name = f"gb-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
        record = BatchRecord(name, requests)
        self.save(record)
        return record

    def save(self, record: BatchRecord) -> None:
        self._write(self.directory / f"{record.name}.json", orjson.dumps(asdict(record)))

    def save_keys(self, record: BatchRecord, keys: list[str]) -> None:
        self._write(self.directory / f"{record.name}.keys", "\n".join(keys).encode())

    def keys(self, record: BatchRecord) -> list[str]:
        """The cache keys of a batch's requests ([] when they were never written)."""
        path = self.directory / f"{record.name}.keys"
        try:
            return path.read_text(encoding="utf-8").split()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CacheError(f"{path}: cannot read the batch ledger ({exc})") from exc

    def live(self) -> list[BatchRecord]:
        """The records of batches not collected yet, oldest first."""
        return sorted(self._read_all(self.directory), key=lambda r: r.created)

    def get(self, name: str) -> BatchRecord | None:
        """The live record called ``name``, read afresh; None when it is gone."""
        found = self._read_all(self.directory, f"{name}.json")
        return found[0] if found else None

    def history(self) -> list[BatchRecord]:
        """The records of collected (or dropped) batches, oldest first."""
        return sorted(self._read_all(self.directory / "done"), key=lambda r: r.created)

    def finish(self, record: BatchRecord) -> None:
        """Move a collected batch's record to the history; its claims lapse with it."""
        done = self.directory / "done"
        self._write(done / f"{record.name}.json", orjson.dumps(asdict(record)))
        self._remove(self.directory / f"{record.name}.json")
        self._remove(self.directory / f"{record.name}.keys")

    def drop(self, record: BatchRecord) -> None:
        """Forget a record that never reached the provider."""
        self._remove(self.directory / f"{record.name}.json")
        self._remove(self.directory / f"{record.name}.keys")
        self._remove(self.input_path(record))

    def write_inputs(
        self, numbered: Iterable[tuple[int, str, bytes]]
    ) -> Iterator[tuple[BatchRecord, list[str]]]:
        """Write numbered input lines (:func:`.files.split_lines`) to one file per number,
        each with a new record; yields each record and its keys once its file is complete."""
        record: BatchRecord | None = None
        handle: BinaryIO | None = None
        keys: list[str] = []
        current = -1
        try:
            for number, key, line in numbered:
                if number != current:
                    if record is not None and handle is not None:
                        handle.close()
                        yield record, keys
                    record, keys, current = self.new(0), [], number
                    handle = open(self.input_path(record), "wb")  # noqa: SIM115 - spans yields
                assert handle is not None
                handle.write(line)
                keys.append(key)
            if record is not None and handle is not None:
                handle.close()
                yield record, keys
        except OSError as exc:
            raise CacheError(f"{self.directory}: cannot write a batch input file ({exc})") from exc
        finally:
            if handle is not None:
                handle.close()

    def keep_input(self, record: BatchRecord, keys: Collection[str]) -> None:
        """Rewrite a batch's input file with only the lines of ``keys`` (claimed ones)."""
        path = self.input_path(record)
        kept = [
            line
            for line in path.read_bytes().splitlines(keepends=True)
            if orjson.loads(line)["custom_id"] in keys
        ]
        self._write(path, b"".join(kept))

    def open_input(self, record: BatchRecord) -> BinaryIO:
        """A batch's input file, open for reading (the upload streams it)."""
        try:
            return open(self.input_path(record), "rb")  # noqa: SIM115 - the caller closes it
        except OSError as exc:
            raise CacheError(f"cannot read the batch input file ({exc})") from exc

    def input_path(self, record: BatchRecord) -> Path:
        """Where a batch's input file is written before upload."""
        return self.directory / f"{record.name}.jsonl"

    def live_keys(self) -> set[str]:
        """The cache keys of every request in a live batch."""
        return {key for record in self.live() for key in self.keys(record)}

    def _read_all(self, folder: Path, pattern: str = "*.json") -> list[BatchRecord]:
        records = []
        try:
            paths = sorted(folder.glob(pattern))
        except OSError as exc:
            raise CacheError(f"{folder}: cannot read the batch ledger ({exc})") from exc
        for path in paths:
            try:
                data: dict[str, Any] = orjson.loads(path.read_bytes())
                data["state"] = BatchState(data["state"])
                records.append(BatchRecord(**data))
            except FileNotFoundError:
                continue  # collected by another process just now
            except (OSError, ValueError, TypeError) as exc:
                raise CacheError(
                    f"{path}: the batch ledger record is damaged ({exc}); if the batch is "
                    "collected or cancelled, delete the file"
                ) from exc
        return records

    def _write(self, path: Path, data: bytes) -> None:
        write_atomic(path, data)

    def _remove(self, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise CacheError(f"{path}: cannot update the batch ledger ({exc})") from exc


def write_atomic(path: Path, data: bytes) -> None:
    """Write whole or not at all, and to the disk, not just the page cache."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        raise CacheError(
            f"{path}: cannot write the batch ledger ({exc}); free space or fix permissions"
        ) from exc
