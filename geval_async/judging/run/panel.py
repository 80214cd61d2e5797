"""A panel's run: every judge of a ``[[judges]]`` study judged at once, in one event loop.

Each judge is a one-judge run (:func:`~geval_async.judging.run.runner.run_study`) of its own study
(:meth:`~geval_async.study.settings.EvalConfig.for_judge`): its own limiter and limits, its own
learned endpoint facts, its own stop, and its own keys, so a judge's answers are exactly those a
run of that judge alone would store, in the same cache. What the judges share is the Ctrl-C
(the panel's ``stop`` stops them all) and the ``--max-cost`` cap (one cap for the panel's total).
A judge that fails (its server down, its key missing, a refusal that stops it) stops only
itself: the others go on, and the result says per judge what happened.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ...errors import ConfigError, GevalError
from ...study.plan import Study
from ..store.cache import JudgeCache
from .budget import panel_cap
from .progress import RunCounters, RunResult
from .runner import NextRound, run_study

__all__ = ["JudgeOutcome", "PanelRunResult", "run_panel"]


@dataclass
class JudgeOutcome:
    """One judge's part of a panel's run: its result, or the error that kept it from running
    (``bad_input``: a config error, such as its API key missing)."""

    name: str
    study: Study
    result: RunResult | None = None
    error: str | None = None
    bad_input: bool = False
    counters: RunCounters | None = None  # live while the run goes (None: not started)

    @property
    def complete(self) -> bool:
        return self.result is not None and self.error is None and self.result.complete


@dataclass
class PanelRunResult:
    """What a panel's run did, judge by judge (in the config's order)."""

    judges: dict[str, JudgeOutcome] = field(default_factory=dict)
    elapsed: float = 0.0
    interrupted: bool = False
    corrupted: int = 0  # entries of the shared cache that did not decode (read as missing)

    @property
    def complete(self) -> bool:
        """Whether every judge has every answer of its plan."""
        return all(outcome.complete for outcome in self.judges.values())


async def run_panel(
    studies: Mapping[str, Study],
    cache: JudgeCache,
    *,
    api_keys: Mapping[str, str | None | ConfigError],
    stop: asyncio.Event | None = None,
    retry_failed: bool = False,
    on_progress: Callable[[Mapping[str, JudgeOutcome]], None] | None = None,
    progress_interval: float = 0.5,
    on_retries: Callable[[str, RunCounters], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    rounds: NextRound | None = None,
) -> PanelRunResult:
    """Judge with every judge of a panel at once.

    Args:
        studies: each judge's prepared one-judge study, by judge name.
        cache: the open, writable cache all judges store into.
        api_keys: each judge's API key (None: a local judge without one), or the
            :class:`~geval_async.errors.ConfigError` that says it is missing: that judge is
            not run, the others are.
        stop: set it to stop every judge (Ctrl-C); answers in flight are saved.
        on_progress: called with the judges' outcomes (their live counters) every
            ``progress_interval`` seconds and once at the end.
        on_retries: as for one judge, called with the judge's name and its counters.
        on_warning: as for one judge, each line prefixed with the judge's name.
        rounds: as for one judge: each judge asks its own rounds of its own items.
    """
    stop = stop if stop is not None else asyncio.Event()
    started = time.monotonic()
    first = next(iter(studies.values())).config
    cap = panel_cap(first, cache.directory)  # one cap, read once, for all the judges
    outcomes = {name: JudgeOutcome(name, study) for name, study in studies.items()}

    async def judge_with(outcome: JudgeOutcome) -> None:
        key = api_keys[outcome.name]
        if isinstance(key, ConfigError):
            outcome.error, outcome.bad_input = str(key), True
            return
        own_stop = asyncio.Event()  # a judge that stops itself stops only itself
        relay = asyncio.create_task(_relay(stop, own_stop))

        def counted(counters: RunCounters) -> None:
            outcome.counters = counters

        def prefixed(say: Callable[[str], None] | None) -> Callable[[str], None] | None:
            return None if say is None else (lambda line: say(f"{outcome.name}: {line}"))

        try:
            outcome.result = await run_study(
                outcome.study,
                cache,
                api_key=key,
                stop=own_stop,
                retry_failed=retry_failed,
                on_retries=(
                    (lambda counters: on_retries(outcome.name, counters))
                    if on_retries is not None and on_progress is None
                    else None
                ),
                progress_interval=progress_interval,
                on_warning=prefixed(on_warning),
                on_start=counted,
                cap=cap,
                rounds=rounds,
            )
        except GevalError as exc:
            outcome.error, outcome.bad_input = str(exc), isinstance(exc, ConfigError)
        finally:
            relay.cancel()
            await asyncio.wait([relay])

    reporter = None
    if on_progress is not None:
        reporter = asyncio.create_task(_report(outcomes, on_progress, progress_interval))
    try:
        async with asyncio.TaskGroup() as group:
            for outcome in outcomes.values():
                group.create_task(judge_with(outcome))
    finally:
        if reporter is not None:
            reporter.cancel()
            await asyncio.wait([reporter])
    if on_progress is not None:
        on_progress(outcomes)
    return PanelRunResult(
        judges=outcomes, elapsed=time.monotonic() - started, interrupted=stop.is_set()
    )


async def _relay(panel_stop: asyncio.Event, own_stop: asyncio.Event) -> None:
    """The panel's stop (Ctrl-C) stops this judge too."""
    await panel_stop.wait()
    own_stop.set()


async def _report(
    outcomes: Mapping[str, JudgeOutcome],
    on_progress: Callable[[Mapping[str, JudgeOutcome]], None],
    interval: float,
) -> None:
    while True:
        await asyncio.sleep(interval)
        on_progress(outcomes)
