"""The study a command works on: its config file, patched by the command's flags.

The flags go through :func:`~geval_async.study.overrides.read_overrides`, the reader the file
goes through, so a bad ``--n`` fails like a bad ``n =`` in the file, with the flag named.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from ..study.config import EvalConfig, load_config
from ..study.judge_choice import choose_judges
from ..study.overrides import OVERRIDES

__all__ = [
    "ANSWER_FLAGS",
    "SCORE_FLAGS",
    "STUDY_FLAGS",
    "add_judge_flag",
    "add_study_arguments",
    "judge_key",
    "load_study",
    "study_config",
]

# The flags of the study commands (run, status, score, ...) that patch the config: every
# override (study.overrides.OVERRIDES, the one list).
STUDY_FLAGS = tuple(OVERRIDES)
# The flags of the commands that read stored answers (answers, score, meta): every setting
# that is part of a cache key (a study run with --max-tokens 2000 is read with it), and which
# part of the study is read...
ANSWER_FLAGS = tuple(name for name, override in OVERRIDES.items() if override.answers)
# ...and of those that write outputs from them (score, meta): where, and which shard.
SCORE_FLAGS = tuple(
    name for name, override in OVERRIDES.items() if override.answers or override.outputs
)


def add_study_arguments(parser: argparse.ArgumentParser) -> None:
    """The config argument and the override flags every study command takes."""
    parser.add_argument("config", help="the study's TOML config file")
    group = parser.add_argument_group("overrides (take precedence over the config)")
    for name, override in OVERRIDES.items():
        if not override.every_command:
            continue
        group.add_argument(
            f"--{name.replace('_', '-')}",
            type=override.kind,
            choices=override.choices or None,
            metavar=override.metavar,
            help=override.help,
        )


def add_judge_flag(
    parser: argparse.ArgumentParser, *, without: str = "default: every judge"
) -> None:
    """``--judge NAME``, one judge of a panel config, on every command that takes it (``run``,
    ``status``, ``steps``, the ``batch`` steps); ``without``: what the command does without it."""
    parser.add_argument(
        "--judge",
        metavar="NAME",
        help=f"on a panel config ([[judges]]): only the judge called NAME ({without}); "
        "the overrides then apply to it, --model and --base-url included",
    )


def study_config(args: argparse.Namespace, names: Iterable[str]) -> EvalConfig:
    """``args.config`` loaded, with the flags among ``names`` that were given applied (on a
    panel, to the ``--judge`` or to every judge: :mod:`geval_async.study.judge_choice`)."""
    flags = {name: getattr(args, name, None) for name in names}
    judge = getattr(args, "judge", None)
    return choose_judges(load_config(args.config), flags, judge=judge, flags=True)


def load_study(args: argparse.Namespace) -> EvalConfig:
    """The study config of a study command: ``args.config`` with its :data:`STUDY_FLAGS`,
    read once a command (the check for a panel and the command itself both ask for it, and
    a config of 10,000 criteria takes a second to read)."""
    loaded: EvalConfig | None = getattr(args, "loaded_study", None)
    if loaded is None:
        loaded = args.loaded_study = study_config(args, STUDY_FLAGS)
    return loaded


def judge_key(config: EvalConfig) -> str | None:
    """The judge's API key; an error when a remote judge has none."""
    return config.required_api_key()
