"""The scoring-stage commands: ``score``, ``average``, ``ttest``, ``report`` (and ``demo``).

All of them read the cache only; with the judge server gone (or no network at all) they run to
completion. Items the cache lacks are reported with a count and left out; ``--strict`` refuses
to score an incomplete run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..options import StatTest, words
from .overrides import study_config
from .summary import SIMULATED_NOTE

if TYPE_CHECKING:
    from ..scoring.results import StudyResults

# pandas and scipy load inside the commands, not at import: `geval-async run` never needs them.

# Everything that decides cache keys (model, n, mode) or what is read (cache, criteria, limit).
_OVERRIDES = ("cache", "output", "criteria", "limit", "model", "n", "mode", "shard")


def add_score_commands(
    commands: Any, study_arguments: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Register the scoring commands on the CLI's subparsers."""
    specs = [
        ("score", "weighted scores per record, per-criterion tables and raw exports", cmd_score),
        ("average", "the 100-point composite per group and condition", cmd_average),
        ("ttest", "compare the two conditions on every criterion (+ BH FDR)", cmd_ttest),
        ("report", "score, average, ttest and a Markdown report", cmd_report),
    ]
    for name, help_text, handler in specs:
        parser = commands.add_parser(name, help=help_text)
        study_arguments(parser)
        parser.add_argument(
            "--strict", action="store_true", help="refuse to score when any item has no answer"
        )
        if name in ("ttest", "report"):
            parser.add_argument(
                "--plots", action="store_true", help="also render box plots (needs matplotlib)"
            )
            parser.add_argument("--test", choices=words(StatTest), help="override [stats] test")
        parser.set_defaults(handler=handler)


def _results(args: argparse.Namespace) -> StudyResults:
    from ..scoring.results import load_results
    from .answers import warn

    # --strict: a load warning or a missing item is an error (raised by load_results).
    results = load_results(study_config(args, _OVERRIDES), strict=args.strict)
    warn(results.warnings, strict=False)
    _coverage_note(results)
    return results


def _coverage_note(results: StudyResults) -> None:
    if results.missing:
        print(
            f"note: {results.missing} of {len(results.scores)} items have no answer in the "
            "cache and are left out (`geval-async status` shows which criteria)"
        )
    from .answers import invalid_lines

    for line in invalid_lines(results):
        print(line)
    if results.corrupted:
        print(f"note: {results.corrupted} corrupted cache entries count as missing")
    if results.simulated:
        print(SIMULATED_NOTE)


def write_scores(results: StudyResults) -> list[Path]:
    from ..scoring.report import output_path, write_csv, write_raw

    study = results.study
    paths = [
        write_csv(output_path(study, "scores", f"{c.name}.csv"), results.table(c.name))
        for c in study.criteria
    ]
    paths.append(write_csv(output_path(study, "scores", "long.csv"), results.long, index=False))
    paths += write_raw(study, results.scores)
    return paths


def write_average(results: StudyResults) -> Path:
    from ..scoring.report import output_path, write_csv

    return write_csv(output_path(results.study, "scores", "average.csv"), results.composite())


def write_tests(results: StudyResults, test: str | None) -> list[Path]:
    from ..scoring.report import output_path, write_csv
    from ..scoring.stats import comparisons_frame, format_table

    study = results.study
    comparisons = results.comparisons(test)
    print(format_table(comparisons))
    paths = [
        write_csv(
            output_path(study, "stats", "ttest.csv"), comparisons_frame(comparisons), index=False
        )
    ]
    if results.paired_design:
        both = results.comparisons(StatTest.PAIRED_T) + results.comparisons(StatTest.WILCOXON)
        paths.append(
            write_csv(
                output_path(study, "stats", "paired.csv"), comparisons_frame(both), index=False
            )
        )
        if (test or study.config.stats.test) == StatTest.WELCH:
            print(
                "the same groups appear in both conditions: the paired t-test and Wilcoxon "
                f"test ({paths[-1].name}) match this design"
            )
    return paths


def write_plots(results: StudyResults) -> dict[str, Path]:
    from ..scoring.plots import box_plot
    from ..scoring.report import output_path
    from ..scoring.tables import COMPOSITE

    study = results.study
    plots = {}
    for criterion in study.criteria:
        scale = criterion.config.scale
        plots[criterion.name] = box_plot(
            results.table(criterion.name, average=False),
            f"{criterion.config.display_name} ({criterion.name})",
            f"weighted score ({scale.lo:g}-{scale.hi:g})",
            output_path(study, "plots", f"{criterion.name}.png"),
            ylim=(scale.lo, scale.hi),
        )
    if set(study.config.composite.criteria) <= {c.name for c in study.criteria}:
        plots[COMPOSITE] = box_plot(
            results.composite(average=False),
            "Composite score",
            "score (0-100)",
            output_path(study, "plots", f"{COMPOSITE}.png"),
            ylim=(0, 100),
        )
    return plots


def _print_paths(paths: list[Path]) -> None:
    for path in paths:
        print(f"wrote {path}")


def cmd_score(args: argparse.Namespace) -> int:
    results = _results(args)
    _print_paths(write_scores(results))
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    results = _results(args)
    print(results.composite().round(2).to_string())
    _print_paths([write_average(results)])
    return 0


def cmd_ttest(args: argparse.Namespace) -> int:
    results = _results(args)
    paths = write_tests(results, args.test)
    if args.plots:
        paths += list(write_plots(results).values())
    _print_paths(paths)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    results = _results(args)
    paths = write_report(results, test=args.test, plots=args.plots)
    _print_paths(paths)
    return 0


def write_report(
    results: StudyResults, *, test: str | None = None, plots: bool = False
) -> list[Path]:
    """Every output file plus the Markdown report; returns the paths written."""
    from ..scoring.report import markdown_report, write_atomic

    study = results.study
    paths = write_scores(results)
    paths.append(write_average(results))
    has_conditions = len(study.config.stats.conditions) == 2
    comparisons = results.comparisons(test) if has_conditions else []
    if has_conditions:
        paths += write_tests(results, test)
    plot_paths = write_plots(results) if plots else {}
    paths += plot_paths.values()
    tables = {c.name: results.table(c.name) for c in study.criteria}
    text = markdown_report(
        study,
        results.tallies,
        tables,
        results.composite(),
        comparisons,
        results.paired_design,
        plot_paths,
        results.simulated,
        invalid=results.invalid_shares(),
        invalid_warnings=[d.warning() for d in results.share_differences()],
    )
    paths.append(
        write_atomic(
            study.config.output.path / f"{study.config.output.prefix}_report.md", text.encode()
        )
    )
    return paths
