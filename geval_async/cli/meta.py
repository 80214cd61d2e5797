"""The ``meta`` command: how closely do judges' scores follow the human scores in the records?

``geval-async meta CONFIG [--judge-file NAME=PATH ...] [--no-cache] [--bootstrap N] [--seed S]
[--confidence C]`` correlates this tool's judge (scored from the cache, no network; when the
config has a ``[judge]``) and the judge files (``[meta.judges]`` and ``--judge-file``) with the
fields ``[meta] human`` names, at summary, system and dataset level (see
:mod:`geval_async.meta`), prints one table, the notes and the warnings, and writes
``meta/<prefix>_meta.csv`` and ``meta/<prefix>_meta.json`` under the output folder. On a panel
config (``[[judges]]``) the table has each judge and the panel (``panel``: the judges' record
scores pooled by ``[panel]``), followed by the panel beside the best single judge per criterion;
``--judge NAME`` meta-evaluates that judge alone, as its one-judge study.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..study.meta_study import META_OVERRIDES, read_meta_study
from .overrides import SCORE_FLAGS, add_judge_flag


def add_meta_command(
    commands: Any, study_arguments: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Register ``meta`` on the CLI's subparsers."""
    parser = commands.add_parser(
        "meta",
        help="correlate judge scores with the human scores in the records",
        description="Correlate the judge's weighted scores (from the cache) and/or other "
        "judges' scores (files) with the human scores named by [meta] human: "
        "summary level (per document, averaged, with a bootstrap CI), system level "
        "and dataset level; Spearman, Kendall tau-b and Pearson. On a panel config "
        "([[judges]]): each judge and the panel (its pooled record scores) side by side.",
    )
    study_arguments(parser)
    parser.add_argument(
        "--judge-file",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="another judge's scores: CSV or JSONL, one row per record, the id column named "
        "like [data] id and a column per criterion (repeat for several judges; NAME "
        "defaults to the file name)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="leave out this tool's own judge: only the judge files are evaluated, and the "
        "config needs no [judge] or prompt files (the default when it has no [judge])",
    )
    bootstrap = parser.add_argument_group("summary-level intervals (override [meta])")
    bootstrap.add_argument(
        "--bootstrap", type=int, metavar="N", help="resamples of the documents (0: no intervals)"
    )
    bootstrap.add_argument("--seed", type=int, help="seed of the resampling")
    bootstrap.add_argument(
        "--confidence", type=float, metavar="C", help="interval level, e.g. 0.95"
    )
    add_judge_flag(parser, without="default: every judge and the panel")
    parser.set_defaults(handler=cmd_meta)


def parse_judge_files(values: Sequence[str]) -> dict[str, Path]:
    """``NAME=PATH`` (or a bare ``PATH``, named after its file) -> {name: path}."""
    files: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep:
            name, path = Path(value).stem, value
        name, path = name.strip(), path.strip()
        if not name or not path:
            raise ConfigError(
                f"--judge-file {value!r}: give NAME=PATH, e.g. --judge-file gpt4=judge_scores.csv"
            )
        if name in files:
            raise ConfigError(f"--judge-file: the name {name!r} is used twice")
        files[name] = Path(path)
    return files


def cmd_meta(args: argparse.Namespace) -> int:
    from ..meta.evaluate import meta_evaluate, write_meta  # pandas/scipy: only when meta runs

    names = (*SCORE_FLAGS, *META_OVERRIDES, "judge")  # --judge NAME: that judge's alone
    flags = {name: getattr(args, name, None) for name in names}
    use_cache = False if args.no_cache else None
    study = read_meta_study(args.config, flags, use_cache=use_cache, flags=True)
    evaluation = meta_evaluate(study, parse_judge_files(args.judge_file), use_cache=use_cache)
    meta = evaluation.config.meta
    print(evaluation.table())
    interval = (
        f"[CI]: {meta.confidence:.0%} percentile bootstrap over documents "
        f"({meta.bootstrap} resamples, seed {meta.seed})"
        if meta.bootstrap
        else "no confidence intervals ([meta] bootstrap = 0)"
    )
    print(f"n: documents averaged (summary), systems (system), summaries (dataset); {interval}")
    for note in evaluation.notes:
        print(f"note: {note}")
    for warning in evaluation.warnings:
        print(f"warning: {warning}")
    for name, file in evaluation.files.items():
        print(f"judge file {name}: {file['path']} (sha256 {file['sha256']})")
    lead = evaluation.panel_lead()
    if lead:
        levels = {c.level for c in evaluation.correlations}
        level = "summary" if "summary" in levels else "dataset"
        print(f"panel vs the best single judge ({level}-level Spearman):")
        for line in lead:
            print(f"  {line}")
    if evaluation.simulated:
        print("note: the simulated judge's ratings are synthetic: its correlations mean nothing")
    for path in write_meta(evaluation):
        print(f"wrote {path}")
    return 0
