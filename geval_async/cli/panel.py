"""``run``, ``run --dry-run`` and ``status`` on a panel config (``[[judges]]``): every judge.

``run`` judges with all the judges at once (:mod:`geval_async.judging.run.panel`, in the one
``asyncio.run`` of the command), the progress line shows each judge compactly, and the summary
says per judge what was sent, cached and failed. ``--judge NAME`` (:mod:`.overrides`) turns
a panel config into that judge's one-judge study before any of this
(:mod:`geval_async.study.judge_choice`), and the one-judge commands run as they always did.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Callable, Mapping
from functools import partial

from ..errors import ConfigError
from ..judging.batch.ledger import Ledger
from ..judging.run.budget import study_budget, study_prompt_cache, study_spent
from ..judging.run.estimate import estimate_run
from ..judging.run.panel import JudgeOutcome, PanelRunResult
from ..judging.run.progress import RunCounters
from ..judging.run.stage import judge_panel, panel_api_keys
from ..judging.wire.capabilities import endpoint_summaries
from ..study.config import EvalConfig
from ..study.prepare import prepare_study
from ..study.pricing import usd
from .answers import warn
from .interrupts import run_with_progress, say
from .overrides import add_judge_flag, load_study
from .progress import render_retries
from .summary import (
    adaptive_dry_run,
    budget_left,
    coverage_table,
    draws_lines,
    dry_run,
    expected_duration,
    table,
)

__all__ = [
    "one_judge_only",
    "panel_command",
    "panel_dry_run",
    "panel_status",
    "render_panel_progress",
    "run_panel_cli",
]

EXIT_OK, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def panel_command(
    parser: argparse.ArgumentParser,
    one_judge: Callable[[argparse.Namespace], int],
    panel: Callable[[argparse.Namespace, EvalConfig], int],
) -> None:
    """Give a command ``--judge NAME`` and a handler that runs ``panel`` on a panel config
    (no ``--judge``) and ``one_judge`` on any other (a ``--judge`` makes it one judge's)."""
    add_judge_flag(parser)

    def handler(args: argparse.Namespace) -> int:
        config = load_study(args)
        return panel(args, config) if config.is_panel else one_judge(args)

    parser.set_defaults(handler=handler)


def one_judge_only(
    command: str, handler: Callable[[argparse.Namespace], int]
) -> Callable[[argparse.Namespace], int]:
    """``handler`` for a command that works with one judge: on a panel config it needs
    ``--judge NAME`` (one line, exit 2), rather than silently using the first judge."""

    def checked(args: argparse.Namespace) -> int:
        config = load_study(args)
        if config.is_panel:
            raise ConfigError(
                f"{command} on a panel config ({config.source}) works with one judge at a time: "
                f"add --judge NAME (the judges: {', '.join(config.judge_names)})"
            )
        return handler(args)

    return checked


_say = say


def _who(config: EvalConfig) -> str:
    return f"{config.judge.model} at {config.judge.url}"


# --- run ---------------------------------------------------------------------------------------


def render_panel_progress(outcomes: Mapping[str, JudgeOutcome]) -> str:
    """``gpt 120/400 · gemini 80/400 (waiting 12 s: 429) · local 400/400``."""
    parts = []
    for name, outcome in outcomes.items():
        counters = outcome.counters
        if outcome.error is not None:
            parts.append(f"{name} stopped")
            continue
        if counters is None:
            parts.append(f"{name} starting")
            continue
        total = counters.total()
        part = f"{name} {total.done + total.rejected + total.failed}/{total.items}"
        failed = total.rejected + total.failed
        if failed:
            part += f" ({failed} failed)"
        left = counters.wait_left()
        if left >= 1.0:
            part += f" (waiting {left:.0f} s: {counters.wait_reason.split(',')[0]})"
        elif outcome.result is not None and outcome.result.stopped:
            part += " (stopped)"
        parts.append(part)
    return " · ".join(parts)


def run_panel_cli(args: argparse.Namespace, config: EvalConfig) -> int:
    """``run`` on a panel config: every judge at once; the exit code as for one judge."""
    if args.batch:
        raise ConfigError(
            f"--batch on a panel config ({config.source}): submit one judge's batch at a time "
            f"with --judge NAME (the judges: {', '.join(config.judge_names)})"
        )
    members = config.members()
    studies = {}
    for name, member in zip(config.judge_names, members, strict=True):
        study = prepare_study(member)
        warn([f"judge {name}: {line}" for line in study.warnings], strict=args.strict)
        studies[name] = study
    if args.dry_run:
        panel_dry_run(config)
        return EXIT_OK
    from ..scoring.scores.draws import next_round

    start = partial(
        judge_panel,
        studies,
        api_keys=panel_api_keys(config),
        retry_failed=args.retry_failed,
        rounds=next_round,
    )
    result = run_with_progress(
        start, quiet=args.quiet, progress=render_panel_progress, retries=_judge_retries
    )
    return _panel_summary(args, config, result)


def _judge_retries(name: str, counters: RunCounters) -> str:
    return f"{name}: {render_retries(counters)}"


def _panel_summary(args: argparse.Namespace, config: EvalConfig, result: PanelRunResult) -> int:
    """Per judge: items, cached, new, refused, failed, missing, requests sent; then each
    judge's stop, failures and endpoint; the exit code of the worst judge."""
    rows: list[list[object]] = []
    for name, outcome in result.judges.items():
        if outcome.result is None:
            items = outcome.study.item_count
            rows.append([name, items, "-", "-", "-", "-", items, 0])
            continue
        counters = outcome.result.counters
        t = counters.total()
        row = [name, t.items, t.cached, t.answered, t.rejected, t.failed, t.missing]
        rows.append([*row, counters.requests_sent])
    header = ["judge", "items", "cached", "new", "refused", "failed", "missing", "sent"]
    print(table(header, rows))
    if result.corrupted:
        print(
            f"{result.corrupted} corrupted cache entries were found, counted as missing "
            "and asked for again"
        )
    codes = [EXIT_OK]
    for name, outcome in result.judges.items():
        member = outcome.study.config
        if outcome.error is not None:
            print(f"judge {name} ({_who(member)}): not judged: {outcome.error}")
            codes.append(EXIT_USAGE if outcome.bad_input else EXIT_INCOMPLETE)
            continue
        run = outcome.result
        assert run is not None
        line = f"judge {name} ({_who(member)}): {run.elapsed:.1f} s"
        if run.billed:
            line += f", billed {usd(run.billed)}"
        if (prompt_cache := run.counters.prompt_cache()) is not None:
            line += f", prompt cache: {prompt_cache.line()}"
        print(line)
        if run.endpoint is not None:
            print(f"  endpoint: {run.endpoint}")
        for message, count in run.failures.most_common(3):
            print(f"  {count} x {' '.join(message.split())[:200]}")
        unusable = run.counters.every_answer_unusable()
        if run.stopped:
            print(f"  stopped: {' '.join(run.stopped.split())[:300]}")
            codes.append(EXIT_INCOMPLETE)
        elif run.interrupted:
            codes.append(EXIT_INTERRUPTED)
        elif unusable:
            print(f"  every answer of this judge is invalid ({unusable}): no rating to score")
            codes.append(EXIT_INCOMPLETE)
        elif not run.complete:
            print("  some items have no answer (see refused/failed above)")
            codes.append(EXIT_INCOMPLETE)
    resume = "geval-async " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if (budget := study_budget(config)) is not None:
        resume += budget_left(budget)
    code = EXIT_INTERRUPTED if EXIT_INTERRUPTED in codes else max(codes)
    if code == EXIT_INTERRUPTED:
        _say(f"interrupted: answers received so far are saved; resume with: {resume}")
    elif code != EXIT_OK:
        missing = [name for name, o in result.judges.items() if not o.complete]
        _say(f"judges not complete: {', '.join(missing)}; resume with: {resume}")
    return code


# --- dry run and status ------------------------------------------------------------------------


def panel_dry_run(config: EvalConfig) -> None:
    """``run --dry-run`` on a panel: each judge's estimate, then the panel's total."""
    requests = tokens = 0
    cost, unpriced = 0.0, []
    durations = []
    for name, member in zip(config.judge_names, config.members(), strict=True):
        print(f"judge {name} ({_who(member)}):")
        study = prepare_study(member)
        # A live batch job's requests are not sent again (the run leaves them to the batch).
        in_batch = Ledger(member.cache_path).live_keys()
        if member.sampling.adaptive:  # its next round: the least it can cost
            estimate = adaptive_dry_run(study, in_batch, retry_failed=False)
        else:
            estimate = dry_run(study, asyncio.run(estimate_run(study, in_batch=in_batch)))
        requests += estimate.requests
        tokens += estimate.tokens
        if estimate.cost is None:
            unpriced.append(name)
        else:
            cost += estimate.cost
        limits = member.limits
        durations.append((estimate.requests, estimate.tokens, limits.rpm, limits.tpm))
        print()
    print(
        f"panel ({len(config.judges)} judges): requests to send: {requests}; estimated "
        f"tokens: {tokens}; estimated cost: "
        + (f"unknown (no price for judges {', '.join(unpriced)})" if unpriced else f"${cost:.2f}")
    )
    # The judges run at once, each under its own limits: the slowest one sets the pace.
    slowest = max(durations, key=lambda d: _minutes(*d))
    print(expected_duration(*slowest).replace("expected duration", "panel's expected duration"))


def _minutes(requests: int, tokens: int, rpm: float | None, tpm: float | None) -> float:
    bounds = [requests / rpm if rpm else 0.0, tokens / tpm if tpm else 0.0]
    return max(bounds)


def panel_status(args: argparse.Namespace, config: EvalConfig) -> int:
    """``status`` on a panel: each judge's coverage, then the endpoints and the spend."""
    from ..scoring.scores.status import study_status
    from .answers import invalid_lines

    for name, member in zip(config.judge_names, config.members(), strict=True):
        study = prepare_study(member)
        status = study_status(study, Ledger(member.cache_path).live_keys())
        print(f"judge {name} ({_who(member)}):")
        print(coverage_table(status.coverage))
        if status.draws is not None:
            for line in draws_lines(status.draws, member.sampling):
                print(line)
        if status.corrupted:
            print(f"{status.corrupted} corrupted cache entries were found and count as missing")
        for line in invalid_lines(status):
            print(line)
        print()
    shard = config.shard
    print(f"cache: {config.cache_path}" + (f" (shard {shard})" if shard else ""))
    for line in endpoint_summaries(config.cache_path, [m.judge for m in config.members()]):
        print(f"endpoint: {line}")
    billed = study_spent(config.cache_path, config, billed=True)
    if billed:
        print(f"spent so far: {usd(billed)} (this config's runs, as their answers' usage billed)")
    prompt_cache = study_prompt_cache(config.cache_path, config)
    if prompt_cache is not None:
        print(f"prompt cache: {prompt_cache.line()} (this config's runs, every judge's)")
    return EXIT_OK
