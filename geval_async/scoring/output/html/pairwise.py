"""The HTML report's pairwise section: the win rates, the position measure, the strengths,
and every pair with its two orders' answers side by side.

Plain data for the template (``pairwise.html.j2``), from the results' pairwise frames and the
orders read (:mod:`geval_async.scoring.scores.pairs`); numbers formatted as in the Markdown
report (:mod:`..pairwise`).
"""

from __future__ import annotations

from typing import Any

from ...scores.results import StudyResults
from ..pairwise import position_line
from .overview import Table, number


def _interval(value: float, low: float, high: float) -> str:
    shown = number(value)
    if not shown or not number(low):
        return shown
    return f"{shown} [{number(low)}, {number(high)}]"


def pairwise_section(results: StudyResults) -> dict[str, Any] | None:
    """The section's tables and pairs (None when the study has no pairwise criterion)."""
    if not results.orders:
        return None
    frame = results.pairwise()
    prefix = results.prefix
    wins = Table(
        f"Pairwise verdicts per criterion and pair of conditions (stats/{prefix}_pairwise.csv)",
        ["criterion", "a", "b", "pairs", "a wins", "b wins", "ties", "inconsistent", "invalid",
         "a win rate [CI]", "p", "p adj"],
        [
            [str(r["criterion"]), str(r["a"]), str(r["b"]), str(r["pairs"]), str(r["a_wins"]),
             str(r["b_wins"]), str(r["ties"]), str(r["inconsistent"]), str(r["invalid"]),
             _interval(r["a_win_rate"], r["ci_low"], r["ci_high"]), number(r["p"], 4),
             number(r["p_adj"], 4)]
            for r in frame.to_dict("records")
        ],
    )  # fmt: skip
    position = Table(
        "Share of the verdicts won by the text shown first (0.5: no position bias)",
        ["criterion", "a", "b", "verdicts", "first shown wins [CI]", "reading"],
        [
            [str(r["criterion"]), str(r["a"]), str(r["b"]), str(r["first_shown_verdicts"]),
             _interval(r["first_shown_wins"], r["first_ci_low"], r["first_ci_high"]),
             position_line(r)]
            for _, r in frame.iterrows()
        ],
    )  # fmt: skip
    strengths = results.strengths()
    strength_table = None
    if len(strengths):
        strength_table = Table(
            f"Bradley-Terry strengths (stats/{prefix}_strengths.csv)",
            ["criterion", "rank", "condition", "strength [CI]", "pairs"],
            [
                [str(r["criterion"]), str(r["rank"]), str(r["condition"]),
                 _interval(r["strength"], r["ci_low"], r["ci_high"]), str(r["pairs"])]
                for r in strengths.sort_values(["criterion", "rank"], kind="stable").to_dict(
                    "records"
                )
            ],
        )  # fmt: skip
    return {
        "wins": wins,
        "position": position,
        "strengths": strength_table,
        "pairs": _pairs(results),
    }


def _pairs(results: StudyResults) -> list[dict[str, Any]]:
    """Every pair, its orders side by side: who was shown first, the verdict, the answers."""
    outcomes = {
        (r["criterion"], r["group"], r["a"], r["b"]): r
        for r in results.pair_outcomes.to_dict("records")
    }
    pairs: dict[tuple[str, str | None, str, str], dict[str, Any]] = {}
    for order in results.orders:
        record = order.record
        key = (order.criterion, record.group, record.a, record.b)
        outcome = outcomes[key]
        pair = pairs.setdefault(
            key,
            {
                "criterion": order.criterion,
                "group": record.group,
                "a": record.a,
                "b": record.b,
                "winner": outcome["winner"] or "no verdict",
                "inconsistent": bool(outcome["inconsistent"]),
                "orders": [],
            },
        )
        pair["orders"].append(
            {
                "first": record.first,
                "second": record.second,
                "verdict": order.verdict or f"none ({order.reason})",
                "winner": order.winner or "no verdict",
                "answers": list(order.answers),
            }
        )
    return list(pairs.values())
