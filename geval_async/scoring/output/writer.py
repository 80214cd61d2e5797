"""Every output file of a study: one place decides the names and writes them.

    >>> results = load_results("examples/ueq/config.toml")
    >>> write_outputs(results)                        # what `geval-async report` writes
    >>> write_outputs(results, ["scores"])            # what `geval-async score` writes
    >>> write_html_report(results)                    # the HTML report alone

Layout under the output folder (``<prefix>`` is ``[output] prefix``)::

    scores/<prefix>_<criterion>.csv   group x condition, trailing Average row
    scores/<prefix>_long.csv          one row per record and criterion (raw values)
    scores/<prefix>_average.csv       the 100-point composite, trailing Average row
    stats/<prefix>_ttest.csv          the summary test per criterion + composite, BH-adjusted
    stats/<prefix>_paired.csv         paired t and Wilcoxon (when groups appear in both conditions)
    stats/<prefix>_consistency.csv    Krippendorff's alpha over the judge's draws, per criterion
    stats/<prefix>_n_curve.csv        was n worth it: mean SE and Spearman for k = 1..n draws
    stats/<prefix>_draws.csv          draws spent by need: draws, requests, cost against the fixed n
    stats/<prefix>_pairwise.csv       pairwise criteria: wins, ties, win rate, sign test, position
    stats/<prefix>_strengths.csv      pairwise criteria of > 2 conditions: Bradley-Terry strengths
    stats/<prefix>_human_scale.csv    means and the comparison on the human scale ([meta] human)
    stats/<prefix>_bias.csv           what the judge may be reacting to: length, scale, ...
    raw/<prefix>_<criterion>.json     per item: the prompt sent, every answer and parsed rating
    plots/<prefix>_<criterion>.png    box plots (--plots), and plots/<prefix>_n_curve.png
    <prefix>_report.md                coverage, invalid samples, tables, tests, plot links
    <prefix>_report.html              one offline page: overview, figures, every answer (--html)

Names carry what varies, so no command overwrites another's result: ``--criteria`` and
``--limit`` add ``-criteria-con-flu`` / ``-limit-10`` to the prefix, and ``--test`` other than
the configured one writes ``stats/<prefix>_ttest-<test>.csv``. Tables are rounded to
:data:`DECIMALS` decimals and test statistics to :data:`SIGNIFICANT` significant digits; the
long table keeps the values as computed.

Everything is rendered before the first file is written, each file is written whole or not
at all (a temporary file renamed into place) with the permissions of the user's umask, and
scores are never replaced by emptier ones: when the cache holds no answer for the study, or
far fewer than the outputs already on disk came from, nothing is written
(:class:`~geval_async.errors.ConfigError` naming the cache folder read).

A new kind of output is one function ``(results, options) -> list[Output]`` added to
:data:`KINDS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import pandas as pd

from ...errors import ConfigError
from ...options import StatTest
from ...study.pricing import PromptCacheShare
from ..panel.report import panel_judges_line, panel_section
from ..panel.results import PanelResults, PanelStudyResults
from ..scores.human import HumanComparison
from ..scores.tables import COMPOSITE, standard_errors, write_long_csv
from ..stats.comparisons import comparisons_frame
from ..stats.human_scale import ppi_missing
from .csv_cells import spreadsheet_safe
from .draws_report import draws_markdown
from .files import Output, write_files
from .human_output import human_outputs, human_scale_section
from .overwrite_guard import check_not_emptier
from .pairwise import pairwise_outputs, pairwise_section
from .plots import n_curve_plot
from .report import (
    bias_section,
    comparison_section,
    markdown_report,
    trust_section,
    write_raw_document,
)

if TYPE_CHECKING:
    from ..scores.results import StudyResults

DECIMALS = 3  # score tables and the composite
SIGNIFICANT = 6  # test statistics, p-values, effect sizes


@dataclass(frozen=True)
class OutputOptions:
    """What the caller asked for beyond the study: a test other than the configured one, plots,
    the HTML report (with judge-vs-human pairs, which the meta stage computes, when given)."""

    test: str | None = None
    plots: bool = False
    html: bool = False
    human: HumanComparison | None = None
    agreement: pd.DataFrame | None = None  # a panel's agreement between its judges
    # The share of the study's prompt tokens read from the provider's prompt cache, as the
    # runs recorded it (the caller reads it: the scoring stage never opens the cache).
    prompt_cache: PromptCacheShare | None = None


# --- writing: see .files -----------------------------------------------------------------


def csv_bytes(frame: pd.DataFrame, *, index: bool = True, float_format: str | None = None) -> bytes:
    """A frame as CSV bytes (``float_format`` e.g. "%.3f"; None keeps every digit), its
    text cells written so that a spreadsheet never runs one as a formula."""
    return spreadsheet_safe(frame).to_csv(index=index, float_format=float_format).encode()


# --- names -------------------------------------------------------------------------------------


def output_path(results: StudyResults, folder: str, name: str) -> Path:
    """``<output>/<folder>/<prefix>_<name>`` (``folder`` "" for the output folder itself)."""
    base = results.config.output.path
    return (base / folder if folder else base) / f"{results.prefix}_{name}"


def tests_name(results: StudyResults, test: str | None) -> str:
    """``ttest.csv`` for the summary test, ``ttest-<test>.csv`` for any other."""
    if test is None or test == results.summary_test():
        return "ttest.csv"
    return f"ttest-{test}.csv"


def _other_test(results: StudyResults) -> str | None:
    """Welch's test when the summary uses another because ``[stats] test`` names none and the
    design is paired (a named test is the summary's)."""
    configured = results.config.stats.stated_test
    return configured if results.summary_test() != configured else None


# --- kinds -------------------------------------------------------------------------------------


def score_outputs(results: StudyResults, options: OutputOptions) -> list[Output]:
    """Per-criterion tables, the long table and the raw exports."""
    if not results.study.criteria:
        return []  # every criterion is pairwise: see pairwise_kind
    decimals = f"%.{DECIMALS}f"

    def table_csv(criterion: str, out: BinaryIO) -> None:
        out.write(csv_bytes(results.table(criterion), float_format=decimals))

    # Each table rendered as it is written, one at a time: their text (8 MB at a million
    # items, more while pandas renders it) is not held while the long table is written.
    outputs = [
        Output(output_path(results, "scores", f"{c.name}.csv"), write=partial(table_csv, c.name))
        for c in results.study.criteria
    ]
    # Written as rendered, a chunk of rows at a time: a million rows' text is never held. A
    # panel's rows have its flags (judges_scored, judges_missing), a labelled study's their
    # calibrated scores, joined chunk by chunk.
    long = partial(
        write_long_csv,
        scores=results.columns,
        cells=spreadsheet_safe,
        calibration=results.labelled,
    )
    outputs.append(Output(output_path(results, "scores", "long.csv"), write=long))
    if isinstance(results, PanelStudyResults):
        # The judges' agreement, not raw exports: each judge's answers are in its own.
        agreement = csv_bytes(results.agreement, index=False, float_format=f"%.{SIGNIFICANT}g")
        return [*outputs, Output(output_path(results, "stats", "agreement.csv"), agreement)]
    for c in results.study.criteria:
        # Written as rendered: a large study's prompts are never all held.
        write = partial(
            write_raw_document, study=results.study, criterion=c.name, scores=results.scores
        )
        outputs.append(Output(output_path(results, "raw", f"{c.name}.json"), write=write))
    return outputs


def average_outputs(results: StudyResults, options: OutputOptions) -> list[Output]:
    """The 100-point composite (an error when ``--criteria`` leaves out one of its criteria)."""
    return [
        Output(
            output_path(results, "scores", "average.csv"),
            csv_bytes(results.composite(), float_format=f"%.{DECIMALS}f"),
        )
    ]


def test_outputs(results: StudyResults, options: OutputOptions) -> list[Output]:
    """The summary test per criterion (+ composite), and both paired tests when they fit."""
    if not results.compares_conditions:
        return []
    statistic = f"%.{SIGNIFICANT}g"
    other = _other_test(results)
    # --test writes that test alone; else the summary test, and the configured one if other.
    tests = [options.test] if options.test is not None else [None, *([other] if other else [])]
    outputs = [
        Output(
            output_path(results, "stats", tests_name(results, test)),
            csv_bytes(
                comparisons_frame(results.comparisons(test)), index=False, float_format=statistic
            ),
        )
        for test in tests
    ]
    if results.paired_design:
        both = results.comparisons("paired-t") + results.comparisons("wilcoxon")
        outputs.append(
            Output(
                output_path(results, "stats", "paired.csv"),
                csv_bytes(comparisons_frame(both), index=False, float_format=statistic),
            )
        )
    return outputs


def trust_outputs(results: StudyResults, options: OutputOptions) -> list[Output]:
    """The judge's self-consistency and the n curve (its plot with --plots, samples mode);
    none for a panel (a pooled score has no draws: each judge's are in its own outputs)."""
    if isinstance(results, PanelStudyResults) or not results.study.criteria:
        return []
    outputs = [
        Output(
            output_path(results, "stats", f"{name}.csv"),
            csv_bytes(frame, index=False, float_format=f"%.{SIGNIFICANT}g"),
        )
        for name, frame in (("consistency", results.consistency), ("n_curve", results.n_curve))
    ]
    if options.plots and len(results.n_curve):
        png = n_curve_plot(results.n_curve)
        outputs.append(Output(output_path(results, "plots", "n_curve.png"), png))
    return outputs


def draws_outputs(results: StudyResults, options: OutputOptions) -> list[Output]:
    """The draws a study that spends them by need used per criterion, against the fixed n
    (:meth:`StudyResults.draws_frame`); none for a study of a fixed n."""
    frame = results.draws_frame()
    if frame is None:
        return []
    return [
        Output(
            output_path(results, "stats", "draws.csv"),
            csv_bytes(frame, index=False, float_format=f"%.{SIGNIFICANT}g"),
        )
    ]


def bias_outputs(results: StudyResults, options: OutputOptions) -> list[Output]:
    """What the judge may be reacting to (:meth:`StudyResults.bias`); none for a panel (each
    judge's own outputs have theirs: a pooled score is no one judge's habit)."""
    if isinstance(results, PanelStudyResults):
        return []
    frame = results.bias()
    return [
        Output(
            output_path(results, "stats", "bias.csv"),
            csv_bytes(frame, index=False, float_format=f"%.{SIGNIFICANT}g"),
        )
    ]


def plot_paths(results: StudyResults) -> dict[str, Path]:
    """Where the box plots go, per criterion (and the composite when it can be computed)."""
    names = [c.name for c in results.study.criteria]
    if results.has_composite:
        names.append(COMPOSITE)
    return {name: output_path(results, "plots", f"{name}.png") for name in names}


def plot_outputs(results: StudyResults, options: OutputOptions) -> list[Output]:
    """Box plots per criterion and the composite (needs matplotlib)."""
    if not options.plots:
        return []
    from .plots import box_plot

    paths = plot_paths(results)
    outputs = []
    for criterion in results.study.criteria:
        scale = criterion.config.scale
        png = box_plot(
            results.table(criterion.name, average=False),
            f"{criterion.config.display_name} ({criterion.name})",
            f"weighted score ({scale.lo:g}-{scale.hi:g})",
            ylim=(scale.lo, scale.hi),
        )
        outputs.append(Output(paths[criterion.name], png))
    if COMPOSITE in paths:
        png = box_plot(
            results.composite(average=False), "Composite score", "score (0-100)", ylim=(0, 100)
        )
        outputs.append(Output(paths[COMPOSITE], png))
    return outputs


def report_outputs(results: StudyResults, options: OutputOptions) -> list[Output]:
    """The Markdown report."""
    study = results.study
    has_conditions = results.compares_conditions
    text = markdown_report(
        study,
        results.tallies,
        {c.name: results.table(c.name) for c in study.criteria},
        results.composite() if results.has_composite else None,
        results.comparisons(options.test) if has_conditions else [],
        output_path(results, "stats", "paired.csv").name if results.paired_design else None,
        plot_paths(results) if options.plots else {},
        results.simulated,
        invalid=results.invalid_shares(),
        invalid_warnings=[d.warning() for d in results.share_differences()],
        agreement=options.agreement,
        agreement_file=f"stats/{output_path(results, 'stats', 'agreement.csv').name}",
        prompt_cache=options.prompt_cache,
    )
    other = _other_test(results) if has_conditions and options.test is None else None
    if other is not None:
        note = (
            f"The {other} test, for independent groups. `[stats] test` names no test, and the "
            f"summary above uses the {results.summary_test()} test because the same groups "
            "appear in both conditions; name one in `[stats] test` to make it the summary's."
        )
        section = comparison_section(results.comparisons(other), results.config.stats.alpha, note)
        text += "\n".join(section) + "\n"
    if not study.criteria:
        # Every criterion is pairwise: the report's head, their section and the position
        # check; the rating sections would be empty.
        text = text.split("\n## ", 1)[0].rstrip("\n") + "\n" + pairwise_section(results)
        if not isinstance(results, PanelStudyResults):
            csv_name = f"stats/{output_path(results, 'stats', 'bias.csv').name}"
            text += bias_section(results.reactions, csv_name)
        return [Output(output_path(results, "", "report.md"), text.encode())]
    text += pairwise_section(results)
    plot = f"plots/{results.prefix}_n_curve.png" if options.plots else None
    if not isinstance(results, PanelStudyResults):
        # The long table's two columns the section reads, not the whole frame.
        errors = standard_errors(results.columns)
        text += trust_section(
            errors, results.consistency, results.n_curve, results.config.sampling.mode, plot
        )
        text += draws_markdown(
            results.draws_frame(),
            results.config.sampling,
            f"stats/{output_path(results, 'stats', 'draws.csv').name}",
        )
        text += human_scale_section(results)
        csv_name = f"stats/{output_path(results, 'stats', 'bias.csv').name}"
        text += bias_section(results.reactions, csv_name)
    else:
        # A one-judge report names its judge on its third line; the panel's names them all.
        lines = text.split("\n")
        if len(lines) > 2 and lines[2].startswith("Judge: "):
            lines[2] = panel_judges_line(results)
        text = "\n".join(lines) + panel_section(results, results.prefix)
    return [Output(output_path(results, "", "report.md"), text.encode())]


def pairwise_kind(results: StudyResults, options: OutputOptions) -> list[Output]:
    """The pairwise criteria's tables (see :mod:`.pairwise`)."""
    return pairwise_outputs(results)


def html_outputs(results: StudyResults, options: OutputOptions) -> list[Output]:
    """The self-contained HTML report (needs matplotlib and Jinja2; see :mod:`.html`)."""
    if not options.html:
        return []
    from .html import render_html_report

    page = render_html_report(
        results,
        test=options.test,
        human=options.human,
        agreement=options.agreement,
        prompt_cache=options.prompt_cache,
    )
    return [Output(output_path(results, "", "report.html"), page.encode("utf-8"))]


Kind = Callable[["StudyResults", OutputOptions], list[Output]]

KINDS: dict[str, Kind] = {
    "scores": score_outputs,
    "average": average_outputs,
    "tests": test_outputs,
    "trust": trust_outputs,
    "draws": draws_outputs,
    "pairwise": pairwise_kind,
    "human": lambda r, o: human_outputs(r, output_path(r, "stats", "human_scale.csv")),
    "bias": bias_outputs,
    "plots": plot_outputs,
    "report": report_outputs,
    "html": html_outputs,
}


# --- the front door ----------------------------------------------------------------------------


def write_outputs(
    results: StudyResults | PanelResults,
    kinds: Sequence[str] | None = None,
    *,
    test: str | None = None,
    plots: bool = False,
    html: bool = False,
    human: HumanComparison | None = None,
    agreement: pd.DataFrame | None = None,
    prompt_cache: PromptCacheShare | None = None,
) -> list[Path]:
    """Render the outputs of ``kinds`` and write them.

    ``kinds`` None writes everything ``geval-async report`` writes: every kind, except the
    composite when ``--criteria`` left out some of its criteria (asking for "average" then
    is an error that names them). Plots and the HTML report come when ``plots`` / ``html``
    ask for them; ``human`` adds judge-vs-human scatter plots to the HTML report, and
    ``agreement`` (a panel's :func:`~geval_async.scoring.panel.agreement.agreement_frame`) the
    agreement between its judges to both reports; ``prompt_cache`` the cached share of the
    prompt tokens to the Markdown report.

    A panel's results (:class:`~.panel_results.PanelResults`, or its ``panel``) write every
    judge's outputs (``<prefix>-judge-<name>_...``) and the panel's (``<prefix>_...``, with
    ``stats/<prefix>_agreement.csv`` among the scores), all rendered before any is written.

    Raises:
        ConfigError: the cache holds no answer for the study, or far fewer than the outputs
            already on disk came from (nothing is written); a kind is unknown; a file cannot
            be written.
    """
    if isinstance(results, PanelResults):
        results = results.panel
    if kinds is None:
        kinds = [k for k in KINDS if k != "average" or results.has_composite]
        if ppi_missing():  # the report says how to install it, in its human-scale section
            kinds.remove("human")
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        raise ConfigError(f"unknown output kind {unknown[0]!r} (known: {', '.join(KINDS)})")
    members = results.members if isinstance(results, PanelStudyResults) else {}
    for name, member in members.items():
        try:
            check_not_emptier(member, output_path(member, "scores", "long.csv"))
        except ConfigError as exc:
            # Its study is named by the panel's file: say which judge it is.
            raise ConfigError(f"judge {name!r} of the panel: {exc}") from exc
    check_not_emptier(results, output_path(results, "scores", "long.csv"))
    studies = [*members.values(), results]
    if agreement is None and isinstance(results, PanelStudyResults):
        agreement = results.agreement  # the panel's own, to its reports
    options = OutputOptions(
        test=test,
        plots=plots,
        html=html,
        human=human,
        agreement=agreement,
        prompt_cache=prompt_cache,
    )
    # Judge-vs-human pairs and the agreement are the caller's, of the results it passed: the
    # panel's, not a judge's.
    alone = OutputOptions(test=test, plots=plots, html=html)
    outputs = [
        output
        for study in studies
        for kind in kinds
        for output in KINDS[kind](study, options if study is results else alone)
    ]
    return write_files(outputs)


def write_html_report(
    results: StudyResults | PanelResults,
    *,
    test: StatTest | str | None = None,
    human: HumanComparison | None = None,
    agreement: pd.DataFrame | None = None,
) -> Path:
    """Write the HTML report alone (``<output>/<prefix>_report.html``); returns its path.

    Args:
        results: the scored study (:func:`geval_async.load_results`).
        test: override the configured test ("welch", "paired-t", "wilcoxon").
        human: judge-vs-human pairs and correlations, for the scatter plots.
        agreement: a panel's agreement between its judges, for its section.
    """
    # A panel's writes every judge's page too; the last one is the panel's own.
    *_, path = write_outputs(
        results, ["html"], test=test, html=True, human=human, agreement=agreement
    )
    return path
