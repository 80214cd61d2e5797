"""The packed columns under the scores (scoring/scores/packed.py): whatever values go in, in any
mix of single appends and whole extends, the same values come out, by index, by slice and
as numpy, however narrow (or absent) the storage they chose."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from geval_async.scoring.scores.packed import PackedColumn

# Codes from none (-1) to beyond 32 bits: every width the column can widen to.
CODES = st.integers(min_value=-(2**40), max_value=2**40) | st.integers(-1, 3)
BATCHES = st.lists(st.lists(CODES, max_size=5), max_size=30)


def _fill(column: PackedColumn, batches: list[list[float]], data: st.DataObject) -> list[float]:
    expected: list[float] = []
    for batch in batches:
        if data.draw(st.booleans()):
            column.extend(batch)
        else:
            for value in batch:
                column.append(value)
        expected += batch
    return expected


@given(batches=BATCHES, default=st.sampled_from([-1, 0]), data=st.data())
def test_integers_read_back_as_written(
    batches: list[list[float]], default: int, data: st.DataObject
) -> None:
    column = PackedColumn(default)
    expected = _fill(column, batches, data)
    assert len(column) == len(expected)
    assert [column[i] for i in range(len(expected))] == expected
    assert list(column.reader()) == expected
    assert column.numbers().tolist() == expected
    if expected:
        assert column[-1] == expected[-1]
        lo = data.draw(st.integers(0, len(expected)))
        assert column[lo : lo + 3] == expected[lo : lo + 3]
    with pytest.raises(IndexError):
        column[len(expected)]


@given(values=st.lists(st.floats(allow_nan=True) | st.just(math.nan), max_size=40))
def test_floats_read_back_nan_and_all(values: list[float]) -> None:
    column = PackedColumn(math.nan, "d")
    column.extend(values[: len(values) // 2])
    for value in values[len(values) // 2 :]:
        column.append(value)
    np.testing.assert_array_equal(column.numbers(), np.array(values, dtype=float))
    assert [column[i] for i in range(len(values))] == pytest.approx(values, nan_ok=True)


def test_a_column_of_its_default_holds_no_storage_and_codes_one_byte() -> None:
    """What makes a million items fit: no bytes for a column that never leaves its default
    (a standard error with one draw, no reasoning field), one byte a small code."""
    none = PackedColumn(math.nan, "d")
    small = PackedColumn(-1)
    for i in range(1000):
        none.append(math.nan)
        small.append(i % 5)
    assert none.nbytes == 0 and len(none) == 1000
    assert small.nbytes == 1000
    small.append(100_000)  # a record's position past 32,767: four bytes from then on
    assert small.nbytes == 4 * 1001 and small[1000] == 100_000 and small[999] == 4
