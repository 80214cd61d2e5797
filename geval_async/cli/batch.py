"""``geval-async run CONFIG --batch`` and ``geval-async batch submit|status|collect|cancel|
export|import CONFIG [FILE]``: the judge stage through a Batch API. Parsing and printing only;
the work is in :mod:`geval_async.judging.batch`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ..errors import RunStopped
from ..judging.batch.control import BatchControl
from ..judging.batch.engine_files import export_inputs, import_outputs
from ..judging.batch.rounds import run_batches
from ..judging.batch.session import batch_session
from ..judging.batch.store import Stored
from ..judging.run.budget import run_budget
from ..judging.store.cache import JudgeCache
from ..judging.store.claims import Claims
from ..study.plan import Study
from ..study.prepare import prepare_study
from ..study.pricing import Budget
from .batch_report import (
    EXIT_INCOMPLETE,
    EXIT_OK,
    batch_table,
    coverage_exit,
    progress_printer,
    queue_line,
    report_collected,
    report_stored,
    report_submitted,
    report_too_large,
    say,
)
from .overrides import add_judge_flag, judge_key, load_study
from .panel import one_judge_only
from .summary import coverage_table

EXIT_INTERRUPTED = 130


def add_batch_flags(parser: argparse.ArgumentParser) -> None:
    """``run``'s flags for batch jobs."""
    parser.add_argument(
        "--batch",
        action="store_true",
        help="judge through the Batch API (half price, answers within 24 h): submit, wait, "
        "collect; interrupting loses nothing (run again to attach)",
    )
    parser.add_argument(
        "--poll",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="with --batch: seconds between status checks (default 30)",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def add_batch_commands(commands: Any, study_arguments: Callable[[Any], None]) -> None:
    """Register ``geval-async batch ...``."""
    batch = commands.add_parser("batch", help="batch jobs: submit, status, collect, cancel, ...")
    steps = batch.add_subparsers(dest="step", required=True, metavar="STEP")
    helps = {
        "submit": "submit every request the cache lacks as batch jobs, and return",
        "status": "the live batch jobs and the items in them (attaches to interrupted submits)",
        "collect": "store the answers of the batch jobs that have ended",
        "cancel": "cancel the live batch jobs (answers they already have are collected)",
        "export": "write the input JSONL of every request the cache lacks to FILE; send nothing",
        "import": "store an output JSONL produced elsewhere (vLLM run-batch, another provider)",
    }
    for step, text in helps.items():
        parser = steps.add_parser(step, help=text)
        study_arguments(parser)
        if step in ("export", "import"):
            parser.add_argument("file", metavar="FILE", help="the JSONL file")
        if step == "submit":
            parser.add_argument(
                "--max-cost",
                type=float,
                metavar="USD",
                help="cap the study's estimated spend, across runs and submits, at USD "
                "(at the batch price, see [prices])",
            )
        add_judge_flag(parser, without="needed: one judge's batch at a time")
        parser.set_defaults(handler=one_judge_only(f"batch {step}", _handlers()[step]))


def _handlers() -> dict[str, Callable[[argparse.Namespace], int]]:
    return {
        "submit": cmd_submit,
        "status": cmd_status,
        "collect": cmd_collect,
        "cancel": cmd_cancel,
        "export": cmd_export,
        "import": cmd_import,
    }


# --- the commands that talk to the provider ---------------------------------------------------


def _with_control(
    args: argparse.Namespace | None,
    work: Callable[[BatchControl, Claims], Coroutine[Any, Any, int]],
    study: Study | None = None,
    key: str | None = None,
) -> int:
    """Run ``work`` in a batch session of the study (from ``args`` unless given):
    :func:`~geval_async.judging.batch.session.batch_session`."""
    if study is None:
        assert args is not None
        study = prepare_study(load_study(args))
        key = judge_key(study.config)
    source = study.config.source

    async def main() -> int:
        from ..scoring.scores.draws import next_round

        async with batch_session(study, key) as (control, claims):
            # Draws spent by need: the round the cache stands at (every item of the plan, each
            # asking the draws the rule gives it now).
            control.ask(next_round(control.study, control.cache, opening=True)[0])
            return await work(control, claims)

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        say(
            "interrupted: submitted batch jobs keep running at the provider and are in the "
            f"ledger; `geval-async run {source} --batch` or `geval-async batch collect "
            f"{source}` attaches to them"
        )
        return EXIT_INTERRUPTED


def run_batch(study: Study, key: str | None, *, poll: float, quiet: bool) -> int:
    """``run --batch``: submit what the cache lacks, wait with a progress line, collect."""

    async def work(control: BatchControl, claims: Claims) -> int:
        from ..scoring.scores.draws import next_round

        show = progress_printer(quiet=quiet, started=time.monotonic())
        whole = control.study
        while True:
            run = await run_batches(
                control,
                claims,
                poll_seconds=poll,
                budget=lambda: _budget(study),
                on_submitted=report_submitted,
                on_progress=show,
            )
            if not quiet and sys.stderr.isatty():
                print(file=sys.stderr)
            report_collected(run.collected, run.stored)
            report_too_large(control)
            if run.stored.stopped is not None:
                raise RunStopped(run.stored.stopped)  # as an online run stops, with its line
            # Draws spent by need: a round is a batch; the next asks what its answers left
            # unsettled, until none is (or a round would ask what this one asked).
            asked = control.study.allotment
            later, drawing = next_round(whole, control.cache, opening=True)
            if not drawing or later.allotment == asked:
                break
            control.ask(later)
        return coverage_exit(control.study, control.coverage(), run.held_back)

    return _with_control(None, work, study, key)


def cmd_submit(args: argparse.Namespace) -> int:
    async def work(control: BatchControl, claims: Claims) -> int:
        records, held_back = await control.submit(claims, budget=_budget(control.study))
        report_submitted(records, held_back)
        report_too_large(control)
        live = control.ledger.live()
        print(
            f"{len(live)} batch jobs live; see `geval-async batch status {args.config}`, "
            f"then `geval-async batch collect {args.config}` when they have ended"
        )
        if control.queue_full:
            print(
                f"the batch queue is full ({control.queue().describe()}): the other requests "
                f"wait; `geval-async run {args.config} --batch` submits them as batches finish"
            )
        return EXIT_OK

    return _with_control(args, work)


def cmd_status(args: argparse.Namespace) -> int:
    async def work(control: BatchControl, claims: Claims) -> int:
        records = await control.poll()
        print(batch_table(records) if records else "no live batch jobs")
        for record in records:
            if record.queue_refusal is not None:
                print(f"batch {record.label} was refused for the queue limit: {record.errors[0]}")
            elif record.errors:
                print(f"batch {record.label} failed validation: {record.errors[0]}")
        print(queue_line(records, control.queue(), len(control.ledger.history())))
        print(coverage_table(control.coverage()))
        ended = [r for r in records if r.ended]
        if ended:
            print(
                f"{len(ended)} batch jobs have ended: "
                f"collect them with `geval-async batch collect {args.config}`"
            )
        return EXIT_OK

    return _with_control(args, work)


def cmd_collect(args: argparse.Namespace) -> int:
    async def work(control: BatchControl, claims: Claims) -> int:
        records = await control.poll()
        stored, collected = Stored(), []
        for record in records:
            if record.ended:
                stored.add(await control.collect(record, claims))
                collected.append(record)
        report_collected(collected, stored)
        if stored.stopped is not None:
            raise RunStopped(stored.stopped)
        running = [r for r in records if not r.ended]
        if running:
            print(f"{len(running)} batch jobs are still running; collect again later")
            return EXIT_INCOMPLETE
        if control.study.config.sampling.adaptive:
            # Draws spent by need: what was collected may call for a next round.
            from ..scoring.scores.draws import next_round

            later, drawing = next_round(control.study, control.cache, opening=True)
            control.ask(later)
            if drawing:
                print(
                    f"draws spent by need: {drawing} item{'s' if drawing != 1 else ''} still "
                    f"drawing; `geval-async batch submit {args.config}` asks their next round"
                )
        return coverage_exit(control.study, control.coverage(), 0)

    return _with_control(args, work)


def cmd_cancel(args: argparse.Namespace) -> int:
    async def work(control: BatchControl, claims: Claims) -> int:
        records = await control.cancel()
        print(batch_table(records) if records else "no live batch jobs")
        print(
            "cancelling: answers they already have are stored by "
            f"`geval-async batch collect {args.config}` once they have stopped"
        )
        return EXIT_OK

    return _with_control(args, work)


# --- files for any engine ----------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    target = Path(args.file)
    study, _ = _this_round(prepare_study(load_study(args)))
    lines = export_inputs(study, target)
    print(f"{lines} requests written to {target} (custom_id = cache key); send nothing")
    print(
        f"run it, e.g. `vllm run-batch -i {target} -o out.jsonl --model MODEL`, then "
        f"`geval-async batch import {args.config} out.jsonl`"
    )
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    # Draws spent by need: the file answers the round the cache stands at (what export wrote).
    study, _ = _this_round(prepare_study(load_study(args)))
    source = Path(args.file)
    stored, counts = import_outputs(study, source)
    report_stored(stored, f"{source}")
    if stored.unknown:
        print(
            f"{len(stored.unknown)} lines name no request of this study and were skipped "
            f"(first: {stored.unknown[0]}); was the file made from another config?"
        )
    _, drawing = _this_round(study)
    if drawing:
        print(
            f"draws spent by need: {drawing} item{'s' if drawing != 1 else ''} still drawing; "
            f"`geval-async batch export {args.config} FILE` writes their next round"
        )
        return EXIT_INCOMPLETE
    return coverage_exit(study, counts, 0)


def _this_round(study: Study) -> tuple[Study, int]:
    """Draws spent by need: the study as its next round asks it (each item the draws the
    rule gives it now, as a batch submit asks them), and how many items are still drawing;
    a study of fixed n as it is."""
    from ..scoring.scores.draws import adaptive_criteria, next_round

    if not adaptive_criteria(study):
        return study, 0
    with JudgeCache(study.config.cache_path, create=False) as cache:
        return next_round(study, cache, opening=True)


def _budget(study: Study) -> Budget | None:
    """``--max-cost`` at the batch price: what a submit may commit, less what the study's
    earlier runs and submits spent."""
    return run_budget(study.config, study.config.cache_path, batch=True)
