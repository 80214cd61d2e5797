"""CSV text cells a spreadsheet would take for formulas, written so that it takes them as text.

The output tables carry text that comes from the study's inputs: record ids, groups and
conditions from the records file, criterion and judge names from the config. A spreadsheet
that opens a CSV runs a cell beginning with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage
return before one) as a formula, so a record id of ``=HYPERLINK(...)`` from a shared
records file would run on a co-author's machine. Such a text cell is written with an
apostrophe before it, the guard spreadsheets themselves use for "this is text" (OWASP's
advice for CSV injection). Numbers are left alone, negative ones included: a float column is
never text, and a text cell that reads as a plain number ("-3", "+0.5") is no formula.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

__all__ = ["spreadsheet_safe", "spreadsheet_text"]

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(cell: Any) -> Any:
    """``cell`` as a CSV writes it safely: a text cell a spreadsheet would run, with an
    apostrophe before it; anything else as it is."""
    if type(cell) is str and cell.startswith(_FORMULA_STARTS) and not _number(cell):
        return "'" + cell
    return cell


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with :func:`spreadsheet_text` applied to its text cells, its index and its
    column labels; ``frame`` itself (no copy) when no cell needs it, as in almost every study."""
    columns = [name for name in frame.columns if _text_column(frame[name])]
    unsafe = [name for name in columns if _any_unsafe(_values(frame[name]))]
    index_unsafe = _labels_unsafe(frame.index)
    columns_unsafe = _labels_unsafe(frame.columns)
    if not (unsafe or index_unsafe or columns_unsafe):
        return frame
    safe = frame.copy(deep=False)
    for name in unsafe:
        column = safe[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            safe[name] = column.cat.rename_categories(
                [spreadsheet_text(c) for c in column.cat.categories]
            )
        else:
            safe[name] = column.map(spreadsheet_text)
    if index_unsafe:
        safe.index = _safe_labels(safe.index)
    if columns_unsafe:
        safe.columns = _safe_labels(safe.columns)
    return safe


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip() == text  # "-3" is a number; "\t-3" or "-3\r" is not one to trust


def _text_column(column: pd.Series) -> bool:
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return not pd.api.types.is_numeric_dtype(dtype.categories.dtype)
    return pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)


def _values(column: pd.Series) -> Iterable[Any]:
    """The distinct values of a categorical column (a few), else every value."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.categories
    return column.to_numpy()


def _any_unsafe(values: Iterable[Any]) -> bool:
    # The first character alone is looked at for each cell: a million record ids are a
    # million short slices, not a million number parses.
    starts = _FORMULA_STARTS
    return any(type(v) is str and v[:1] in starts and spreadsheet_text(v) is not v for v in values)


def _labels_unsafe(labels: pd.Index) -> bool:
    if isinstance(labels, pd.MultiIndex):
        return any(_any_unsafe(level) for level in labels.levels)
    return _any_unsafe(labels)


def _safe_labels(labels: pd.Index) -> pd.Index:
    if isinstance(labels, pd.MultiIndex):
        return labels.set_levels([level.map(spreadsheet_text) for level in labels.levels])
    return labels.map(spreadsheet_text)
