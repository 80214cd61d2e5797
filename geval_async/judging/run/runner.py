"""The worker pool: the only module that creates tasks.

A producer walks the plan lazily and looks every request up in the cache; a hit is counted and
never touches a limiter. Items with something missing go onto a bounded queue, where N workers
(:mod:`.worker`) take them. Resuming is then simply running again. What the endpoint showed it
accepts is saved beside the cache at the end (:mod:`.capabilities`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from ...errors import CacheError, GevalError
from ...study.plan import Study
from ...study.pricing import SharedCap
from ..store.cache import JudgeCache
from ..store.claims import Claims
from ..store.left import LeftChunk
from ..store.origin import ServerEntries
from ..wire.capabilities import save_capabilities
from ..wire.probe import server_is_simulated
from .budget import record_spend
from .evaluation_steps import generate_steps
from .progress import RunCounters, RunResult, report_progress
from .worker import Run

__all__ = ["NextRound", "RunResult", "run_study"]


class NextRound(Protocol):
    """The study as the next round of draws spent by need asks it, read from the cache, and
    how many of its items are still drawing (the scoring stage's rule decides,
    :func:`geval_async.scoring.scores.draws.next_round`)."""

    def __call__(self, study: Study, cache: JudgeCache, *, opening: bool) -> tuple[Study, int]: ...


async def run_study(
    study: Study,
    cache: JudgeCache,
    *,
    api_key: str | None,
    stop: asyncio.Event | None = None,
    retry_failed: bool = False,
    on_progress: Callable[[RunCounters], None] | None = None,
    progress_interval: float = 0.5,
    on_retries: Callable[[RunCounters], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    on_start: Callable[[RunCounters], None] | None = None,
    cap: SharedCap | None = None,
    rounds: NextRound | None = None,
) -> RunResult:
    """Judge every item of the study that the cache does not hold yet.

    Args:
        study: the prepared study.
        cache: an open, writable cache.
        api_key: the judge API key (used in one header, never stored).
        stop: set it to stop dispatching (Ctrl-C); in-flight answers are still saved.
        retry_failed: ask again for requests the cache holds as refused.
        on_progress: called with the run's counters every ``progress_interval`` seconds and
            once at the end (the command line renders them as its progress line).
        on_retries: without ``on_progress``, called with the counters when requests were
            retried: at the first retry, then not more often than every ``progress_interval``
            seconds, so that even a quiet run says at once that it is retrying.
        on_warning: called with a line, at once, when the server says something the run
            sets aside or that will make it slow (a learned limit no account has); the lines
            are in the result's ``warnings`` too.
        on_start: called once with the run's counters as soon as they exist, so that a
            caller can read them while the run goes (a panel's progress line).
        cap: a ``--max-cost`` cap shared with other runs of this loop (a panel's judges);
            None: the run's own cap, from ``study.config.max_cost``.
        rounds: for a study whose draws are spent by need, what each round asks: the run
            asks round after round until no item is drawing (or a round gives none more).

    Raises:
        CacheError: the cache cannot be written.
        ConfigError: a request can never pass the configured limits.
    """
    cache.check_writable()
    stop = stop if stop is not None else asyncio.Event()
    limits = study.config.limits
    started = time.monotonic()
    simulated = await server_is_simulated(study.config.judge, limits.timeout, stop)
    entries = ServerEntries(cache, simulated)
    # The evaluation steps, before any item (they are part of every item's prompt).
    study, steps_sent = await generate_steps(study, entries, api_key, cap=cap)
    whole = study
    if rounds is not None:
        study, _ = rounds(whole, cache, opening=True)
    run = Run(
        study,
        entries,
        stop=stop,
        retry_failed=retry_failed,
        backoff=limits.backoff,
        warn=on_warning,
        cap=cap,
    )
    run.counters.requests_sent += steps_sent
    if on_start is not None:
        on_start(run.counters)
    states = run.feed.first_work()
    if states is None:  # the cache holds everything: no transport, no claims
        if on_progress is not None:
            on_progress(run.counters)
    else:
        from ..wire.transport import Transport

        # A claim outlives one attempt (each attempt renews it) with room for a slow answer.
        with Claims(cache.directory, limits.timeout + 30.0, stop=stop.is_set) as claims:
            async with Transport(
                study.config.judge,
                api_key,
                concurrency=limits.concurrency,
                timeout=limits.timeout,
                max_answer_bytes=limits.max_answer_bytes,
            ) as transport:
                run.connect(transport, claims)
                reporter = None
                if on_progress is not None or on_retries is not None:
                    reporter = asyncio.create_task(
                        report_progress(run.counters, on_progress, on_retries, progress_interval)
                    )
                try:
                    await _ask(run, states)
                    asked = study.allotment
                    while rounds is not None and not stop.is_set():
                        later, drawing = rounds(whole, cache, opening=False)
                        # A round that asks what the last one asked has nothing new to go on
                        # (its items failed): the run ends, and says so in its counts.
                        if not drawing or (asked is not None and later.allotment == asked):
                            break
                        asked = later.allotment
                        run.start_round(later)
                        more = run.feed.first_work()
                        if more is not None:
                            await _ask(run, more)
                finally:
                    run.settle_counts()
                    # The answers handed over but not stored yet are stored here.
                    run.writer.close()
                    judge = study.config.judge
                    try:
                        record_spend(
                            cache.directory, study.config, run.budget, run.counters.prompt_cache()
                        )
                        save_capabilities(cache.directory, judge.url, judge.model, run.endpoint)
                    except CacheError:
                        # On a disk still full, the answers lost are what the run must say.
                        if run.writer.error is None:
                            raise
                    run.counters.wait_until = 0.0  # the run is over: nothing waits any more
                    if reporter is not None:
                        reporter.cancel()
                        # asyncio.wait never raises the reporter's CancelledError, so a
                        # cancellation of this task (a second Ctrl-C) is not swallowed here.
                        await asyncio.wait([reporter])
                        if on_progress is not None:
                            on_progress(run.counters)
                if run.writer.error is not None:  # the last answers did not reach the cache
                    raise run.writer.error
    stopped = run.stopped
    if stopped is None and run.budget is not None and run.budget.refused:
        stopped = run.budget.reached()
    return RunResult(
        counters=run.counters,
        stopped=stopped,
        interrupted=stop.is_set() and stopped is None,
        failures=run.failures,
        elapsed=time.monotonic() - started,
        endpoint=run.endpoint.summary(study.config.judge.url, study.config.judge.model)
        if states is not None
        else None,
        billed=None if run.budget is None else run.budget.billed,
        warnings=run.warnings,
    )


async def _ask(run: Run, chunks: Iterator[LeftChunk]) -> None:
    """One pass of the worker pool over the feed's items (one round)."""
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(run.feed.produce(chunks))
            for _ in range(run.config.limits.concurrency):
                group.create_task(run.work())
    except BaseExceptionGroup as group_error:
        # Surface our own error as itself (the CLI prints it in one line).
        ours = group_error.subgroup(GevalError)
        if ours is not None:
            raise ours.exceptions[0] from None
        raise
