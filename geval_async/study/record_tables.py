"""Records from a table: CSV and TSV text files, and Parquet files.

A survey tool exports CSV, a pipeline writes Parquet: both are read as they are, with the checks
and the streaming a JSONL file has (:mod:`.record_pass`, :mod:`.records`). The first pass keeps
each row's place (a text file's byte offset, a Parquet file's row number), and each later walk
reads the rows again from the file, so a study's memory does not grow with its texts.

A CSV or TSV file's first row names its columns; every cell is read as text, as the file writes
it (an id ``007`` stays ``007``, a score ``4.50`` stays ``4.50``), and an empty cell is empty
text. A row is named by the line it starts on, the header being line 1. A Parquet file's values
keep their types (text, whole numbers, numbers; a null is a missing field), read through
``pyarrow`` (``pip install 'geval-async[parquet]'``); its rows are named "row 1", "row 2", ...
"""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import ConfigError

__all__ = ["TableForm", "read_rows", "reread_rows", "table_form"]

_BATCH = 4096  # Parquet rows converted to Python at once


class TableForm(StrEnum):
    """A records file that is a table, by its file name's ending."""

    CSV = "csv"
    TSV = "tsv"
    PARQUET = "parquet"


_ENDINGS = {".csv": TableForm.CSV, ".tsv": TableForm.TSV, ".parquet": TableForm.PARQUET}


def table_form(path: Path) -> TableForm | None:
    """The table form of a records file (None: JSON or JSONL)."""
    return _ENDINGS.get(path.suffix.lower())


def read_rows(path: Path, handle: BinaryIO) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """Every row of a table, in file order: its number (the line it starts on, or its row
    number in a Parquet file), its place for :func:`reread_rows`, and its fields.

    Raises:
        ConfigError: the file is not a table of this form, or a row does not fit the header.
    """
    form = table_form(path)
    if form == TableForm.PARQUET:
        yield from _parquet_rows(path, 0)
        return
    header, reader = _text_table(path, handle, form)
    while True:
        at, number = reader.offset, reader.line + 1
        cells = _next_row(path, reader)
        if cells is None:
            return
        if cells:  # a blank line is no row
            yield number, at, _fields(path, number, header, cells)


def reread_rows(path: Path, places: Sequence[int]) -> Iterator[dict[str, Any]]:
    """The fields of the rows at ``places`` (from :func:`read_rows`, ascending), read again.

    Raises:
        ConfigError: the file changed since its first pass.
    """
    if not places:
        return
    if table_form(path) == TableForm.PARQUET:
        rows = _parquet_rows(path, places[0])
        wanted = iter(places)
        target = next(wanted)
        for _, row, fields in rows:
            if row == target:
                yield fields
                target = next(wanted, -1)
                if target < 0:
                    return
        raise changed(path)
    with path.open("rb") as handle:
        header, reader = _text_table(path, handle, table_form(path))
        for place in places:
            if place != reader.offset:
                reader.seek(place)
            cells = _next_row(path, reader)
            if not cells or len(cells) > len(header):
                raise changed(path)
            yield dict(zip(header, cells, strict=False))


def changed(path: Path) -> ConfigError:
    return ConfigError(
        f"{path}: the records file changed while the study was using it: run the command again"
    )


class _Lines:
    """A text file's lines, decoded, for :mod:`csv`; it knows the byte offset and the number of
    the next line, so each row's place is known without the reader reading ahead."""

    def __init__(self, path: Path, handle: BinaryIO) -> None:
        self.path, self.handle = path, handle
        self.offset, self.line = 0, 0
        self.decoder = codecs.getincrementaldecoder("utf-8")()

    def seek(self, offset: int) -> None:
        self.handle.seek(offset)
        self.offset = offset

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        raw = self.handle.readline()
        if not raw:
            raise StopIteration
        self.line += 1
        start = self.offset
        self.offset += len(raw)
        if start == 0:
            raw = raw.removeprefix(codecs.BOM_UTF8)  # spreadsheets save one
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(
                f"{self.path}: line {self.line}: the file is not UTF-8: save it as UTF-8"
            ) from None


class _TextTable:
    """A CSV or TSV reader over :class:`_Lines`, which it shares its place with."""

    def __init__(self, lines: _Lines, delimiter: str) -> None:
        self.lines, self.delimiter = lines, delimiter
        self.word = "TSV" if delimiter == "\t" else "CSV"
        self.rows = csv.reader(lines, delimiter=delimiter, strict=True)

    @property
    def offset(self) -> int:
        return self.lines.offset

    @property
    def line(self) -> int:
        return self.lines.line

    def seek(self, offset: int) -> None:
        self.lines.seek(offset)
        self.rows = csv.reader(self.lines, delimiter=self.delimiter, strict=True)


def _text_table(
    path: Path, handle: BinaryIO, form: TableForm | None
) -> tuple[list[str], _TextTable]:
    reader = _TextTable(_Lines(path, handle), "\t" if form == TableForm.TSV else ",")
    header = _next_row(path, reader)
    while header == []:
        header = _next_row(path, reader)
    if header is None:
        raise ConfigError(f"{path}: the records file is empty")
    names = [name.strip() for name in header]
    for i, name in enumerate(names):
        if not name:
            raise ConfigError(
                f"{path}: line 1: column {i + 1} has no name: every column of the header needs one"
            )
        if name in names[:i]:
            raise ConfigError(f"{path}: line 1: column {name!r} is named twice")
    return names, reader


def _next_row(path: Path, reader: _TextTable) -> list[str] | None:
    try:
        return next(reader.rows, None)
    except csv.Error as exc:
        raise ConfigError(
            f"{path}: line {reader.line}: not valid {reader.word} ({exc}); quote a cell that "
            "holds the delimiter, a quote or a line break"
        ) from exc


def _fields(path: Path, number: int, header: list[str], cells: list[str]) -> dict[str, str]:
    if len(cells) > len(header):
        raise ConfigError(
            f"{path}: line {number}: {len(cells)} cells, but the header names {len(header)} "
            "columns: quote a cell that holds the delimiter"
        )
    # A row cut short (trailing empty cells left out) lacks those fields.
    return dict(zip(header, cells, strict=False))


def _parquet_rows(path: Path, start: int) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """Parquet rows from row ``start`` (0-based): number, row, fields (nulls left out)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(
            f"{path}: reading Parquet records needs pyarrow: pip install 'geval-async[parquet]'"
        ) from None
    try:
        table = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's own errors: the file is not Parquet
        raise ConfigError(f"{path}: not a readable Parquet file ({exc})") from exc
    with table:
        first, groups = 0, list(range(table.num_row_groups))
        while groups and first + table.metadata.row_group(groups[0]).num_rows <= start:
            first += table.metadata.row_group(groups.pop(0)).num_rows
        if not groups:
            return
        row = first
        # A row group at a time: pyarrow's reader over several row groups reads ahead of the
        # batches asked for, and its memory grows with the file (bench/record_tables.py: 431
        # MB of pyarrow's memory for 382 MB of text, against 39 MB a row group at a time).
        for group in groups:
            for batch in table.iter_batches(batch_size=_BATCH, row_groups=[group]):
                skip = max(start - row, 0)  # rows before the first asked for: not converted
                row += min(skip, batch.num_rows)
                if skip >= batch.num_rows:
                    continue
                for fields in batch.slice(skip).to_pylist():
                    yield row + 1, row, {k: v for k, v in fields.items() if v is not None}
                    row += 1
