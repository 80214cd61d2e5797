"""The command line: ``geval-async run | status | sim | ...``.

The event loop starts here, once (``asyncio.run``), and errors are caught here only: a user sees
one line that says what to do next. Exit codes: 0 done, 1 the run is incomplete or had to stop,
2 bad input (config, records, prompts, cache folder), 130 interrupted. Set ``GEVAL_DEBUG=1`` for
full tracebacks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from .. import __version__
from ..errors import CacheError, ConfigError, GevalError, RunStopped
from ..judging.batch.ledger import Ledger
from ..judging.run.budget import study_budget, study_prompt_cache, study_spent
from ..judging.run.runner import RunResult
from ..judging.run.stage import judge_study
from ..judging.wire.capabilities import endpoint_summaries
from ..study.plan import Study
from ..study.prepare import prepare_study
from ..study.pricing import usd
from .answers import add_answers_command, invalid_lines, warn
from .batch import add_batch_commands, add_batch_flags, run_batch
from .cache import add_cache_commands
from .interrupts import run_with_progress, say
from .meta import add_meta_command
from .overrides import add_study_arguments, judge_key, load_study
from .panel import panel_command, panel_status, run_panel_cli
from .progress import render_progress, render_retries
from .score import add_score_commands
from .sim import CommandParser, add_sim_command, sim_setting_names
from .steps import add_steps_command
from .summary import budget_left, coverage_table, dry_run, run_summary

EXIT_OK, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# The commands that ask a judge: an interrupted one has saved what it received.
_ASKING = frozenset({"run", "demo", "steps", "batch"})


_say = say


def _one_line(server_text: str, limit: int = 300) -> str:
    """A message that quotes what a server sent, on one line: a web server's HTML error
    page (a base_url that is not an OpenAI endpoint) would otherwise fill the screen."""
    text = " ".join(server_text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- arguments ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="geval-async",
        description="Concurrent, rate-limited, resumable G-Eval judge runs with offline scoring.",
    )
    parser.add_argument("--version", action="version", version=f"geval-async {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=CommandParser
    )

    run = commands.add_parser("run", help="judge every item the cache does not hold yet")
    add_study_arguments(run)
    run.add_argument(
        "--retry-failed",
        action="store_true",
        help="ask again for requests the cache holds as refused",
    )
    run.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="cap the study's estimated spend, across runs, at USD: stop dispatching "
        "before it would pass (a request: prompt estimate + max_tokens x n at the model's "
        "price, see [prices]; the tally is spend.jsonl in the cache)",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="count requests, tokens and cost; send nothing"
    )
    run.add_argument("--quiet", action="store_true", help="no progress line")
    run.add_argument("--strict", action="store_true", help="load warnings are errors")
    add_batch_flags(run)
    panel_command(run, cmd_run, run_panel_cli)

    demo = commands.add_parser(
        "demo", help="the UEQ example end to end against the simulated judge (no API key needed)"
    )
    demo.add_argument(
        "--output",
        default="geval-demo",
        help="folder for the demo's cache and outputs (default: ./geval-demo)",
    )
    demo.add_argument("--fresh", action="store_true", help="empty the demo cache first")
    demo.add_argument("--batch", action="store_true", help="judge through the Batch API")
    demo.set_defaults(handler=cmd_demo)

    status = commands.add_parser("status", help="per criterion: answered, refused, missing")
    add_study_arguments(status)
    panel_command(status, cmd_status, panel_status)

    add_sim_command(commands, cmd_sim)

    add_score_commands(commands, add_study_arguments)
    add_cache_commands(commands, add_study_arguments, load_study)
    add_meta_command(commands, add_study_arguments)
    add_answers_command(commands, add_study_arguments)
    add_batch_commands(commands, add_study_arguments)
    add_steps_command(commands, add_study_arguments)
    return parser


# --- commands ----------------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    from ..scoring.scores.status import study_status

    study = prepare_study(load_study(args))
    warn(study.warnings, strict=False)
    status = study_status(study, Ledger(study.config.cache_path).live_keys())
    print(coverage_table(status.coverage))
    if status.draws is not None:
        from .summary import draws_lines

        for line in draws_lines(status.draws, study.config.sampling):
            print(line)
    shard = study.config.shard
    print(f"cache: {study.config.cache_path}" + (f" (shard {shard})" if shard else ""))
    if status.corrupted:
        print(f"{status.corrupted} corrupted cache entries were found and count as missing")
    if status.mixed:
        print(
            "note: the answers come from geval-async's simulated judge and from another "
            f"server; `geval-async score` refuses to mix them: run `geval-async run "
            f"{study.config.source}` against the real judge (it replaces the simulated ones)"
        )
    for line in invalid_lines(status):
        print(line)
    for line in endpoint_summaries(study.config.cache_path, [study.config.judge]):
        print(f"endpoint: {line}")
    billed = study_spent(study.config.cache_path, study.config, billed=True)
    if billed:
        print(f"spent so far: {usd(billed)} (this config's runs, as their answers' usage billed)")
    prompt_cache = study_prompt_cache(study.config.cache_path, study.config)
    if prompt_cache is not None:
        print(f"prompt cache: {prompt_cache.line()} (this config's runs)")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    config = load_study(args)
    study = prepare_study(config)
    warn(study.warnings, strict=args.strict)
    if args.dry_run:
        from ..judging.run.estimate import estimate_run

        # A live batch job's requests are not sent again (the run leaves them to the batch).
        in_batch = Ledger(config.cache_path).live_keys()
        if config.sampling.adaptive:
            from .summary import adaptive_dry_run

            adaptive_dry_run(study, in_batch, retry_failed=args.retry_failed)
            return EXIT_OK
        dry_run(
            study,
            asyncio.run(estimate_run(study, retry_failed=args.retry_failed, in_batch=in_batch)),
        )
        return EXIT_OK
    key = judge_key(config)
    if args.batch and args.retry_failed:
        raise ConfigError(
            "--retry-failed does not re-ask refused requests through the Batch API: run "
            f"`geval-async run {args.config} --retry-failed` (online) for them, then --batch"
        )
    if args.batch:
        return run_batch(study, key, poll=args.poll, quiet=args.quiet)
    result = _judge(study, key, quiet=args.quiet, retry_failed=args.retry_failed)
    print(run_summary(result.counters, result.elapsed))
    if config.sampling.adaptive:
        print(
            f"draws spent by need: {result.counters.round} "
            f"round{'s' if result.counters.round != 1 else ''} asked "
            f"(`geval-async status {shlex.quote(str(config.source))}` counts the items settled)"
        )
    if result.endpoint is not None:
        print(f"endpoint: {result.endpoint}")
    if result.billed:
        print(f"billed: {usd(result.billed)} (from the usage the server reported)")
    if (prompt_cache := result.counters.prompt_cache()) is not None:
        print(f"prompt cache: {prompt_cache.line()}")
    if result.corrupted:
        print(
            f"{result.corrupted} corrupted cache entries were found, counted as missing "
            "and asked for again"
        )
    for message, count in result.failures.most_common(5):
        print(f"  {count} x {_one_line(message)}")
    resume = "geval-async " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if (budget := study_budget(config)) is not None:
        resume += budget_left(budget)
    unusable = result.counters.every_answer_unusable()
    if unusable and not result.stopped and not result.interrupted:
        # Complete by count, yet nothing to score: say so now, not at `score`.
        _say(
            f"every answer of this run is invalid ({unusable}): no rating to score; check the "
            f"judge's model and endpoint (`geval-async answers {shlex.quote(str(config.source))}`"
            " shows them)"
        )
        return EXIT_INCOMPLETE
    if result.stopped:
        _say(f"stopped: {_one_line(result.stopped)}")
        _say(f"resume with: {resume}")
        return EXIT_INCOMPLETE
    if result.interrupted:
        _say(f"interrupted: answers received so far are saved; resume with: {resume}")
        return EXIT_INTERRUPTED
    if not result.complete:
        _say(
            "some items have no answer (see refused/failed above); "
            f"failed ones are retried by running again: {resume}"
            + ("" if args.retry_failed else " (add --retry-failed to re-ask refused ones)")
        )
        return EXIT_INCOMPLETE
    return EXIT_OK


def _judge(study: Study, key: str | None, *, quiet: bool, retry_failed: bool = False) -> RunResult:
    from ..scoring.scores.draws import next_round

    start = partial(judge_study, study, api_key=key, retry_failed=retry_failed, rounds=next_round)
    return run_with_progress(start, quiet=quiet, progress=render_progress, retries=render_retries)


def cmd_demo(args: argparse.Namespace) -> int:
    from ..scoring.output.writer import write_outputs
    from ..scoring.scores.results import load_results
    from .demo import demo_config, demo_server
    from .score import print_tests
    from .summary import SIMULATED_NOTE

    print("geval-async demo: the UEQ study (examples/ueq) judged by the SIMULATED judge")
    with demo_server() as server:
        print(f"simulated judge listening on {server.base_url} (no API key needed)")
        config = demo_config(Path(args.output), server.base_url, fresh=args.fresh)
        study = prepare_study(config)
        print(
            f"plan: {len(study.records)} records x {len(study.criteria)} criteria, "
            f"n = {config.sampling.n} samples each; cache {config.cache_path}"
        )
        if args.batch:
            complete = run_batch(study, None, poll=0.5, quiet=False) == EXIT_OK
        else:
            result = _judge(study, None, quiet=False)
            print(run_summary(result.counters, result.elapsed))
            complete = result.complete
    if not complete:
        _say("the demo run did not finish; run `geval-async demo` again to resume")
        return EXIT_INCOMPLETE
    print("\nscoring from the cache (no network from here on)")
    # The demo's judge is its own (the example study, judged by the simulated judge), not a
    # --model other than the config's: its outputs keep the example's names (ueq_con.csv).
    results = replace(load_results(config), variant="")
    try:
        import matplotlib  # noqa: F401

        plots = True
    except ImportError:
        plots = False
        print("(no matplotlib: plots skipped; pip install 'geval-async[plots]')")
    paths = write_outputs(results, plots=plots, html=plots)
    print_tests(results, None)
    print("\ncomposite score (0-100), mean per condition:")
    print(results.composite().loc[["Average"]].rename_axis(None).round(2).to_string())
    print(f"\n{len(paths)} files under {config.output.path}:")
    for path in paths:
        if path.suffix in (".md", ".png", ".html") or path.name.endswith(
            ("average.csv", "ttest.csv")
        ):
            print(f"  {path}")
    print(f"\n{SIMULATED_NOTE}")
    return EXIT_OK


def cmd_sim(args: argparse.Namespace) -> int:
    from ..sim.answers import answer_forms, rated_table
    from ..sim.server import SimSettings, serve

    settings = SimSettings(**{name: getattr(args, name) for name in sim_setting_names()})
    try:
        answer_forms(settings.answer_styles)
    except ValueError as exc:
        raise ConfigError(f"--answer-styles {settings.answer_styles}: {exc}") from exc
    if settings.rated_scores:
        try:
            rated_table(settings.rated_scores)
        except ValueError as exc:
            raise ConfigError(
                f"--rated-scores {settings.rated_scores}: {exc}; give a JSON object of text -> "
                "score"
            ) from None
    _say("geval-async simulated judge: synthetic ratings for tests and demos, not an LLM")
    try:
        asyncio.run(serve(settings, args.host, args.port))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except OSError as exc:  # serve() binds before it serves: a port in use, an unknown host
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"--host {args.host} --port {args.port}: cannot listen there ({reason}); "
            "check --host, or choose another port (--port 0 picks a free one)"
        ) from exc
    return EXIT_OK


# --- entry point -------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (also used by ``python -m geval_async``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _command(args)
    finally:
        if argv is None:  # the process's own command line, not a caller's call
            with contextlib.suppress(ValueError):  # not in the main thread: no handler
                signal.signal(signal.SIGINT, _interrupted_late)


def _command(args: argparse.Namespace) -> int:
    """The command's exit code, its errors said in one line."""
    try:
        code = int(args.handler(args))
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return code
    except (ConfigError, CacheError) as exc:
        _debug()
        _say(f"error: {exc}")
        return EXIT_USAGE
    except RunStopped as exc:
        _debug()
        _say(f"stopped: {_one_line(str(exc))}")
        return EXIT_INCOMPLETE
    except GevalError as exc:
        _debug()
        _say(f"error: {exc}")
        return EXIT_INCOMPLETE
    except PermissionError as exc:
        # A file or folder this user may not open (a shared drive's): what and where, in
        # one line, where a traceback would otherwise end the command.
        _debug()
        where = f"{exc.filename}: " if exc.filename else ""
        _say(
            f"error: {where}permission denied: check its permissions and those of the "
            "folders above it, or choose another path"
        )
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader closed the pipe (`geval-async score ... | head`): the files are written
        # before anything long is printed, so this is a normal end. Python would otherwise
        # complain again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (KeyboardInterrupt, asyncio.CancelledError):
        if args.command in _ASKING:
            # Cut at once (a second Ctrl-C): what was in flight, or held on a full disk, is
            # dropped; the cache keeps what it stored.
            _say(
                "interrupted: the answers stored so far are kept; run the same command to "
                "resume (it asks only what is missing)"
            )
        else:
            _say("interrupted")
        return EXIT_INTERRUPTED


def _interrupted_late(signum: int, frame: object) -> None:
    """A Ctrl-C after the command has ended, while the interpreter shuts down (joins its
    threads, runs its exit handlers): still the user's interrupt, so the exit is 130, and
    without Python's "Exception ignored ... KeyboardInterrupt" report of a handler it cut."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


def _debug() -> None:
    if os.environ.get("GEVAL_DEBUG"):
        import traceback

        traceback.print_exc()


if __name__ == "__main__":
    sys.exit(main())
