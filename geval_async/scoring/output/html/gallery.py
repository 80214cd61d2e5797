"""The report's Figures section as views: each figure's SVG with a heading and a text
alternative, built from :class:`StudyResults` (and, for a study with human scores, from the
judge-vs-human pairs the meta-evaluation stage provides).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from ...scores.human import HumanComparison
from ...scores.results import StudyResults
from .figures import box_figure, distribution_figure, scatter_figure
from .overview import Table, number


@dataclass(frozen=True)
class Figure:
    """One inline SVG figure with its heading and a text alternative."""

    key: str
    title: str
    description: str
    svg: Markup


def box_figures(results: StudyResults) -> list[Figure]:
    """The composite (when every criterion it needs is scored) and each criterion, per
    condition, every group a point."""
    study = results.study
    figures = []
    if results.has_composite:
        figures.append(
            Figure(
                "box-composite",
                "Composite score per condition",
                "Box plot of the 100-point composite per group, one box per condition; each "
                "point is a group, the diamond the mean.",
                Markup(
                    box_figure(
                        "box-composite", results.composite(average=False), "score (0-100)", (0, 100)
                    )
                ),
            )
        )
    for planned in study.criteria:
        c = planned.config
        scale = f"{c.scale.lo:g}-{c.scale.hi:g}"
        figures.append(
            Figure(
                f"box-{c.name}",
                f"{c.display_name} ({c.name}) per condition",
                f"Box plot of the mean weighted score ({scale}) per group, one box per "
                "condition; each point is a group, the diamond the mean.",
                Markup(
                    box_figure(
                        f"box-{c.name}",
                        results.table(c.name, average=False),
                        f"weighted score ({scale})",
                        (c.scale.lo, c.scale.hi),
                    )
                ),
            )
        )
    return figures


def distribution_figures(results: StudyResults) -> list[Figure]:
    """Per criterion: the mean share of each rating per condition (rubric criteria excluded)."""
    figures = []
    for planned in results.study.criteria:
        c = planned.config
        if c.is_rubric:
            continue
        sums: dict[str, dict[float, float]] = {}
        counts: dict[str, int] = {}
        for score in results.scores:
            if score.criterion != c.name or not score.distribution or not score.distribution.probs:
                continue
            condition = score.condition or "all"
            share = sums.setdefault(condition, {})
            counts[condition] = counts.get(condition, 0) + 1
            for rating, p in score.distribution.probs.items():
                share[rating] = share.get(rating, 0.0) + p
        order = [*results.config.stats.conditions, *sorted(sums)]
        shares = {
            k: {v: p / counts[k] for v, p in sums[k].items()}
            for k in dict.fromkeys(order)
            if k in sums
        }
        if not shares:
            continue
        figures.append(
            Figure(
                f"ratings-{c.name}",
                f"{c.display_name} ({c.name}): ratings per condition",
                "Bar chart of the share of each rating among the valid ratings, averaged over "
                "the records of each condition.",
                Markup(distribution_figure(f"ratings-{c.name}", shares, c.scale.points)),
            )
        )
    return figures


def human_section(results: StudyResults, human: HumanComparison) -> dict[str, Any]:
    """Scatter plots of judge against human scores per criterion, and the correlations."""
    figures = []
    for planned in results.study.criteria:
        c = planned.config
        pairs = human.pairs[human.pairs["criterion"] == c.name].dropna(subset=["human", "judge"])
        if pairs.empty:
            continue
        found = [
            f"{r.method} {number(r.value, 2)}"
            for r in human.correlations
            if r.criterion == c.name and r.level == "dataset"
        ]
        figures.append(
            Figure(
                f"human-{c.name}",
                f"{c.display_name} ({c.name}): judge vs human",
                f"Scatter plot of the judge's weighted score against the human score, one point "
                f"per record ({len(pairs)}); dataset-level correlations: {', '.join(found)}.",
                Markup(
                    scatter_figure(
                        f"human-{c.name}", pairs, (c.scale.lo, c.scale.hi), "judge weighted score"
                    )
                ),
            )
        )
    rows = [
        [
            r.judge,
            r.criterion,
            r.level,
            r.method,
            number(r.value, 3),
            "" if number(r.ci_low, 3) == "" else f"[{number(r.ci_low, 3)}, {number(r.ci_high, 3)}]",
            str(r.n),
        ]
        for r in human.correlations
    ]
    header = ["judge", "criterion", "level", "method", "correlation", "CI", "n"]
    return {"figures": figures, "table": Table("Judge vs human correlations", header, rows)}
