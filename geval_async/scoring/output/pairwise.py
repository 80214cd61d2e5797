"""The pairwise criteria's outputs: the CSV tables, the report's section, the terminal table.

``stats/<prefix>_pairwise.csv`` holds one row per criterion and pair of conditions (wins,
ties, inconsistent pairs, ``a``'s win rate with its interval, the sign test and its
Benjamini-Hochberg adjustment, the share of verdicts won by the text shown first with its
interval); ``stats/<prefix>_strengths.csv`` the Bradley-Terry strengths of criteria that
compare more than two conditions. The Markdown section says the same for a reader, with what
the position measure means. Renderers only: the numbers come from
:mod:`geval_async.scoring.stats.pairwise` through the results.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .csv_cells import spreadsheet_safe
from .files import Output

if TYPE_CHECKING:
    from ..scores.results import StudyResults

__all__ = ["pairwise_outputs", "pairwise_section", "pairwise_table", "position_line"]

SIGNIFICANT = 6


def _path(results: StudyResults, name: str) -> Path:
    return results.config.output.path / "stats" / f"{results.prefix}_{name}.csv"


def pairwise_outputs(results: StudyResults) -> list[Output]:
    """``stats/<prefix>_pairwise.csv`` (and ``_strengths.csv`` with more than two
    conditions) when the study has pairwise criteria."""
    if not results.orders:
        return []
    form = f"%.{SIGNIFICANT}g"
    frame = results.pairwise()
    outputs = [
        Output(
            _path(results, "pairwise"),
            spreadsheet_safe(frame).to_csv(index=False, float_format=form).encode(),
        )
    ]
    strengths = results.strengths()
    if len(strengths):
        outputs.append(
            Output(
                _path(results, "strengths"),
                spreadsheet_safe(strengths).to_csv(index=False, float_format=form).encode(),
            )
        )
    return outputs


def _share(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.3f}"


def _interval(low: float, high: float) -> str:
    if math.isnan(low) or math.isnan(high):
        return ""
    return f" [{low:.3f}, {high:.3f}]"


def _p(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.4g}"


def position_line(row: pd.Series) -> str:
    """What a row's first-shown share says about position bias, in one sentence."""
    share, low, high = row["first_shown_wins"], row["first_ci_low"], row["first_ci_high"]
    if math.isnan(share):
        return "no verdict chose a side"
    if low > 0.5:
        return "the text shown first wins more often than half: a position bias"
    if high < 0.5:
        return "the text shown second wins more often than half: a position bias"
    return "no position bias shown (the interval covers 0.5)"


def pairwise_section(results: StudyResults) -> str:
    """The report's Markdown section on the pairwise criteria ("" without any)."""
    if not results.orders:
        return ""
    frame = results.pairwise()
    prefix = results.prefix
    both = all(
        c.pairing is not None and c.pairing.orders == "both" for c in results.config.pairwise
    )
    out = [
        "",
        "## Which is better: pairwise verdicts",
        "",
        "Each pair of a group's texts was shown to the judge "
        + (
            "in both orders; a pair whose orders agree is a win (or a tie), one whose orders "
            "disagree is a tie and counts as inconsistent."
            if both
            else "in one order drawn at random (seeded): position bias cannot be told apart "
            "from preference pair by pair, only over all of them."
        )
        + " The win rate is a's, ties counting half, with a Wilson interval over the groups; "
        "p is an exact sign test of a's wins against b's, adjusted by Benjamini-Hochberg "
        "across the criteria. Pairs with an order the judge gave no verdict for are invalid "
        f"and left out (`stats/{prefix}_pairwise.csv`).",
        "",
        "| criterion | a | b | pairs | a wins | b wins | ties | inconsistent | invalid | "
        "a win rate [CI] | p | p adj |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in frame.to_dict("records"):
        out.append(
            f"| {row['criterion']} | {row['a']} | {row['b']} | {row['pairs']} | "
            f"{row['a_wins']} | {row['b_wins']} | {row['ties']} | {row['inconsistent']} | "
            f"{row['invalid']} | {_share(row['a_win_rate'])}"
            f"{_interval(row['ci_low'], row['ci_high'])} | {_p(row['p'])} | "
            f"{_p(row['p_adj'])} |"
        )
    out += [
        "",
        "### Position: does the text shown first win more often?",
        "",
        "Of the verdicts that chose a side (each order asked counted once), the share won by "
        "the text shown first, with a Wilson interval: 0.5 is no position bias.",
        "",
        "| criterion | a | b | verdicts | first shown wins [CI] | reading |",
        "|---|---|---|---:|---:|---|",
    ]
    for _, row in frame.iterrows():
        out.append(
            f"| {row['criterion']} | {row['a']} | {row['b']} | {row['first_shown_verdicts']} | "
            f"{_share(row['first_shown_wins'])}"
            f"{_interval(row['first_ci_low'], row['first_ci_high'])} | {position_line(row)} |"
        )
    strengths = results.strengths()
    if len(strengths):
        out += [
            "",
            "### Bradley-Terry strengths",
            "",
            "Log-strengths centred on 0 (a higher one wins more; a difference d means the "
            "stronger wins with probability 1 / (1 + e^-d)), fitted by choix, ties counting "
            "half a win each way; 95% percentile intervals from refits on the groups drawn "
            f"again (`stats/{prefix}_strengths.csv`).",
            "",
            "| criterion | rank | condition | strength [CI] | pairs |",
            "|---|---:|---|---:|---:|",
        ]
        for row in strengths.sort_values(["criterion", "rank"], kind="stable").to_dict("records"):
            out.append(
                f"| {row['criterion']} | {row['rank']} | {row['condition']} | "
                f"{row['strength']:.3f}{_interval(row['ci_low'], row['ci_high'])} | "
                f"{row['pairs']} |"
            )
    return "\n".join(out) + "\n"


def pairwise_table(frame: pd.DataFrame) -> str:
    """The pairwise table for the terminal."""
    header = ["criterion", "a", "b", "pairs", "a/b/tie", "incons.", "a win rate [CI]", "p_adj"]
    header += ["first shown wins [CI]"]
    rows = [header]
    for row in frame.to_dict("records"):
        rows.append(
            [
                row["criterion"],
                row["a"],
                row["b"],
                str(row["pairs"]),
                f"{row['a_wins']}/{row['b_wins']}/{row['ties']}",
                str(row["inconsistent"]),
                _share(row["a_win_rate"]) + _interval(row["ci_low"], row["ci_high"]),
                _p(row["p_adj"]),
                _share(row["first_shown_wins"])
                + _interval(row["first_ci_low"], row["first_ci_high"]),
            ]
        )
    widths = [max(len(r[k]) for r in rows) for k in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(r, widths, strict=True)).rstrip()
        for r in rows
    )
