"""The codes score's steps read the records by (scoring/scores/packed.py): the same codes and order
as pandas' factorize and unique, which they replace to keep the million's peak down."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from geval_async.scoring.scores.packed import first_appearance, first_codes

names = st.lists(st.one_of(st.none(), st.sampled_from(["A", "B", "all", "g1", "é"])))


@given(names)
def test_first_codes_are_factorize_codes(values: list[str | None]) -> None:
    codes, distinct = first_codes(iter(values), len(values))
    expected, uniques = pd.factorize(np.array(values, dtype=object), use_na_sentinel=False)
    assert codes.tolist() == expected.tolist()
    assert [None if pd.isna(u) else u for u in uniques] == distinct


@given(st.lists(st.integers(0, 40)), st.integers(1, 7))
def test_first_appearance_is_unique_in_order(keys: list[int], block: int) -> None:
    array = np.array(keys, dtype=np.int32)
    found = first_appearance(array, block=block)
    assert found.tolist() == pd.unique(array).tolist()
    assert found.dtype == np.int32
