"""The HTML report: one self-contained, offline file (``<output>/<prefix><variant>_report.html``).

Styles, script, data and figures (inline SVG) are all inside the file, so it opens from a USB
stick or an e-mail attachment and never makes a network request. Sections: Overview (the study,
coverage, invalid shares with reasons, the per-criterion tables and tests), Figures (box plots
with every group as a point, rating distributions, judge-vs-human scatter plots for a study with
human scores), Agreement between the judges (a panel's: alpha, ICC, pairwise Spearman, the
effective number of judges, when handed the agreement frame), On the human scale (a study with
human scores: calibration and prediction-powered means), How far to trust the scores (mean
standard error, the judge's self-consistency over its draws, the n curve), Draws spent by need
(a study that stops drawing where ratings settle: its draws, requests and cost against the
fixed n), What the judge may
be reacting to (length, use of the scale, self-preference: each flag with what to do) and the
Drill-down (every record with its standard errors; its answers rendered on demand from inline
JSON).

The page is a Jinja2 template (``templates/``, shipped as package data); this package is a
pure renderer: handed :class:`StudyResults` (and the judge-vs-human data), it returns the page
as text and writes nothing. :mod:`..outputs` writes it (the "html" kind: named with the
variant, atomically, with the user's umask). The same cache gives the same file byte for byte,
apart from the generation time (which honours ``SOURCE_DATE_EPOCH``).

    >>> from geval_async import load_results
    >>> from geval_async.scoring.output.writer import write_html_report
    >>> write_html_report(load_results("examples/ueq/config.toml"))   # outputs' writer
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pandas as pd
from markupsafe import Markup

from ....errors import ConfigError
from ....options import StatTest
from ....study.evaluation_steps import steps_origin
from ....study.pricing import PromptCacheShare
from ...panel.results import PanelStudyResults
from ...scores.human import HumanComparison
from ...scores.results import StudyResults
from ...scores.tables import COMPOSITE
from .agreement import agreement_section
from .bias import bias_section
from .draws import draws_section
from .drilldown import drilldown_data, script_json
from .gallery import box_figures, distribution_figures, human_section
from .human_scale import human_scale_view
from .overview import (
    CriterionView,
    coverage_table,
    frame_table,
    number,
    study_facts,
    test_line,
    test_table,
)
from .pairwise import pairwise_section
from .readings import REASON_WORDS, reason_counts
from .trust import trust_section

__all__ = ["render_html_report"]


def _generated() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and not epoch.isdigit():
        raise ConfigError(
            f"SOURCE_DATE_EPOCH={epoch!r} is not a whole number of seconds: fix or unset it"
        )
    moment = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def render_html_report(
    results: StudyResults,
    *,
    test: StatTest | str | None = None,
    human: HumanComparison | None = None,
    agreement: pd.DataFrame | None = None,
    prompt_cache: PromptCacheShare | None = None,
) -> str:
    """The report as one HTML document.

    Args:
        results: the scored study (:func:`geval_async.load_results`).
        test: override the configured test ("welch", "paired-t", "wilcoxon").
        human: judge-vs-human pairs and correlations, for the scatter plots.
        agreement: a panel's agreement between its judges
            (:func:`~geval_async.scoring.panel.agreement.agreement_frame`), for its section.
        prompt_cache: the share of the runs' prompt tokens the provider's prompt cache served,
            as the runs recorded it (a line of the study's facts).
    """
    import jinja2

    config = results.config
    prefix = results.prefix  # with the variant, as every output is named
    has_conditions = results.compares_conditions
    comparisons = {c.criterion: c for c in results.comparisons(test)} if has_conditions else {}
    reasons = reason_counts(results.invalid_shares())
    group = config.data.group_field or "record"
    criteria = []
    for planned in results.study.criteria:
        c = planned.config
        caption = f"mean weighted score per {group}"
        criteria.append(
            CriterionView(
                c.name,
                c.display_name,
                f"{c.scale.lo:g}-{c.scale.hi:g}",
                frame_table(results.table(c.name), caption, f"scores/{prefix}_{c.name}.csv"),
                test_line(comparisons.get(c.name)),
                reasons.get(c.name, []),
                (planned.steps.text or "") if planned.steps is not None else "",
                steps_origin(planned, config.judge.model),
            )
        )
    composite = None
    if results.has_composite:
        frame = results.composite()
        composite = {
            "table": frame_table(frame, f"composite per {group}", f"scores/{prefix}_average.csv"),
            "test": None
            if COMPOSITE not in comparisons
            else test_table([comparisons[COMPOSITE]], "Composite: test between the conditions"),
            "line": test_line(comparisons.get(COMPOSITE)),
            "normalize": config.composite.normalize,
            "criteria": ", ".join(config.composite.criteria),
            "means": [(str(k), number(v, 2)) for k, v in frame.iloc[-1].items()],
        }
    data = drilldown_data(results)
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("geval_async.scoring.output.html", "templates"),
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
        facts=study_facts(results)
        + ([("prompt cache", prompt_cache.line())] if prompt_cache is not None else []),
        simulated=results.simulated,
        coverage=coverage_table(results),
        criteria=criteria,
        composite=composite,
        tests=all_tests,
        alpha=config.stats.alpha,
        paired_design=results.paired_design if has_conditions else False,
        prefix=prefix,
        figures=box_figures(results) + distribution_figures(results),
        meta=None if human is None else human_section(results, human),
        agreement=None if agreement is None else agreement_section(agreement, prefix),
        human_scale=human_scale_view(results),
        trust=trust_section(results),
        draws=draws_section(results),
        pairwise=pairwise_section(results),
        # A panel's pooled score is no one judge's habit: each judge's own page has its section.
        bias=None
        if isinstance(results, PanelStudyResults)
        else bias_section(results.reactions, f"stats/{prefix}_bias.csv"),
        data=Markup(script_json(data)),
        reason_words=REASON_WORDS,
        invalid_warnings=[d.warning() for d in results.share_differences()],
        generated=_generated(),
    )
