"""Tables a data scientist already uses (pandas), from item scores (sync, no I/O).

- the long table: one row per record and criterion, with score, its standard error (``se``),
  valid/invalid samples and the distribution, for anyone doing their own analysis;
- per criterion, the group x condition table with a trailing ``Average`` row (the layout the
  original UEQ study used);
- the composite: each criterion normalised to 100 (by its scale maximum, or min-max) and
  averaged, per group and condition;
- the comparisons between the two configured conditions on every criterion and the composite,
  read from the per-group scores (never from the Average row).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from ...options import Normalization, StatTest, parse_option
from ...study.config import EvalConfig
from ..stats.comparisons import Comparison, adjust_fdr, paired, welch, wilcoxon
from .columns import STATUSES, PanelColumns, ScoreColumns
from .record_heads import RecordHeads
from .scores import ItemScore, distribution_json

AVERAGE = "Average"
COMPOSITE = "composite"
LONG_COLUMNS = [
    "record_id",
    "group",
    "condition",
    "criterion",
    "score",
    "se",
    "status",
    "valid",
    "invalid",
    "valid_mass",
    "distribution",
]
# A panel's long table: these after ``status``, who scored the record (see :mod:`.panel`).
PANEL_COLUMNS = ("judges_scored", "judges_missing")
# A study labelled by people: each record's calibrated score and its interval, after ``se``
# (computed in :mod:`.labelled`).
CALIBRATED_COLUMNS = ["calibrated", "lo", "hi"]


def long_frame(scores: ScoreColumns) -> pd.DataFrame:
    """One row per record and criterion (missing and refused items included, score NaN); a
    panel's pooled items add ``judges_scored`` and ``judges_missing``."""
    return _long_from_columns(scores, names=long_columns(scores))


def standard_errors(scores: ScoreColumns) -> pd.DataFrame:
    """The long table's ``criterion`` and ``se`` columns alone (the reports' mean SE per
    criterion), not its ids, statuses and distributions."""
    return _long_from_columns(scores, names=["criterion", "se"])


def label_rows(scores: ScoreColumns) -> pd.DataFrame:
    """The long table's ``record_id``, ``group``, ``condition``, ``criterion``, ``score`` and
    ``status`` alone (what the calibration against human labels reads)."""
    return _long_from_columns(
        scores, names=["record_id", "group", "condition", "criterion", "score", "status"]
    )


def score_rows(scores: ScoreColumns) -> pd.DataFrame:
    """The long table's ``record_id``, ``condition``, ``criterion``, ``score`` and ``status``
    alone (what the bias checks read), not its distributions."""
    return _long_from_columns(
        scores, names=["record_id", "condition", "criterion", "score", "status"]
    )


def long_columns(columns: ScoreColumns) -> list[str]:
    """The long table's columns: a panel's add its flags after ``status``."""
    if columns.panel is None:
        return LONG_COLUMNS
    at = LONG_COLUMNS.index("status") + 1
    return [*LONG_COLUMNS[:at], *PANEL_COLUMNS, *LONG_COLUMNS[at:]]


def _long_from_columns(
    columns: ScoreColumns,
    rows: slice | np.ndarray = slice(None),
    names: Sequence[str] = LONG_COLUMNS,
) -> pd.DataFrame:
    """The long table (its columns ``names``) of the items ``rows`` (a slice, or positions in
    increasing order) held in columns: each distinct distribution's numbers and JSON computed
    once, then read by code; the same frame as from the item scores."""
    if isinstance(rows, slice):
        rows = slice(*rows.indices(len(columns)))
    count = len(range(rows.start, rows.stop, rows.step)) if isinstance(rows, slice) else len(rows)
    if not count:
        return pd.DataFrame([], columns=list(names))
    code = columns.distribution.numbers()[rows]
    held = _held_at(columns, rows)
    distributions = columns.distributions.values
    record = columns.record.numbers()[rows]
    panel = columns.panel

    def per_distribution(values: list[Any], last: Any, dtype: Any = float) -> np.ndarray:
        # One more entry, last: the code -1 (no distribution) reads it.
        table = np.empty(len(values) + 1, dtype=dtype)
        table[:] = [*values, last]
        return table[code]

    def per_record(values: list[Any]) -> list[Any]:
        table = np.empty(len(values), dtype=object)
        table[:] = values
        return table[record].tolist()

    def of_held(column: np.ndarray, value: Callable[[ItemScore], Any]) -> np.ndarray:
        for i, s in held.items():  # rubric criteria's combined items
            column[i] = value(s)
        return column

    def nan(x: float | None) -> float:
        return np.nan if x is None else x

    def mass(s: ItemScore) -> float:
        return np.nan if s.distribution is None else s.distribution.valid_mass

    def samples(which: str) -> np.ndarray:
        if panel is not None:  # every judge's samples, not the pooled distribution's
            return getattr(panel, which).numbers()[rows].astype(np.int64)
        found = [getattr(d, which) for d in distributions]
        return of_held(per_distribution(found, 0, np.int64), lambda s: getattr(s, which))

    statuses = np.empty(len(STATUSES), dtype=object)
    statuses[:] = STATUSES
    make: dict[str, Callable[[], Any]] = {
        "record_id": lambda: per_record(columns.record_ids),
        "group": lambda: per_record(columns.record_groups),
        "condition": lambda: per_record(columns.record_conditions),
        "criterion": lambda: columns.criterion_column(rows).tolist(),
        "score": lambda: (
            columns.score_column(rows)
            if panel is not None
            else of_held(
                per_distribution([nan(d.weighted_score) for d in distributions], np.nan),
                lambda s: nan(s.weighted_score),
            )
        ),
        "se": lambda: of_held(columns.se.numbers()[rows].copy(), lambda s: nan(s.se)),
        "status": lambda: statuses[columns.status.numbers()[rows]].tolist(),
        "valid": lambda: samples("valid"),
        "invalid": lambda: samples("invalid"),
        "valid_mass": lambda: of_held(
            per_distribution([d.valid_mass for d in distributions], np.nan), mass
        ),
        "distribution": lambda: of_held(
            per_distribution(columns.distribution_texts(), "", object), distribution_json
        ).tolist(),
        "judges_scored": lambda: _panel(columns).judges_scored()[rows],
        "judges_missing": lambda: _panel(columns).judges_missing()[rows].tolist(),
    }
    return pd.DataFrame({name: make[name]() for name in names}, columns=list(names))


def _panel(columns: ScoreColumns) -> PanelColumns:
    assert columns.panel is not None  # only a panel's long table has its flags
    return columns.panel


def _held_at(columns: ScoreColumns, rows: slice | np.ndarray) -> dict[int, ItemScore]:
    """The held items (rubric combinations) among ``rows``, by their position in it."""
    if not columns.held:
        return {}
    if isinstance(rows, slice):
        span = range(rows.start, rows.stop, rows.step)
        return {span.index(i): s for i, s in columns.held.items() if i in span}
    at = np.searchsorted(rows, list(columns.held))
    return {
        int(k): s
        for k, (i, s) in zip(at, columns.held.items(), strict=True)
        if k < len(rows) and rows[k] == i
    }


def with_calibration(long: pd.DataFrame, items: pd.DataFrame | None) -> pd.DataFrame:
    """The long table with ``calibrated``, ``lo`` and ``hi`` after ``score``'s ``se``, from
    ``items`` (the study's labelled items, one row per row of ``long``, in its order); the
    table as it was when the study has no human labels (``items`` None)."""
    if items is None:
        return long
    frame = long.reset_index(drop=True).copy()
    at = frame.columns.get_loc("se") + 1
    for offset, column in enumerate(CALIBRATED_COLUMNS):
        frame.insert(at + offset, column, items[column].to_numpy())
    return frame


def write_long_csv(
    out: BinaryIO,
    scores: ScoreColumns,
    rows: int = 20_000,
    cells: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
    calibration: pd.DataFrame | None = None,
) -> None:
    """Write the long table as CSV to ``out`` (the bytes of ``with_calibration(long_frame(
    scores), calibration).to_csv(index=False)``), ``rows`` items at a time: the text of a
    study's every row is never held whole.

    Args:
        cells: what the writer makes of each block's cells before they are written (its guard
            of text a spreadsheet would run).
        calibration: the study's labelled items (:mod:`.labelled`), one row per item in the
            long table's order, whose calibrated score and interval join each block; None for
            a study without human labels.
    """
    names = long_columns(scores)
    for start in range(0, max(len(scores), 1), rows):
        chunk = _long_from_columns(scores, slice(start, start + rows), names)
        if calibration is not None:
            chunk = with_calibration(chunk, calibration.iloc[start : start + rows])
        if cells is not None:
            chunk = cells(chunk)
        out.write(chunk.to_csv(index=False, header=start == 0).encode())


SCORE_COLUMNS = ["record_id", "group", "condition", "criterion", "score"]


def _ordered(config: EvalConfig, seen: list[Any]) -> list[Any]:
    """The conditions ``seen``: the compared ones first, in the config's order."""
    ordered = [c for c in config.stats.conditions if c in seen]
    return ordered + [c for c in seen if c not in ordered]


def group_tables(
    columns: ScoreColumns, config: EvalConfig, heads: RecordHeads | None = None
) -> dict[str, pd.DataFrame]:
    """Per criterion (keyed by name), the mean weighted score per group (rows) and condition
    (columns), without the Average row; ``heads``: the columns' records by code, when the
    caller holds them."""
    return _group_tables_of_columns(columns, config, heads or RecordHeads.of(columns))


def _group_tables_of_columns(
    columns: ScoreColumns, config: EvalConfig, heads: RecordHeads
) -> dict[str, pd.DataFrame]:
    """:func:`group_tables` of items held in columns, read by code: each record's row and
    column in the tables found once, then a criterion's scores grouped by one integer per
    item (its cell) with pandas' own mean, without a frame of names per criterion; rows and
    columns ordered over every criterion."""
    row_codes, groups = heads.rows(columns.record_ids)
    conditions = _ordered(config, heads.conditions_seen()) or ["all"]
    # Per record code, the row of its group (else of the record) in the order they first
    # appear, and the column of its condition (-1: none shown).
    row_of = np.full(len(columns.record_ids), -1, dtype=np.int64)
    row_of[heads.present] = row_codes
    column = {condition: i for i, condition in enumerate(conditions)}
    named = [column.get("all" if name is None else name, -1) for name in heads.condition_names]
    column_of = np.full(len(columns.record_ids), -1, dtype=np.int64)
    column_of[heads.present] = np.array(named, dtype=np.int64)[heads.conditions]
    del row_codes, heads
    # One index for every criterion's table (a row's name once, not once a table).
    index = pd.Index(groups, name=config.data.group_field or "record")
    header = pd.Index(conditions)
    record, criterion_codes, width = (
        columns.record.numbers(),
        columns.criterion.numbers(),
        len(conditions),
    )
    tables = {}
    for criterion in config.criteria:
        rows = np.flatnonzero(criterion_codes == columns.criteria.codes.get(criterion.name, -1))
        at = record[rows]
        shown = column_of[at] >= 0
        cells = row_of[at][shown] * width + column_of[at][shown]
        scores = columns.score_column(rows)[shown]
        values = np.full(len(groups) * width, np.nan)
        if not len(cells) or np.bincount(cells).max() == 1:
            # One item a cell (a record per group and condition): its mean is its score, as
            # pandas' is (a NaN, none), without grouping a million cells.
            values[cells] = scores
        else:
            means = pd.Series(scores).groupby(cells, sort=False).mean()
            values[means.index.to_numpy(dtype=np.int64)] = means.to_numpy(dtype=np.float64)
        tables[criterion.name] = pd.DataFrame(
            values.reshape(len(groups), width), index=index, columns=header
        )
    return tables


def with_average(table: pd.DataFrame) -> pd.DataFrame:
    """The table plus a trailing Average row (column means over the groups present)."""
    average = pd.DataFrame([table.mean(axis=0, skipna=True)], index=[AVERAGE])
    out = pd.concat([table, average])
    out.index.name = table.index.name
    return out


def composite(tables: Mapping[str, pd.DataFrame], config: EvalConfig) -> pd.DataFrame:
    """The 100-point composite per group and condition, from the :func:`group_tables` of
    its criteria (keyed by criterion name).

    ``normalize = "max"``: mean over criteria of score / scale maximum, x 100 (the UEQ study's
    formula: mean(con/5, flu/3, ind/5, rel/5) x 100). ``"minmax"``: (score - lo) / (hi - lo),
    so the lowest rating maps to 0 rather than to lo/hi. A group missing any criterion gets NaN.
    """
    parts = []
    for name in config.composite.criteria:
        scale = config.criterion(name).scale
        table = tables[name]
        if config.composite.normalize == Normalization.MINMAX:
            parts.append((table - scale.lo) / (scale.hi - scale.lo))
        else:
            parts.append(table / scale.hi)
    stacked = np.stack([p.to_numpy(dtype=float) for p in parts])
    values = stacked.mean(axis=0) * 100.0  # NaN propagates: an incomplete group is not scored
    return pd.DataFrame(values, index=parts[0].index, columns=parts[0].columns)


def compare(
    tables: Mapping[str, pd.DataFrame], config: EvalConfig, test: StatTest | str | None = None
) -> list[Comparison]:
    """The configured test between the two conditions on every criterion, BH-adjusted across
    the criteria, followed by the composite (its own family of one, so p_adj = p).

    ``tables`` are the :func:`group_tables` of every criterion.

    Raises:
        ConfigError: ``test`` is not one of the tests.
    """
    # None: the config's test (``StudyResults.summary_test`` resolves an unset one by design).
    test = config.stats.stated_test if test is None else parse_option(StatTest, test, "the test")
    a, b = config.stats.conditions
    alpha = config.stats.alpha
    criteria = [c.name for c in config.criteria]
    results = [_compare_table(name, tables[name], a, b, test, alpha) for name in criteria]
    adjusted = adjust_fdr(results, alpha=alpha)
    if set(config.composite.criteria) <= set(criteria):
        adjusted += adjust_fdr(
            [_compare_table(COMPOSITE, composite(tables, config), a, b, test, alpha)], alpha=alpha
        )
    return adjusted


def _compare_table(
    name: str, table: pd.DataFrame, a: str, b: str, test: StatTest, alpha: float
) -> Comparison:
    col_a = table[a] if a in table else pd.Series(dtype=float)
    col_b = table[b] if b in table else pd.Series(dtype=float)
    if test == StatTest.WELCH:
        return welch(name, col_a.dropna().to_numpy(), col_b.dropna().to_numpy(), a, b, alpha=alpha)
    both = pd.concat([col_a, col_b], axis=1).dropna()
    x, y = both.iloc[:, 0].to_numpy(), both.iloc[:, 1].to_numpy()
    if test == StatTest.PAIRED_T:
        return paired(name, x, y, a, b, alpha=alpha)
    if test == StatTest.WILCOXON:
        return wilcoxon(name, x, y, a, b, alpha=alpha)
    raise ValueError(f"not a test: {test!r}")


def design_is_paired(
    columns: ScoreColumns, config: EvalConfig, heads: RecordHeads | None = None
) -> bool:
    """Whether the same groups appear under both compared conditions (a paired design)."""
    return _paired_by_code(heads or RecordHeads.of(columns), config)


def _paired_by_code(heads: RecordHeads, config: EvalConfig) -> bool:
    """:func:`design_is_paired` of the records' codes."""
    if len(config.stats.conditions) != 2 or not heads.by_group:
        return False
    groups_a, groups_b = (heads.groups_under(c) for c in config.stats.conditions)
    return bool(groups_a.any()) and bool(np.array_equal(groups_a, groups_b))


def conditions_present(columns: ScoreColumns, heads: RecordHeads | None = None) -> set[Any]:
    """The conditions the items' records have (None left out); ``heads``: as for the tables."""
    return set((heads or RecordHeads.of(columns)).conditions_seen())
