"""The ``meta`` command: how closely do judges' scores follow the human scores in the records?

``geval-async meta CONFIG [--judge-file NAME=PATH ...] [--no-cache]`` correlates this tool's
judge (scored from the cache, no network) and any judge files with the fields ``[meta] human``
names, at summary, system and dataset level (see :mod:`geval_async.meta`), prints one table and
writes ``meta/<prefix>_meta.csv`` and ``meta/<prefix>_meta.json`` under the output folder.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .overrides import study_config

# Overrides that decide which cache entries hold the judge's answers, plus where things are.
_OVERRIDES = ("cache", "output", "criteria", "limit", "model", "n", "mode", "shard")


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
        "and dataset level; Spearman, Kendall tau-b and Pearson.",
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
        help="leave out this tool's own judge (needs --judge-file)",
    )
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

    evaluation = meta_evaluate(
        study_config(args, _OVERRIDES),
        parse_judge_files(args.judge_file),
        use_cache=not args.no_cache,
    )
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
    if any(name.endswith("(simulated)") for name in evaluation.judges):
        print("note: the simulated judge's ratings are synthetic: its correlations mean nothing")
    for path in write_meta(evaluation):
        print(f"wrote {path}")
    return 0
