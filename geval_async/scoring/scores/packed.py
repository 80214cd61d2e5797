"""Numbers packed as narrowly as their values allow: the storage of :mod:`.columns`.

A study of a million items holds a dozen numbers per item (the record's position, the codes of
its criterion, status and distribution, its standard error, ...). Most are small codes (a
study has four criteria and a handful of distinct answers), and some never leave their
default (no reasoning field, no standard error with one draw). A :class:`PackedColumn` keeps
nothing but a length while every value is its default, then one byte a value, and widens to
2, 4 or 8 bytes only when a value needs it: a million items' columns take about 12 MB
instead of 46. Pure: the standard library's ``array`` and numpy.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Generic, TypeVar, overload

import numpy as np
import pandas as pd

__all__ = ["Coded", "PackedColumn", "first_appearance", "first_codes", "objects"]

T = TypeVar("T")
# The signed integer typecodes, narrowest first (numpy reads each as the same C type).
_WIDER = {"b": "h", "h": "i", "i": "q"}


def objects(values: list[Any]) -> np.ndarray:
    """``values`` (strings, numbers, None) as an object array, to be read by code."""
    table = np.empty(len(values), dtype=object)
    table[:] = values
    return table


def first_codes(values: Iterable[Hashable], count: int) -> tuple[np.ndarray, list[Any]]:
    """The ``count`` ``values`` as codes into their distinct values, in the order they first
    appear (``pd.factorize``'s codes and uniques with ``use_na_sentinel=False``; None is a
    value of its own): one dict entry per distinct value, where pandas' hash table is sized
    to the values (about 15 MB for 250,000 records' conditions, of which there are two)."""
    found: dict[Hashable, int] = {}
    code = found.setdefault
    codes = np.fromiter((code(v, len(found)) for v in values), dtype=np.int32, count=count)
    return codes, list(found)


def first_appearance(keys: np.ndarray, block: int = 1 << 16) -> np.ndarray:
    """The distinct ``keys`` in the order they first appear (``pd.unique``'s), read a block at
    a time: pandas sizes its hash table to the keys it is given (about 10 MB for 250,000 items'
    keys of a few distinct values), a block's is small."""
    seen: dict[Any, None] = {}
    for start in range(0, len(keys), block):
        seen.update(dict.fromkeys(pd.unique(keys[start : start + block]).tolist()))
    return np.array(list(seen), dtype=keys.dtype)


class Coded(Generic[T]):
    """Distinct values, each stored once, by code (0, 1, ...)."""

    __slots__ = ("codes", "values")

    def __init__(self) -> None:
        self.codes: dict[Hashable, int] = {}
        self.values: list[T] = []

    def code(self, value: T, key: Hashable = None) -> int:
        key = value if key is None else key
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.values)
            self.values.append(value)
        return code


class PackedColumn:
    """A column of integers (or, with ``typecode="d"``, floats) that starts with no storage.

    Args:
        default: the value of every entry until one differs (a NaN default is honoured).
        typecode: ``"b"`` for integers (widened to ``"h"``, ``"i"``, ``"q"`` as values need),
            ``"d"`` for floats.
    """

    __slots__ = ("_data", "_float", "_length", "default")

    def __init__(self, default: float = 0, typecode: str = "b") -> None:
        self.default = default
        self._float = typecode == "d"
        self._length = 0  # the entries while there is no storage (all of them the default)
        self._data: array | None = None

    def _is_default(self, value: float) -> bool:
        if value == self.default:
            return True
        return self._float and value != value and self.default != self.default

    def append(self, value: float) -> None:
        """Add one value."""
        data = self._data
        if data is None:
            if self._is_default(value):
                self._length += 1
                return
            typecode = "d" if self._float else self._fitting(value, "b")
            data = self._data = array(typecode, [self.default]) * self._length
        try:
            data.append(value)
        except OverflowError:
            self._widen(value).append(value)

    def extend(self, values: Iterable[float]) -> None:
        """Add each of ``values`` (all or, when one cannot be stored, none)."""
        values = list(values)
        data = self._data
        if data is None and all(self._is_default(value) for value in values):
            self._length += len(values)
            return
        if data is not None:
            try:
                data.extend(array(data.typecode, values))  # checked whole before any is added
                return
            except OverflowError:
                pass
        for value in values:
            self.append(value)

    def _fitting(self, value: float, typecode: str) -> str:
        while True:
            try:
                array(typecode, [int(value), int(self.default)])
                return typecode
            except OverflowError:
                typecode = _WIDER[typecode]

    def _widen(self, value: float) -> array:
        assert self._data is not None
        typecode = self._fitting(value, _WIDER[self._data.typecode])
        self._data = array(typecode, self._data)
        return self._data

    def __len__(self) -> int:
        return len(self._data) if self._data is not None else self._length

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> list[float]: ...

    def __getitem__(self, index: int | slice) -> float | list[float]:
        if self._data is not None:
            found = self._data[index]
            return found.tolist() if isinstance(found, array) else found
        return _Same(self.default, self._length)[index]

    def reader(self) -> Sequence[float]:
        """What reads one value by index fastest: the storage, or (none) the default's."""
        return self._data if self._data is not None else _Same(self.default, self._length)

    def numbers(self) -> np.ndarray:
        """The column as a numpy array (a view of the storage when there is one; read only)."""
        if self._data is None:
            dtype = np.float64 if self._float else np.int8
            return np.full(len(self), self.default, dtype=dtype)
        return np.frombuffer(self._data, dtype=self._data.typecode)

    @property
    def nbytes(self) -> int:
        """The bytes the values take."""
        return 0 if self._data is None else len(self._data) * self._data.itemsize


class _Same(Sequence[float]):
    """``length`` times ``value``, read by index (a column with no storage)."""

    __slots__ = ("_length", "_value")

    def __init__(self, value: float, length: int) -> None:
        self._value, self._length = value, length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> list[float]: ...

    def __getitem__(self, index: int | slice) -> float | list[float]:
        if isinstance(index, slice):
            return [self._value] * len(range(*index.indices(self._length)))
        if not -self._length <= index < self._length:
            raise IndexError("column index out of range")
        return self._value
