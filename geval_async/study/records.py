"""Loading and validating input records, and reading them again as a study needs them.

Records come from a JSON array, a JSONL file (one object per line), or a table: CSV, TSV or
Parquet (:mod:`.record_tables`). Everything a later stage
relies on is checked here, before the first request: the file is readable, every record is an
object with a unique id, the group and condition fields exist, and every field a criterion
inserts into its prompt is present and is text (or a number). A problem raises one
:class:`~geval_async.errors.ConfigError` naming the file, the record and the field.

A JSONL file is read in passes, so a study's memory does not grow with its records' text: the
first pass checks every line and keeps an index (each record's id, group, condition, line
number and byte offset, held compactly: :mod:`.record_pass`, :mod:`.record_index`), and each
later walk over :class:`Records` (the plan's, criterion by
criterion; scoring's) reads the texts again from the file, in order; a table's rows are
indexed and read again the same way. A JSON array is parsed
whole, so its records are held in memory (write JSONL for a study of many records).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import BinaryIO, Self, overload

import orjson

from ..errors import ConfigError
from .record_index import Record, RecordIndex, make_record
from .record_pass import index_records
from .record_tables import TableForm, reread_rows, table_form

__all__ = ["Record", "RecordReader", "Records", "load_records"]


class Records(Sequence[Record]):
    """A study's records, in file order: a sequence of :class:`Record`.

    Iterating reads a JSONL file's texts again, in one sequential pass; ``records[i]`` reads
    one line by its offset; a slice (``records[:limit]``) is a view. :attr:`ids`,
    :attr:`groups` and :attr:`conditions` come from the index, without reading the file.
    """

    __slots__ = ("_index", "_start", "_stop")

    def __init__(self, index: RecordIndex, start: int = 0, stop: int | None = None) -> None:
        self._index = index
        self._start = start
        self._stop = len(index) if stop is None else stop

    @property
    def path(self) -> Path:
        """The records file."""
        return self._index.path

    @property
    def ids(self) -> list[str]:
        """Each record's id (a list made when asked for: the index keeps them in one buffer)."""
        return self._index.ids.texts(self._start, self._stop)

    @property
    def groups(self) -> list[str | None]:
        return self._index.names(self._index.groups, self._start, self._stop)

    @property
    def conditions(self) -> list[str | None]:
        return self._index.names(self._index.conditions, self._start, self._stop)

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

    def reader(self) -> RecordReader:
        """A reader of these records by position with the file opened once (``records[i]``
        opens it for each record)."""
        return RecordReader(self._index, self._start, self._stop)

    def __repr__(self) -> str:
        return f"<Records {self._index.path} [{self._start}:{self._stop}]>"

    def _read(self, start: int, stop: int) -> Iterator[Record]:
        index = self._index
        if index.held is not None:
            yield from index.held[start:stop]
            return
        if table_form(index.path) is not None:
            yield from _reread_table(index, start, stop)
            return
        try:
            handle = index.path.open("rb")
        except OSError as exc:
            raise _changed(index.path) from exc
        with handle:
            yield from _reread(index, handle, start, stop)


class RecordReader:
    """Records read by position, one at a time, through one open handle of the file: a raw
    export reads each of its items' records (``records[i]`` would open the file a million
    times). ``with`` closes it; :meth:`Records.reader` makes one."""

    __slots__ = ("_handle", "_index", "_start", "_stop")

    def __init__(self, index: RecordIndex, start: int, stop: int) -> None:
        self._index, self._start, self._stop = index, start, stop
        self._handle: BinaryIO | None = None  # opened at the first record read

    def __len__(self) -> int:
        return self._stop - self._start

    def __getitem__(self, position: int) -> Record:
        if not 0 <= position < len(self):
            raise IndexError("record index out of range")
        index, at = self._index, self._start + position
        if index.held is not None:
            return index.held[at]
        if table_form(index.path) is not None:
            return next(_reread_table(index, at, at + 1))
        if self._handle is None:
            try:
                self._handle = index.path.open("rb")
            except OSError as exc:
                raise _changed(index.path) from exc
        return next(_reread(index, self._handle, at, at + 1))

    def close(self) -> None:
        """Close the file (a record read later opens it again)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_BLOCK = 4096  # records whose ids and names are made at once as a pass reads them again


def _reread(index: RecordIndex, handle: BinaryIO, start: int, stop: int) -> Iterator[Record]:
    """The records from ``start`` to ``stop``, read again in one pass (the file must be
    unchanged): one loop, a line read and parsed per record, nothing else called."""
    path, id_field, offsets, lines = index.path, index.id_field, index.offsets, index.lines
    seek, readline, loads = handle.seek, handle.readline, orjson.loads
    at = -1  # where the handle is: a pass reads in order, so it seldom has to seek
    for block in range(start, stop, _BLOCK):
        end = min(block + _BLOCK, stop)
        ids = index.ids.texts(block, end)
        groups = index.names(index.groups, block, end)
        conditions = index.names(index.conditions, block, end)
        for k, position in enumerate(range(block, end)):
            offset = offsets[position]
            if offset != at:
                seek(offset)
            line = readline()
            at = offset + len(line)
            try:
                item = loads(line)
            except orjson.JSONDecodeError as exc:
                raise _changed(path) from exc
            record_id = ids[k]
            if type(item) is not dict:
                raise _changed(path)
            written = item.get(id_field)
            if type(written) is str and written != record_id:
                raise _changed(path)
            yield make_record(record_id, groups[k], conditions[k], item, f"line {lines[position]}")


def _reread_table(index: RecordIndex, start: int, stop: int) -> Iterator[Record]:
    """The rows from ``start`` to ``stop`` of a CSV, TSV or Parquet file, read again in one
    pass."""
    path, id_field, lines = index.path, index.id_field, index.lines
    word = "row" if table_form(path) == TableForm.PARQUET else "line"
    rows = reread_rows(path, index.offsets[start:stop])
    for block in range(start, stop, _BLOCK):
        end = min(block + _BLOCK, stop)
        ids = index.ids.texts(block, end)
        groups = index.names(index.groups, block, end)
        conditions = index.names(index.conditions, block, end)
        for k, item in enumerate(islice(rows, end - block)):
            written = item.get(id_field)
            if written is None or str(written) != ids[k]:
                raise _changed(path)
            where = f"{word} {lines[block + k]}"
            yield make_record(ids[k], groups[k], conditions[k], item, where)


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
    """Read and validate every record of a JSON array, a JSONL file or a CSV, TSV or Parquet
    table.

    Raises:
        ConfigError: the file cannot be read or a record is invalid.
    """
    index = index_records(
        path,
        id_field=id_field,
        group_field=group_field,
        condition_field=condition_field,
        required_fields=required_fields,
    )
    return Records(index)
