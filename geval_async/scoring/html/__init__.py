"""The HTML report: one self-contained, offline file (``<output>/<prefix>_report.html``).

Styles, script, data and figures (inline SVG) are all inside the file, so it opens from a USB
stick or an e-mail attachment and never makes a network request. Sections: Overview (the
study, coverage, invalid shares with reasons, the per-criterion tables and tests), Figures
(box plots with every group as a point, rating distributions, judge-vs-human scatter plots for
a study with human scores) and the Drill-down (every record; its answers rendered on demand
from inline JSON).

The page is a Jinja2 template (``templates/``, shipped as package data); this package gathers
the view model from :class:`StudyResults`. The same cache gives the same file byte for byte,
apart from the generation time (which honours ``SOURCE_DATE_EPOCH``).

    >>> from geval_async import load_results, write_html_report
    >>> write_html_report(load_results("examples/ueq/config.toml"))
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import ConfigError
from ..report import write_atomic
from ..results import StudyResults
from ..tables import COMPOSITE
from .drilldown import KEYS, drilldown_data, script_json
from .figures import box_figure, distribution_figure, scatter_figure
from .overview import (
    CriterionView,
    Table,
    coverage_table,
    frame_table,
    invalid_reasons,
    number,
    study_facts,
    test_line,
    test_table,
)

__all__ = ["HumanComparison", "html_report_path", "render_html_report", "write_html_report"]


@dataclass(frozen=True)
class HumanComparison:
    """Judge-vs-human data for a study with human scores (from the meta-evaluation stage).

    Attributes:
        pairs: one row per record and criterion: record_id, criterion, human, judge.
        correlations: objects with judge, criterion, level, method, value, ci_low, ci_high, n
            (``geval_async.meta.correlations.Correlation``).
    """

    pairs: pd.DataFrame
    correlations: Sequence[Any]


@dataclass(frozen=True)
class Figure:
    """One inline SVG figure with its heading and a text alternative."""

    key: str
    title: str
    description: str
    svg: str


def html_report_path(results: StudyResults) -> Path:
    """Where the report goes: ``<output>/<prefix>_report.html``."""
    output = results.config.output
    return output.path / f"{output.prefix}_report.html"


def write_html_report(
    results: StudyResults, *, test: str | None = None, human: HumanComparison | None = None
) -> Path:
    """Write the HTML report atomically; returns its path.

    Args:
        results: the scored study (:func:`geval_async.load_results`).
        test: override the configured test ("welch", "paired-t", "wilcoxon").
        human: judge-vs-human pairs and correlations, for the scatter plots.
    """
    page = render_html_report(results, test=test, human=human)
    return write_atomic(html_report_path(results), page.encode("utf-8"))


def _generated() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and not epoch.isdigit():
        raise ConfigError(
            f"SOURCE_DATE_EPOCH={epoch!r} is not a whole number of seconds: fix or unset it"
        )
    moment = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def render_html_report(
    results: StudyResults, *, test: str | None = None, human: HumanComparison | None = None
) -> str:
    """The report as one HTML document (see :func:`write_html_report`)."""
    import jinja2
    from markupsafe import Markup

    config = results.config
    prefix = config.output.prefix
    has_conditions = len(config.stats.conditions) == 2
    comparisons = {c.criterion: c for c in results.comparisons(test)} if has_conditions else {}
    reasons = invalid_reasons(results.scores)
    criteria = []
    figures = []
    for planned in results.study.criteria:
        c = planned.config
        caption = f"mean weighted score per {results.config.data.group_field or 'record'}"
        table = frame_table(results.table(c.name), caption, f"scores/{prefix}_{c.name}.csv")
        compared = comparisons.get(c.name)
        criteria.append(
            CriterionView(
                c.name,
                c.display_name,
                f"{c.scale.lo:g}-{c.scale.hi:g}",
                table,
                test_line(compared),
                reasons.get(c.name, []),
            )
        )
        figures.append(
            Figure(
                f"box-{c.name}",
                f"{c.display_name} ({c.name}) per condition",
                f"Box plot of the mean weighted score ({c.scale.lo:g}-{c.scale.hi:g}) per "
                "group, one box per condition; each point is a group, the diamond the mean.",
                Markup(
                    box_figure(
                        f"box-{c.name}",
                        results.table(c.name, average=False),
                        f"weighted score ({c.scale.lo:g}-{c.scale.hi:g})",
                        (c.scale.lo, c.scale.hi),
                    )
                ),
            )
        )
    composite = None
    if set(config.composite.criteria) <= {c.name for c in results.study.criteria}:
        frame = results.composite()
        composite = {
            "table": frame_table(
                frame,
                f"composite per {results.config.data.group_field or 'record'}",
                f"scores/{prefix}_average.csv",
            ),
            "test": None
            if COMPOSITE not in comparisons
            else test_table([comparisons[COMPOSITE]], "Composite: test between the conditions"),
            "line": test_line(comparisons.get(COMPOSITE)),
            "normalize": config.composite.normalize,
            "criteria": ", ".join(config.composite.criteria),
            "means": [(str(k), number(v, 2)) for k, v in frame.iloc[-1].items()],
        }
        figures.insert(
            0,
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
            ),
        )
    figures += _distribution_figures(results, Markup)
    meta = _human_section(results, human, Markup) if human is not None else None
    data = drilldown_data(results)
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("geval_async.scoring.html", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    all_tests = (
        test_table(comparisons.values(), "Tests between the conditions") if comparisons else None
    )
    return environment.get_template("report.html.j2").render(
        title=f"{prefix}: G-Eval report",
        facts=study_facts(results),
        simulated=results.simulated,
        coverage=coverage_table(results),
        criteria=criteria,
        composite=composite,
        tests=all_tests,
        alpha=config.stats.alpha,
        paired_design=results.paired_design if has_conditions else False,
        prefix=prefix,
        figures=figures,
        meta=meta,
        keys=KEYS,
        data=Markup(script_json(data)),
        generated=_generated(),
    )


def _distribution_figures(results: StudyResults, markup: Any) -> list[Figure]:
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
                markup(distribution_figure(f"ratings-{c.name}", shares, c.scale.points)),
            )
        )
    return figures


def _human_section(results: StudyResults, human: HumanComparison, markup: Any) -> dict[str, Any]:
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
                markup(
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
