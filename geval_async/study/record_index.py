"""The index of a records file: what a study keeps of each record besides its texts.

A study of 250,000 records keeps, for each, its id, group, condition, line number and byte
offset (the texts are read again from the file as each walk needs them: :mod:`.records`).
Held as Python objects (a ``str`` per id, a list per column) that index took about 45 MB of
resident memory, the strings scattered among the parsed lines the allocator could not give
back; held here it takes about 9 MB: the ids in one UTF-8 buffer with each one's end
(:class:`Texts`), the groups and conditions as codes into their distinct names
(:class:`Names`), the numbers in arrays. Lists of ``str`` are made only when asked for.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any

__all__ = ["Names", "Record", "RecordIndex", "Texts", "make_record"]


def _encoded(text: str) -> bytes:
    # surrogatepass: an id is kept whatever the parser let through, and read back the same.
    return text.encode("utf-8", "surrogatepass")


class Texts:
    """Many short texts in one UTF-8 buffer and the end of each (a few bytes a text where a
    ``str`` costs about 60)."""

    __slots__ = ("_buffer", "_ends")

    def __init__(self, buffer: bytes, ends: array[int]) -> None:
        self._buffer, self._ends = buffer, ends

    @classmethod
    def of(cls, texts: Iterable[str]) -> Texts:
        """``texts``, packed (in one go: a first pass packs 250,000 ids at its end)."""
        joined = "".join(texts := list(texts))
        if joined.isascii():  # a character a byte: the ends are the lengths' sums
            return cls(joined.encode("ascii"), array("q", accumulate(map(len, texts))))
        encoded = [_encoded(text) for text in texts]
        return cls(b"".join(encoded), array("q", accumulate(map(len, encoded))))

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, index: int) -> str:
        ends = self._ends
        start = ends[index - 1] if index > 0 else 0
        return self._buffer[start : ends[index]].decode("utf-8", "surrogatepass")

    def texts(self, start: int = 0, stop: int | None = None) -> list[str]:
        """The texts from ``start`` to ``stop`` as a list of ``str``."""
        stop = len(self._ends) if stop is None else stop
        if start >= stop:
            return []
        ends = self._ends
        begin = ends[start - 1] if start > 0 else 0
        cuts = [begin, *ends[start:stop]]
        chunk = self._buffer[begin : ends[stop - 1]]
        if chunk.isascii():  # the usual ids: one decode, then slices of one str
            text = chunk.decode("ascii")
            return [text[a - begin : b - begin] for a, b in pairwise(cuts)]
        return [
            chunk[a - begin : b - begin].decode("utf-8", "surrogatepass") for a, b in pairwise(cuts)
        ]


class Names:
    """A column of a few distinct texts (groups, conditions) or None: a code per entry
    (-1: None) into the distinct texts, in the order they first appear."""

    __slots__ = ("_codes", "names")

    def __init__(self, codes: array[int], names: Texts) -> None:
        self._codes, self.names = codes, names

    def __len__(self) -> int:
        return len(self._codes)

    def __getitem__(self, index: int) -> str | None:
        code = self._codes[index]
        return None if code < 0 else self.names[code]

    def values(self, start: int = 0, stop: int | None = None) -> list[str | None]:
        """The entries from ``start`` to ``stop`` (each distinct name one shared ``str``)."""
        codes = self._codes[start:stop]
        if len(self.names) <= len(codes):
            names: list[str | None] = [*self.names.texts(), None]  # code -1 reads the last
            return [names[code] for code in codes]
        # A few entries of many names (a pass reads a block at a time): only theirs made.
        found = {code: None if code < 0 else self.names[code] for code in set(codes)}
        return [found[code] for code in codes]


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


_new = object.__new__
_SETTERS = tuple(getattr(Record, name).__set__ for name in Record.__slots__)


def make_record(
    record_id: str, group: str | None, condition: str | None, fields: dict[str, Any], where: str
) -> Record:
    """``Record(record_id, group, condition, fields, where)``, made without the frozen
    dataclass's ``__init__`` (a ``object.__setattr__`` per field: about half the cost of a
    pass that reads 250,000 records again, besides their parsing)."""
    record = _new(Record)
    set_id, set_group, set_condition, set_fields, set_where = _SETTERS
    set_id(record, record_id)
    set_group(record, group)
    set_condition(record, condition)
    set_fields(record, fields)
    set_where(record, where)
    return record


@dataclass(frozen=True, slots=True)
class RecordIndex:
    """What the first pass keeps of a records file: everything but the texts (JSONL), or
    every record (a JSON array, ``held``)."""

    path: Path
    id_field: str
    ids: Texts
    groups: Names | None  # None: the study has no group field
    conditions: Names | None
    lines: array[int]  # line (JSONL) or item (JSON array) number of each record
    offsets: array[int]  # byte offset of each record's line (JSONL only)
    held: list[Record] | None = None

    def __len__(self) -> int:
        return len(self.lines)

    def where(self, index: int) -> str:
        word = "line"
        if self.held is not None:
            word = "item"
        elif self.path.suffix.lower() == ".parquet":
            word = "row"
        return f"{word} {self.lines[index]}"

    def names(self, column: Names | None, start: int, stop: int) -> list[str | None]:
        """The groups (or conditions) of the records from ``start`` to ``stop``."""
        return [None] * (stop - start) if column is None else column.values(start, stop)
