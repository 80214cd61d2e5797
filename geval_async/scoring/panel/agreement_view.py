"""The agreement between a panel's judges as a reader sees it, in the Markdown report and (via
:mod:`.html.agreement`) the HTML report: one row per criterion (alpha interval and ordinal with
their intervals, ICC(2,1) and ICC(2,k) with theirs, the mean pairwise Spearman, the effective
number of judges), a judges x judges Spearman matrix per criterion, one sentence per statistic
on how to read it, and the notes (why a value is missing, what was left out).

Pure: handed the frame of :func:`~geval_async.scoring.panel.agreement.agreement_frame` (the table of
``stats/<prefix>_agreement.csv``), it returns text; numbers to three decimals as elsewhere in
the reports, an empty cell for an undefined value (its note says why, never a silent 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from .agreement import Statistic

__all__ = ["HOW_TO_READ", "SUMMARY_HEADER", "AgreementView", "agreement_markdown", "view"]

DOCS = "docs/agreement.md"
SUMMARY_HEADER = [
    "criterion",
    "records",
    "judges",
    "alpha (interval)",
    "alpha (ordinal)",
    "ICC(2,1)",
    "ICC(2,k)",
    "mean Spearman",
    "effective judges (Kish)",
    "effective judges (eigen)",
]
# The summary table's statistic columns, in SUMMARY_HEADER's order after criterion/records/judges.
SUMMARY_STATISTICS = [
    Statistic.ALPHA_INTERVAL,
    Statistic.ALPHA_ORDINAL,
    Statistic.ICC_SINGLE,
    Statistic.ICC_AVERAGE,
    Statistic.MEAN_SPEARMAN,
    Statistic.EFFECTIVE_JUDGES,
    Statistic.EFFECTIVE_JUDGES_EIGEN,
]
HOW_TO_READ = [
    (
        "Krippendorff's alpha",
        "1 is perfect agreement and 0 what chance gives; 0.8 and above: the judges are "
        "interchangeable on this criterion, 0.667 to 0.8: tentative conclusions only, lower: "
        "the judge you choose changes the scores (interval compares score differences, ordinal "
        "only their order; ordinal well above interval: the judges rank alike but use the "
        "scale differently).",
    ),
    (
        "ICC",
        "ICC(2,1) is how reliable one judge's score is, ICC(2,k) how reliable the panel's mean "
        "is (below 0.5 poor, 0.5 to 0.75 moderate, 0.75 to 0.9 good, above 0.9 excellent); "
        "with a low ICC(2,1), report the panel's score.",
    ),
    (
        "Pairwise Spearman",
        "How alike two judges rank the records (on the records both scored): 1 the same "
        "order, 0 unrelated orders.",
    ),
    (
        "Effective number of judges",
        "The judges' errors are correlated, so k judges count as fewer: near 1, another judge "
        "adds little of its own; near k, each judge adds its own view (or its own noise: look "
        "at alpha).",
    ),
]


@dataclass
class AgreementView:
    """The agreement as text cells: the summary rows (``SUMMARY_HEADER``), per criterion the
    judges and their Spearman matrix (diagonal 1), the confidence level and the notes."""

    rows: list[list[str]]
    matrices: dict[str, tuple[list[str], list[list[str]]]]
    confidence: float
    notes: list[str] = field(default_factory=list)


def number(value: object) -> str:
    """Three decimals; empty for a missing value (NaN)."""
    try:
        figure = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(figure) else f"{figure:.3f}"


def _estimate(row: pd.Series) -> str:
    text = number(row["value"])
    if text and number(row["ci_low"]):
        text += f" [{number(row['ci_low'])}, {number(row['ci_high'])}]"
    return text


def view(frame: pd.DataFrame) -> AgreementView:
    """The cells of the agreement ``frame`` (:data:`~.agreement.AGREEMENT_COLUMNS`)."""
    rows: list[list[str]] = []
    matrices: dict[str, tuple[list[str], list[list[str]]]] = {}
    notes: list[str] = []
    for criterion, part in frame.groupby("criterion", sort=False):
        name = str(criterion)
        by_statistic = {str(s): r for s, r in part.set_index("statistic").iterrows()}
        first = by_statistic.get(str(Statistic.ALPHA_INTERVAL))
        cells = [
            name,
            "" if first is None else str(int(first["records"])),
            "" if first is None else str(int(first["judges"])),
        ]
        for statistic in SUMMARY_STATISTICS:
            found = by_statistic.get(str(statistic))
            cells.append("" if found is None else _estimate(found))
        rows.append(cells)
        pairs = part[part["statistic"] == str(Statistic.SPEARMAN)]
        judges = list(dict.fromkeys([*pairs["judge_a"], *pairs["judge_b"]]))
        matrix = {(j, j): "1.000" for j in judges}
        for pair in pairs.itertuples():
            matrix[(pair.judge_a, pair.judge_b)] = number(pair.value)
            matrix[(pair.judge_b, pair.judge_a)] = number(pair.value)
        matrices[name] = (judges, [[a, *(matrix[(a, b)] for b in judges)] for a in judges])
        # One line per criterion and note, naming every statistic (or pair) it is about.
        about: dict[str, list[str]] = {}
        for row in part.itertuples():
            if isinstance(row.note, str) and row.note:
                where = f"{row.statistic} {row.judge_a}-{row.judge_b}" if row.judge_a else ""
                about.setdefault(row.note, []).append(where or str(row.statistic))
        notes += [f"{name} {', '.join(names)}: {note}" for note, names in about.items()]
    confidence = float(frame["confidence"].iloc[0]) if len(frame) else math.nan
    return AgreementView(rows, matrices, confidence, notes)


def agreement_markdown(frame: pd.DataFrame, csv_name: str) -> list[str]:
    """The Markdown report's section: the summary table, the Spearman matrices, how to read
    each statistic and the notes (``csv_name``: where the full table is)."""
    shown = view(frame)
    out = [
        "",
        "## Agreement between the judges",
        "",
        f"Per criterion, from each record's weighted score per judge (`{csv_name}`; what each "
        f"statistic is: {DOCS}). Brackets: {shown.confidence:.0%} intervals (alpha: bootstrap "
        "over records; ICC: F interval).",
        "",
        "| " + " | ".join(SUMMARY_HEADER) + " |",
        "|---|" + "---:|" * (len(SUMMARY_HEADER) - 1),
    ]
    out += ["| " + " | ".join(cells) + " |" for cells in shown.rows]
    for criterion, (judges, matrix) in shown.matrices.items():
        if not judges:
            continue
        out += [
            "",
            f"Pairwise Spearman, {criterion}:",
            "",
            "| | " + " | ".join(judges) + " |",
            "|---|" + "---:|" * len(judges),
        ]
        out += ["| " + " | ".join(cells) + " |" for cells in matrix]
    out += ["", "How to read it:", ""]
    out += [f"- **{name}**: {sentence}" for name, sentence in HOW_TO_READ]
    if shown.notes:
        out += ["", "Notes:", ""]
        out += [f"- {note}" for note in shown.notes]
    return out
