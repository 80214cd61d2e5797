"""``geval-async steps CONFIG [--judge NAME] [--freeze]``: each criterion's evaluation steps
and their origin (on a panel config, one judge's: ``--judge NAME``, by default the first).

Reads the cache only (never the network): generated steps are printed with the key and time
of their cache entry, written ones with the config or prompt file they are in. ``--freeze``
writes the prompt files of the criteria given by definition beside the config
(:mod:`geval_async.study.freeze`) and prints the config lines to change, without rewriting it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..study.evaluation_steps import steps_origin
from ..study.plan import Study
from .overrides import add_judge_flag

__all__ = ["add_steps_command"]


def add_steps_command(
    commands: Any, study_arguments: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Register ``steps`` on the CLI's subparsers."""
    parser = commands.add_parser(
        "steps", help="print each criterion's evaluation steps and where they came from"
    )
    study_arguments(parser)
    add_judge_flag(parser, without="default: the first judge")
    parser.add_argument(
        "--freeze",
        action="store_true",
        help="write the prompt of each criterion given by definition, steps included, into "
        "a prompt file beside the config (the config itself is not rewritten)",
    )
    parser.set_defaults(handler=cmd_steps)


def cmd_steps(args: argparse.Namespace) -> int:
    from ..judging.store.read_model import stored_study
    from ..study.freeze import freeze_steps
    from ..study.prepare import prepare_study
    from .overrides import load_study

    config = load_study(args)
    if config.is_panel:  # a panel's generated steps are each judge's own: show one judge's
        first = config.judge_names[0]
        print(f"judge {first} (the panel's first; `--judge NAME` shows another's steps)")
        config = config.for_judge(first)
    study = stored_study(prepare_study(config))  # the cache read as the scoring stage reads it
    if args.freeze:
        return _freeze(study, freeze_steps(study))
    for planned in study.criteria:
        print(
            f"{planned.name} ({planned.config.display_name}): "
            + steps_origin(planned, config.judge.model)
        )
        text = planned.steps.text if planned.steps is not None else None
        for line in (text or "").splitlines():
            print(f"  {line}")
    if study.pending_steps:
        print(
            f"run `geval-async run {config.source}` to generate the missing steps (one "
            "request per criterion)"
        )
    return 0


def _freeze(study: Study, frozen: list[Any]) -> int:
    source = study.config.source
    if not frozen:
        print(f"{source}: no criterion is given by definition: nothing to freeze")
        return 0
    for prompt in frozen:
        verb = "wrote" if prompt.written else "already frozen:"
        print(f"{verb} {prompt.path} (criterion {prompt.criterion!r})")
    print(
        f"{source} is not rewritten (it is yours, comments and all); to run the study from "
        "the frozen prompts, with the same requests and so the cached answers, change:"
    )
    for prompt in frozen:
        print(f"  {prompt.config_change(source)}")
    return 0
