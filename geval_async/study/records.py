"""Loading and validating input records, and reading them again as a study needs them.

Records come from a JSON array or a JSONL file (one object per line). Everything a later stage
relies on is checked here, before the first request: the file is readable, every record is an
object with a unique id, the group and condition fields exist, and every field a criterion
inserts into its prompt is present and is text (or a number). A problem raises one
:class:`~geval_async.errors.ConfigError` naming the file, the record and the field.

A JSONL file is read in passes, so a study's memory does not grow with its records' text: the
first pass checks every line and keeps an index (each record's id, group, condition, line
number and byte offset), and each later walk over :class:`Records` (the plan's, criterion by
criterion; scoring's) reads the texts again from the file, in order. A JSON array is parsed
whole, so its records are held in memory (write JSONL for a study of many records).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, overload

import orjson

from ..errors import ConfigError
from .record_checks import check_required, key_field, label

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class Record:
    """One record to judge.

    Attributes:
        id: the record id, as text: a number's text as the file writes it (``1.0`` and
            ``1e0`` are two ids, a 24-digit integer keeps its digits).
        group: the group (e.g. user) or None when the study has none.
        condition: the condition or None.
        fields: the record as loaded.
        where: "line 12" or "item 12", for error messages.
    """

    id: str
    group: str | None
    condition: str | None
    fields: dict[str, Any]
    where: str


@dataclass(frozen=True, slots=True)
class _Index:
    """What the first pass keeps of a records file: everything but the texts (JSONL), or
    every record (a JSON array, ``held``)."""

    path: Path
    id_field: str
    ids: list[str]
    groups: list[str | None]
    conditions: list[str | None]
    lines: array[int]  # line (JSONL) or item (JSON array) number of each record
    offsets: array[int]  # byte offset of each record's line (JSONL only)
    held: list[Record] | None = None

    def where(self, index: int) -> str:
        return f"{'item' if self.held is not None else 'line'} {self.lines[index]}"


class Records(Sequence[Record]):
    """A study's records, in file order: a sequence of :class:`Record`.

    Iterating reads a JSONL file's texts again, in one sequential pass; ``records[i]`` reads
    one line by its offset; a slice (``records[:limit]``) is a view. :attr:`ids`,
    :attr:`groups` and :attr:`conditions` come from the index, without reading the file.
    """

    __slots__ = ("_index", "_start", "_stop")

    def __init__(self, index: _Index, start: int = 0, stop: int | None = None) -> None:
        self._index = index
        self._start = start
        self._stop = len(index.ids) if stop is None else stop

    @property
    def path(self) -> Path:
        """The records file."""
        return self._index.path

    @property
    def ids(self) -> list[str]:
        return self._index.ids[self._start : self._stop]

    @property
    def groups(self) -> list[str | None]:
        return self._index.groups[self._start : self._stop]

    @property
    def conditions(self) -> list[str | None]:
        return self._index.conditions[self._start : self._stop]

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> Records: ...

    def __getitem__(self, index: int | slice) -> Record | Records:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("records take slices with a step of 1 only")
            return Records(self._index, self._start + start, self._start + max(start, stop))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("record index out of range")
        return next(self._read(self._start + index, self._start + index + 1))

    def __iter__(self) -> Iterator[Record]:
        return self._read(self._start, self._stop)

    def __repr__(self) -> str:
        return f"<Records {self._index.path} [{self._start}:{self._stop}]>"

    def _read(self, start: int, stop: int) -> Iterator[Record]:
        index = self._index
        if index.held is not None:
            yield from index.held[start:stop]
            return
        try:
            handle = index.path.open("rb")
        except OSError as exc:
            raise _changed(index.path) from exc
        with handle:
            for position in range(start, stop):
                # A seek inside the read buffer costs no system call: a pass reads in order.
                handle.seek(index.offsets[position])
                yield _reread(index, position, handle.readline())


def _reread(index: _Index, position: int, line: bytes) -> Record:
    """The record at ``position`` from its line, read again (the file must be unchanged)."""
    try:
        item = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise _changed(index.path) from exc
    record_id = index.ids[position]
    if not isinstance(item, dict):
        raise _changed(index.path)
    written = item.get(index.id_field)
    if type(written) is str and written != record_id:
        raise _changed(index.path)
    return Record(
        record_id,
        index.groups[position],
        index.conditions[position],
        item,
        index.where(position),
    )


def _changed(path: Path) -> ConfigError:
    return ConfigError(
        f"{path}: the records file changed while the study was using it: run the command again"
    )


def load_records(
    path: Path,
    *,
    id_field: str = "id",
    group_field: str | None = None,
    condition_field: str | None = None,
    required_fields: Iterable[str] = (),
) -> Records:
    """Read and validate every record of a JSON array or JSONL file.

    Raises:
        ConfigError: the file cannot be read or a record is invalid.
    """
    required = sorted(set(required_fields))
    ids: list[str] = []
    groups: list[str | None] = []
    conditions: list[str | None] = []
    lines: array[int] = array("q")
    offsets: array[int] = array("q")
    seen: dict[str, int] = {}
    words: dict[str, str] = {}  # one object per group or condition text
    held: list[Record] | None = None
    rows = _read(path, id_field)
    for where, number, offset, item, id_text in rows:
        if not isinstance(item, dict):
            raise ConfigError(f"{path}: {where}: a record must be a JSON object")
        record_id = id_text or key_field(path, where, item, id_field, "id")
        first = seen.setdefault(record_id, len(ids))
        if first != len(ids):
            raise ConfigError(
                f"{path}: {label(where, record_id)}: duplicate id (first at "
                f"{where.split(' ')[0]} {lines[first]}); ids must be unique"
            )
        group = (
            key_field(path, where, item, group_field, "group", record_id) if group_field else None
        )
        condition = (
            key_field(path, where, item, condition_field, "condition", record_id)
            if condition_field
            else None
        )
        check_required(path, where, item, record_id, required)
        ids.append(record_id)
        groups.append(None if group is None else words.setdefault(group, group))
        conditions.append(None if condition is None else words.setdefault(condition, condition))
        lines.append(number)
        if offset is None:  # a JSON array (or bare-CR lines): the records stay in memory
            held = [] if held is None else held
            held.append(Record(record_id, group, condition, item, where))
        else:
            offsets.append(offset)
    if not ids:
        raise ConfigError(f"{path}: no records in the file")
    return Records(_Index(path, id_field, ids, groups, conditions, lines, offsets, held))


# Each row: where ("line 12"), its number, the byte offset of its line (None in a JSON array),
# the parsed record and, when its id is a number, the id as written.
_Row = tuple[str, int, int | None, Any, str | None]


def _read(path: Path, id_field: str) -> Iterator[_Row]:
    """Each record with where it is and, when its id is a number, the id as written."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise ConfigError(f"{path}: records file not found (check [data] path)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the records file ({exc.strerror})") from exc
    with handle:
        try:
            rows = _lines(path, handle, id_field)
            first = next(rows, None)
            if first is None:
                raise ConfigError(f"{path}: the records file is empty")
            if first is _ARRAY:
                handle.seek(0)
                yield from _array(path, handle.read(), id_field)
                return
            if first is _CR_LINES:
                handle.seek(0)
                yield from _cr_lines(path, handle.read().removeprefix(_BOM), id_field)
                return
            yield first
            yield from rows
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the records file ({exc.strerror})") from exc


_ARRAY: Any = object()  # what _lines yields first when the file is a JSON array
_CR_LINES: Any = object()  # ... when its lines end in a bare CR (old Mac exports)


def _lines(path: Path, handle: BinaryIO, id_field: str) -> Iterator[Any]:
    offset, first = 0, True
    for number, line in enumerate(handle, start=1):
        at = offset
        offset += len(line)
        if number == 1 and line.startswith(_BOM):
            # Editors on Windows save UTF-8 with a byte order mark; JSON parsers refuse it.
            line, at = line[len(_BOM) :], at + len(_BOM)
        if not line or line.isspace():  # not strip(): that copies every line
            continue
        if first and line.lstrip()[:1] == b"[":
            yield _ARRAY  # the file is a JSON array
            return
        if first and b"\r" in line.rstrip(b"\r\n"):
            yield _CR_LINES
            return
        first = False
        yield _row(path, number, at, line, id_field)


def _cr_lines(path: Path, content: bytes, id_field: str) -> Iterator[_Row]:
    """A file whose lines end in a bare CR: split whole (its records are held)."""
    for number, line in enumerate(content.splitlines(), start=1):
        if line and not line.isspace():
            yield _row(path, number, None, line, id_field)


def _row(path: Path, number: int, at: int | None, line: bytes, id_field: str) -> _Row:
    try:
        item = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: line {number}: not valid JSON ({_why(exc, line)}); "
            "records must be a JSON array or one JSON object per line"
        ) from exc
    id_text = _as_written(line)[id_field] if _numeric_id(item, id_field) else None
    return (f"line {number}", number, at, item, id_text)


def _array(path: Path, content: bytes, id_field: str) -> Iterator[_Row]:
    content = content.removeprefix(_BOM)
    try:
        items = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({_why(exc, content)})") from exc
    ids: list[str | None] = [None] * len(items)
    if any(_numeric_id(item, id_field) for item in items):
        written = _as_written(content)
        ids = [
            w[id_field] if _numeric_id(item, id_field) else None
            for item, w in zip(items, written, strict=True)
        ]
    for i, item in enumerate(items, start=1):
        yield (f"item {i}", i, None, item, ids[i - 1])


def _as_written(raw: bytes) -> Any:
    """``raw`` parsed again with every number kept as the text the file has. Only for records
    whose id is a number: a float (or orjson's float for an integer beyond 64 bits) has lost
    that text, so ``1.0`` and ``1e0``, or two long integers, would read as one id."""
    return json.loads(raw, parse_int=str, parse_float=str)


def _numeric_id(item: Any, id_field: str) -> bool:
    return isinstance(item, dict) and type(item.get(id_field)) in (int, float)


def _why(exc: orjson.JSONDecodeError, raw: bytes) -> str:
    """The parser's reason, or what to do when ``raw`` is not UTF-8 (a Latin-1 or UTF-16
    export, say), which the parser words as a complaint about surrogates or ``str``."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "the file is not UTF-8: save it as UTF-8"
    return str(exc)
