"""The scoring-stage commands: ``score``, ``average``, ``ttest``, ``report``, ``calibrate`` (and
``demo``).

All of them read the cache only; with the judge server gone (or no network at all) they run to
completion. Items the cache lacks are reported with a count and left out; ``--strict`` refuses
to score an incomplete run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..options import StatTest, words
from ..study.overrides import OVERRIDES
from .overrides import SCORE_FLAGS, study_config
from .summary import SIMULATED_NOTE, table

if TYPE_CHECKING:
    from ..scoring.scores.results import StudyResults

# pandas and scipy load inside the commands, not at import: `geval-async run` never needs them.


def add_score_commands(
    commands: Any, study_arguments: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Register the scoring commands on the CLI's subparsers."""
    specs = [
        ("score", "weighted scores per record, per-criterion tables and raw exports", cmd_score),
        ("average", "the 100-point composite per group and condition", cmd_average),
        ("ttest", "compare the two conditions on every criterion (+ BH FDR)", cmd_ttest),
        ("report", "score, average, ttest and a Markdown (or --html) report", cmd_report),
        (
            "calibrate",
            "from the records' human scores: calibrated scores with intervals, and the means "
            "and comparison on the human scale",
            cmd_calibrate,
        ),
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
        if name in ("score", "report", "calibrate"):
            for flag in ("labelled", "coverage"):
                override = OVERRIDES[flag]
                parser.add_argument(
                    f"--{flag}", type=override.kind, metavar=override.metavar, help=override.help
                )
        if name == "report":
            parser.add_argument(
                "--html",
                action="store_true",
                help="also write <prefix>_report.html: one offline page with figures and every "
                "record's answers (needs matplotlib)",
            )
        parser.set_defaults(handler=handler)


def _results(args: argparse.Namespace) -> StudyResults:
    from ..api import load_results
    from .answers import warn

    config = study_config(args, SCORE_FLAGS)
    results = load_results(config, strict=args.strict)  # a panel's: pooled, with its judges
    warn(results.warnings, strict=False)
    shares = results.invalid_shares()  # from the answers' reasons, not their texts
    if len(shares) and shares["samples"].sum() and (shares["invalid"] == shares["samples"]).all():
        # Not "the cache holds no answer": it holds answers, none with a rating to read.
        totals = shares.iloc[:, 5:].sum()
        totals = totals[totals > 0].sort_values(ascending=False, kind="stable")
        counts = ", ".join(f"{n} x {why}" for why, n in totals.items())
        raise ConfigError(
            f"every answer in the cache {config.cache_path} is invalid ({counts}): nothing "
            f"was written; `geval-async answers {config.source}` shows them"
        )
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


def _panel_note(results: StudyResults) -> None:
    """A panel's judges and the panel, one line each: how many items each scored."""
    from ..scoring.panel.results import PanelStudyResults

    if not isinstance(results, PanelStudyResults):
        return
    rows: list[list[object]] = []
    for name, member in results.members.items():
        scored = sum(t.scored for t in member.tallies.values())
        rows.append([name, member.config.judge.model, f"{scored}/{len(member.scores)}", ""])
    flagged = results.flagged()
    scored = int(flagged["scored"].sum())
    rows.append(
        ["panel", results.config.panel.pool, f"{scored}/{len(results.scores)}",
         str(int(flagged["flagged"].sum()))]
    )  # fmt: skip
    print(table(["judge", "model / pool", "scored", "flagged"], rows))
    if int(flagged["flagged"].sum()):
        print(
            "note: flagged items were scored by only some judges (the others could not score "
            "them): `judges_missing` in the panel's long table names them"
        )


def _print_paths(paths: list[Path]) -> None:
    for path in paths:
        print(f"wrote {path}")


def _subset_note(results: StudyResults) -> None:
    if results.variant:
        print(f"note: --criteria / --limit: outputs are named with {results.variant!r}")
    if results.composite_missing and len(results.config.stats.conditions) == 2:
        print(
            f"note: the composite is left out (--criteria leaves out "
            f"{', '.join(results.composite_missing)}); the FDR correction covers the "
            f"{len(results.config.criteria)} criteria scored"
        )


def print_tests(results: StudyResults, test: str | None) -> None:
    from ..scoring.output.pairwise import pairwise_table
    from ..scoring.stats.comparisons import format_table

    if results.orders:
        print(pairwise_table(results.pairwise()))
    if not results.compares_conditions:
        return
    print(format_table(results.comparisons(test)))
    summary = results.summary_test(test)
    stated = results.config.stats.stated_test
    if test is None and summary != stated:
        print(
            f"the same groups appear in both conditions: the summary uses the {summary} test "
            f"({stated}, for independent groups, is in the report too; [stats] test names "
            "one to choose)"
        )
    elif results.paired_design and summary == "welch":
        named = " (welch: as [stats] test names it)" if test is None else ""
        print(
            f"the same groups appear in both conditions{named}: the paired t-test and Wilcoxon "
            "test (stats/..._paired.csv) match this design"
        )


def _two_conditions(results: StudyResults) -> None:
    """``ttest`` without two [stats] conditions would print nothing and write nothing."""
    from ..errors import ConfigError

    config = results.config
    if len(config.stats.conditions) == 2:
        return
    field = config.data.condition_field
    if field is None:
        hint = "set [data] condition (the record field naming each record's condition), then "
        hint += '[stats] conditions = ["A", "B"], the two to compare'
    else:
        seen = sorted({str(c) for c in results.study.records.conditions})
        hint = f"add [stats] conditions = [...], two values of the field {field!r}: "
        hint += ", ".join(seen)
    raise ConfigError(f"{config.source}: no two conditions to compare: {hint}")


# Every command writes all its files before it prints anything long: a reader that closes
# the pipe early (`geval-async score ... | head`) never costs the outputs.


def cmd_score(args: argparse.Namespace) -> int:
    from ..scoring.output.writer import write_outputs

    results = _results(args)
    paths = write_outputs(results, ["scores", "pairwise"])
    _coverage_note(results)
    _panel_note(results)
    _subset_note(results)
    _print_paths(paths)
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from ..scoring.output.writer import write_outputs

    results = _results(args)
    paths = write_outputs(results, ["average"])
    _coverage_note(results)
    print(results.composite().round(2).to_string())
    _print_paths(paths)
    return 0


def cmd_ttest(args: argparse.Namespace) -> int:
    from ..scoring.output.writer import write_outputs

    results = _results(args)
    _two_conditions(results)
    kinds = ["tests", "plots"] if args.plots else ["tests"]
    paths = write_outputs(results, kinds, test=args.test, plots=args.plots)
    return _end_with_tests(results, args.test, paths)


def cmd_report(args: argparse.Namespace) -> int:
    from ..scoring.output.writer import write_outputs

    results = _results(args)
    human = None
    if args.html:
        from ..api import human_comparison

        human = human_comparison(results)
    from ..judging.run.budget import study_prompt_cache

    config = results.config
    paths = write_outputs(
        results,
        test=args.test,
        plots=args.plots,
        html=args.html,
        human=human,
        prompt_cache=study_prompt_cache(config.cache_path, config),
    )
    return _end_with_tests(results, args.test, paths)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ..scoring.output.human_scale_report import (
        ESTIMATE_HEADER,
        SUMMARY_HEADER,
        estimate_rows,
        summary_rows,
    )
    from ..scoring.output.writer import write_outputs

    results = _results(args)
    config = results.config
    if results.labelled is None:
        raise ConfigError(
            f"{config.source}: no human scores to calibrate with: name each criterion's record "
            'field in [meta] human, e.g. human = { coh = "scores.coherence" }'
        )
    paths = write_outputs(results, ["scores", "human"])
    _coverage_note(results)
    _subset_note(results)
    print(table(SUMMARY_HEADER, [list(r) for r in summary_rows(results.calibration_summary)]))
    for criterion, rows in estimate_rows(results.human_scale).items():
        print(f"\n{criterion}: on the human scale, at {config.meta.coverage:.0%}")
        print(table(ESTIMATE_HEADER, [list(r) for r in rows]))
    _print_paths(paths)
    return 0


def _end_with_tests(results: StudyResults, test: str | None, paths: list[Path]) -> int:
    """How ``ttest`` and ``report`` end: the notes on what was scored, the tests, the files."""
    _coverage_note(results)
    _panel_note(results)
    _subset_note(results)
    print_tests(results, test)
    _print_paths(paths)
    return 0
