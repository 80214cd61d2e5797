"""The report's Overview: the study, cache coverage, invalid shares with reasons, the
per-criterion tables the CSV files hold and the tests between the conditions.

Everything becomes plain data (captions, header cells, row cells as text) for the template;
numbers are formatted here so that the page shows exactly what the CSV files and the terminal
show, and the same results always give the same text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pandas as pd

from ....options import SamplingMode
from ...scores.results import StudyResults
from ...stats.comparisons import Comparison

# Above this many groups a criterion's table shows its Average row only: the full table is in
# the CSV file, and every record is in the drill-down.
MAX_TABLE_ROWS = 200


@dataclass
class Table:
    """A table for the template: a caption, header cells and rows (first cell: row header)."""

    caption: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    numeric: bool = True


@dataclass
class CriterionView:
    """One criterion in the Overview: its table and its test row."""

    name: str
    display_name: str
    scale: str
    table: Table
    test: str
    reasons: list[tuple[str, int]] = field(default_factory=list)
    steps: str = ""  # the evaluation steps its prompt held ("" for none found)
    steps_origin: str = ""


def number(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.{digits}f}"


def frame_table(frame: pd.DataFrame, caption: str, csv_name: str) -> Table:
    """A group x condition table (Average row last); long tables keep the Average row only."""
    header = [str(frame.index.name or "")] + [str(c) for c in frame.columns]
    shown = frame
    note = ""
    if len(frame) - 1 > MAX_TABLE_ROWS:
        shown = frame.iloc[[-1]]
        note = (
            f"{len(frame) - 1} rows: the Average row is shown; every row is in {csv_name}, "
            "every record in the drill-down below."
        )
    rows = [[str(index), *(number(v) for v in row)] for index, row in shown.iterrows()]
    return Table(caption, header, rows, note)


TEST_HEADER = [
    "criterion",
    "mean A (sd)",
    "mean B (sd)",
    "n A",
    "n B",
    "test",
    "statistic",
    "df",
    "p",
    "p adj",
    "reject",
    "Hedges' g [CI]",
]


def test_table(comparisons: Iterable[Comparison], caption: str) -> Table:
    """Comparisons as a table: means, test, statistic, p, BH-adjusted p, effect size + CI."""
    rows = []
    notes = []
    for c in comparisons:
        rows.append(
            [
                c.criterion,
                f"{number(c.mean_a)} ({number(c.sd_a)})",
                f"{number(c.mean_b)} ({number(c.sd_b)})",
                str(c.n_a),
                str(c.n_b),
                c.test,
                number(c.statistic),
                number(c.df, 2),
                number(c.p, 4),
                number(c.p_adj, 4),
                "" if c.reject is None else ("yes" if c.reject else "no"),
                f"{number(c.hedges_g, 2)} [{number(c.g_ci_low, 2)}, {number(c.g_ci_high, 2)}]",
            ]
        )
        if c.note:
            notes.append(f"{c.criterion}: {c.note}")
    return Table(caption, TEST_HEADER, rows, "; ".join(notes))


def test_line(c: Comparison | None) -> str:
    """A comparison in one line, for the card under its table."""
    if c is None:
        return ""
    reject = "" if c.reject is None else f", reject: {'yes' if c.reject else 'no'}"
    df = "" if c.df is None else f", df {number(c.df, 2)}"
    return (
        f"{c.test} {c.condition_a} vs {c.condition_b}: statistic {number(c.statistic)}{df}, "
        f"p {number(c.p, 4)}, p adj {number(c.p_adj, 4)}{reject}; Hedges' g "
        f"{number(c.hedges_g, 2)} [{number(c.g_ci_low, 2)}, {number(c.g_ci_high, 2)}]"
        + (f" ({c.note})" if c.note else "")
    )


def coverage_table(results: StudyResults) -> Table:
    """Per criterion: items, scored, missing, refused, no valid rating, samples, invalid share."""
    rows = []
    for name, t in results.tallies.items():
        samples = t.valid_samples + t.invalid_samples
        share = f"{100 * t.invalid_samples / samples:.1f}%" if samples else ""
        rows.append(
            [
                name,
                *(
                    str(v)
                    for v in (t.items, t.scored, t.missing, t.refused, t.no_valid)
                    + (t.valid_samples, t.invalid_samples)
                ),
                share,
            ]
        )
    header = [
        "criterion",
        "items",
        "scored",
        "missing",
        "refused",
        "no valid rating",
        "valid samples",
        "invalid samples",
        "invalid share",
    ]
    return Table("Cache coverage and invalid samples per criterion", header, rows)


def judged_span(results: StudyResults) -> str:
    """When the scored answers arrived (first and last), in UTC; "" when none is stored."""
    if results.judged is None:
        return ""
    first, last = (
        datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC") for t in results.judged
    )
    return first if first == last else f"{first} to {last}"


def study_facts(results: StudyResults) -> list[tuple[str, str]]:
    """The study at a glance: records, criteria, judge, sampling, when judged, coverage."""
    config = results.config
    study = results.study
    sampling = config.sampling
    mode = (
        f"samples: n = {sampling.n}, temperature {sampling.temperature:g}, top_p "
        f"{sampling.top_p:g}, max_tokens {sampling.max_tokens}"
        if sampling.mode == SamplingMode.SAMPLES
        else f"logprobs: one answer, top_logprobs {sampling.top_logprobs}, temperature "
        f"{sampling.temperature:g}"
    )
    criteria = ", ".join(
        [
            *(
                f"{c.config.display_name} ({c.name}, {_scale(c.config.scale.points)})"
                for c in study.criteria
            ),
            *(f"{c.display_name} ({c.name}, pairwise)" for c in config.pairwise),
        ]
    )
    selected = study.selected_records
    conditions = sorted({c for c in selected.conditions if c is not None})
    groups = {g for g in selected.groups if g is not None}
    scored = sum(t.scored for t in results.tallies.values())
    items = sum(t.items for t in results.tallies.values())
    facts = [
        ("config", str(config.source)),
        (
            "records",
            f"{len(study.selected_records)} ({len(groups)} groups)"
            if groups
            else str(len(study.selected_records)),
        ),
        ("conditions", ", ".join(conditions) or "none"),
        ("criteria", criteria),
        ("judge model", config.judge.model + (" (simulated judge)" if results.simulated else "")),
        ("sampling", mode),
        ("judged", judged_span(results) or "nothing in the cache yet"),
        (
            "cache coverage",
            f"{scored} of {items} items scored"
            + (f"; {results.missing} without an answer" if results.missing else ""),
        ),
    ]
    if results.orders:
        verdicts = results.pair_verdicts
        given = int(verdicts["verdict"].notna().sum())
        facts.append(("pairwise", f"{given} of {len(verdicts)} orders asked have a verdict"))
    if results.corrupted:
        facts.append(("corrupted entries", f"{results.corrupted} (count as missing)"))
    return facts


def _scale(points: Iterable[float]) -> str:
    values = list(points)
    steps = {round(b - a, 9) for a, b in zip(values, values[1:], strict=False)}
    if steps == {1.0}:
        return f"{values[0]:g}-{values[-1]:g}"
    return ", ".join(f"{v:g}" for v in values)
