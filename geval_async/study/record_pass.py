"""The first pass over a records file: every record checked, its index kept.

Everything a later stage relies on is checked here, before the first request: the file is
readable, every record is an object with a unique id, the group and condition fields exist,
and every field a criterion inserts into its prompt is present and is text (or a number). A
problem raises one :class:`~geval_async.errors.ConfigError` naming the file, the record ("line
12" or "item 12", and its id once known) and the field.

A JSONL file is read line by line, in one loop that checks and adds the usual record (every
field it needs is text) itself and hands any other to :meth:`_Pass.add`, which checks it field
by field: a rerun of 250,000 records starts with this pass. A JSON array, or a file whose lines
end in a bare CR, is parsed whole and its records held. A CSV, TSV or Parquet file is read row
by row (:mod:`.record_tables`), each row checked as a JSONL line is.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ..errors import ConfigError
from .input_files import file_problem
from .record_checks import check_required, key_field, label
from .record_index import Names, Record, RecordIndex, Texts
from .record_tables import TableForm, read_rows, table_form

__all__ = ["as_written", "index_records"]

_BOM = b"\xef\xbb\xbf"
# No record of a JSON-lines file is this long; a JSON array may be (it is read whole).
_LONGEST_FIRST_LINE = 64 << 20


def index_records(
    path: Path,
    *,
    id_field: str = "id",
    group_field: str | None = None,
    condition_field: str | None = None,
    required_fields: Iterable[str] = (),
) -> RecordIndex:
    """The first pass over a records file: every record checked, the index kept.

    Raises:
        ConfigError: the file cannot be read or a record is invalid.
    """
    index = _Pass(path, id_field, group_field, condition_field, sorted(set(required_fields)))
    # Asked before the open: a FIFO would block it, a device (/dev/zero) never end.
    if (problem := file_problem(path)) is not None:
        raise ConfigError(f"{path}: records file {problem} (check [data] path)")
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise ConfigError(f"{path}: records file not found (check [data] path)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the records file ({exc.strerror})") from exc
    with handle:
        try:
            if table_form(path) is None:
                _fill(index, handle)
            else:
                _fill_table(index, handle)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the records file ({exc.strerror})") from exc
    return index.done()


class _Pass:
    """The index as the first pass fills it, each record checked as it is added."""

    def __init__(
        self,
        path: Path,
        id_field: str,
        group_field: str | None,
        condition_field: str | None,
        required: list[str],
    ) -> None:
        self.path, self.id_field, self.required = path, id_field, required
        self.group_field, self.condition_field = group_field, condition_field
        # What a record's number counts: "line" (JSONL, CSV, TSV), "item" or "row" (Parquet).
        self.word = "line"
        # Each id and its position (in file order: the ids), for the duplicates.
        self.seen: dict[str, int] = {}
        # Each record's group and condition as a code, the names in the order first met.
        self.groups: array[int] = array("i")
        self.conditions: array[int] = array("i")
        self.group_codes: dict[str, int] = {}
        self.condition_codes: dict[str, int] = {}
        self.lines: array[int] = array("q")
        self.offsets: array[int] = array("q")
        self.held: list[Record] | None = None

    def add(
        self, number: int, at: int | None, item: Any, line: bytes | None, id_text: str | None
    ) -> None:
        """Check and add one record: ``at`` is its line's byte offset (None: the record is
        held), ``line`` its text (JSONL) or ``id_text`` its numeric id as written (an array).
        :func:`_fill` adds the usual record of a JSONL file itself, with the same checks."""
        path = self.path
        if type(item) is not dict:
            raise ConfigError(f"{path}: {self.word} {number}: a record must be a JSON object")
        record_id = item.get(self.id_field)
        if type(record_id) is not str or not record_id.strip():
            record_id = self._odd_id(number, item, line, id_text)
        self.check_new(number, record_id)
        group = condition = None
        if self.group_field:
            group = self._key(number, item, self.group_field, "group", record_id)
        if self.condition_field:
            condition = self._key(number, item, self.condition_field, "condition", record_id)
        check_required(path, self._where(number), item, record_id, self.required)
        if group is not None:
            self.groups.append(self.group_codes.setdefault(group, len(self.group_codes)))
        if condition is not None:
            code = self.condition_codes.setdefault(condition, len(self.condition_codes))
            self.conditions.append(code)
        self.lines.append(number)
        if at is None:  # a JSON array (or bare-CR lines): the records stay in memory
            self.held = [] if self.held is None else self.held
            self.held.append(Record(record_id, group, condition, item, self._where(number)))
        else:
            self.offsets.append(at)

    def check_new(self, number: int, record_id: str) -> None:
        """Raises ConfigError when ``record_id`` was met before (it is now met)."""
        count = len(self.seen)
        first = self.seen.setdefault(record_id, count)
        if first != count:
            raise ConfigError(
                f"{self.path}: {label(self._where(number), record_id)}: duplicate id (first "
                f"at {self.word} {self.lines[first]}); ids must be unique"
            )

    def _where(self, number: int) -> str:
        return f"{self.word} {number}"

    def _odd_id(
        self, number: int, item: dict[str, Any], line: bytes | None, id_text: str | None
    ) -> str:
        if type(item.get(self.id_field)) in (int, float):  # the id as the file writes it
            if id_text is None:
                assert line is not None
                id_text = as_written(line)[self.id_field]
            return str(id_text)
        return key_field(self.path, self._where(number), item, self.id_field, "id")

    def _key(self, number: int, item: dict[str, Any], name: str, role: str, record_id: str) -> str:
        return key_field(self.path, self._where(number), item, name, role, record_id)

    def done(self) -> RecordIndex:
        if not self.lines:
            raise ConfigError(f"{self.path}: no records in the file")
        ids = Texts.of(self.seen)
        self.seen.clear()
        groups = Names(self.groups, Texts.of(self.group_codes)) if self.group_field else None
        conditions = (
            Names(self.conditions, Texts.of(self.condition_codes)) if self.condition_field else None
        )
        return RecordIndex(
            self.path, self.id_field, ids, groups, conditions, self.lines, self.offsets, self.held
        )


def _fill(index: _Pass, handle: BinaryIO) -> None:
    """Add every record of the file to ``index``: a JSONL file line by line, in one loop; a
    JSON array, or lines that end in a bare CR (old Mac exports), parsed whole and held."""
    path = index.path
    first = _first_line(path, handle)
    if first is None:
        raise ConfigError(f"{path}: the records file is empty")
    number, at, line = first
    if line.lstrip()[:1] == b"[":  # the file is a JSON array
        handle.seek(0)
        index.word = "item"
        for number, item, id_text in _array(path, handle.read(), index.id_field):
            index.add(number, None, item, None, id_text)
        return
    if b"\r" in line.rstrip(b"\r\n"):
        handle.seek(0)
        for number, line in enumerate(handle.read().removeprefix(_BOM).splitlines(), start=1):
            if line and not line.isspace():
                index.add(number, None, _parsed(path, number, line), line, None)
        return
    index.add(number, at, _parsed(path, number, line), line, None)
    _fill_lines(index, handle, number, at + len(line))


def _fill_table(index: _Pass, handle: BinaryIO) -> None:
    """Add every row of a CSV, TSV or Parquet file to ``index`` (:mod:`.record_tables`)."""
    if table_form(index.path) == TableForm.PARQUET:
        index.word = "row"
    id_field = index.id_field
    for number, at, item in read_rows(index.path, handle):
        written = item.get(id_field)
        id_text = str(written) if type(written) in (int, float) else None  # a Parquet number
        index.add(number, at, item, None, id_text)


def _fill_lines(index: _Pass, handle: BinaryIO, number: int, offset: int) -> None:
    """The rest of a JSONL file, from line ``number`` + 1 at byte ``offset``: the usual
    record (every field it needs is text) checked and added here, in one loop of local
    names (a rerun of 250,000 records starts with this pass); any other to ``index.add``."""
    path, loads, add, check_new = index.path, orjson.loads, index.add, index.check_new
    id_field, group_field, condition_field = (
        index.id_field,
        index.group_field,
        index.condition_field,
    )
    required, seen = index.required, index.seen
    groups, conditions = index.groups.append, index.conditions.append
    group_codes, condition_codes = index.group_codes, index.condition_codes
    lines, offsets = index.lines.append, index.offsets.append
    for line in handle:
        number += 1
        at, offset = offset, offset + len(line)
        if line.isspace():  # not strip(): that copies every line
            continue
        try:
            item = loads(line)
        except orjson.JSONDecodeError:
            item = _parsed(path, number, line)  # raises the one-line error
        if type(item) is dict:
            record_id = item.get(id_field)
            group: Any = item.get(group_field) if group_field else None
            condition: Any = item.get(condition_field) if condition_field else None
            if (
                type(record_id) is str
                and record_id.strip()
                and (not group_field or (type(group) is str and group.strip()))
                and (not condition_field or (type(condition) is str and condition.strip()))
                and all(type(item.get(name)) is str for name in required)
            ):
                if record_id in seen:
                    check_new(number, record_id)  # raises the duplicate's error
                seen[record_id] = len(seen)
                if group_field:
                    groups(group_codes.setdefault(group, len(group_codes)))
                if condition_field:
                    conditions(condition_codes.setdefault(condition, len(condition_codes)))
                lines(number)
                offsets(at)
                continue
        add(number, at, item, line, None)


def _first_line(path: Path, handle: BinaryIO) -> tuple[int, int, bytes] | None:
    """The first line that is not blank: its number, byte offset and text (no BOM).

    Read at most :data:`_LONGEST_FIRST_LINE` bytes at a time: a file of gigabytes with no
    line break (a disk image, a file of zeros) is refused, not read into memory whole.
    """
    offset = 0
    for number, line in enumerate(iter(partial(handle.readline, _LONGEST_FIRST_LINE), b""), 1):
        if len(line) == _LONGEST_FIRST_LINE and not line.endswith(b"\n"):
            if line.removeprefix(_BOM).lstrip()[:1] == b"[":
                return number, offset, line  # a JSON array, read whole from the start
            raise ConfigError(
                f"{path}: line {number} is longer than {_LONGEST_FIRST_LINE >> 20} MB: not "
                "a records file (JSON lines, or a JSON array); check [data] path"
            )
        at = offset
        offset += len(line)
        if number == 1 and line.startswith(_BOM):
            # Editors on Windows save UTF-8 with a byte order mark; JSON parsers refuse it.
            line, at = line[len(_BOM) :], at + len(_BOM)
        if line and not line.isspace():
            return number, at, line
    return None


def _parsed(path: Path, number: int, line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: line {number}: not valid JSON ({_why(exc, line)}); "
            "records must be a JSON array or one JSON object per line"
        ) from exc


def _array(path: Path, content: bytes, id_field: str) -> Iterator[tuple[int, Any, str | None]]:
    """Each item of a JSON array: its number, the item and, when its id is a number, the id
    as written."""
    content = content.removeprefix(_BOM)
    try:
        items = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({_why(exc, content)})") from exc
    ids: list[str | None] = [None] * len(items)
    if any(_numeric_id(item, id_field) for item in items):
        written = as_written(content)
        ids = [
            w[id_field] if _numeric_id(item, id_field) else None
            for item, w in zip(items, written, strict=True)
        ]
    for i, item in enumerate(items, start=1):
        yield i, item, ids[i - 1]


def as_written(raw: bytes) -> Any:
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
