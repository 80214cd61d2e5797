"""The notebook's front door: a DataFrame in, a DataFrame out, criteria defined in code.

    >>> import geval_async as ga
    >>> con = ga.Criterion("con", prompt=open("prompts/con.txt").read(), scale=(1, 5),
    ...                    fields=["question", "answer"])
    >>> results = ga.evaluate(df, [con], judge="gpt-4o-mini", condition="system", n=10)
    >>> results.frame()          # df with con_score, con_se, con_status joined on

:func:`evaluate` saves the study built in code as the files a config describes
(:mod:`geval_async.study.code_study`: one reader for every setting), judges it through the
judge stage (:mod:`geval_async.judging.run.stage`) and scores it from the cache
(:func:`geval_async.load_results`): the cache is the command line's, keyed the same way, so
running the cell again sends nothing, and ``geval-async run`` on the saved config sends nothing
either. It blocks, in a plain script and inside Jupyter alike, where the notebook's own event
loop is already running and ``asyncio.run`` fails: the run gets an event loop of its own, in a
thread of its own. :func:`aevaluate` is the same for code that has a loop (``await``).

Progress is a ``tqdm.auto`` bar (a widget in a notebook) where tqdm is installed, else the
command line's progress line. A kernel interrupt (Ctrl-C) stops the run as the command line's
first Ctrl-C does: no new requests, the answers in flight saved; every answer received stays in
the cache, and running the cell again asks only for the rest. A second interrupt quits at once.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .api import load_results
from .cli.interrupts import say, show_line
from .cli.panel import render_panel_progress
from .cli.progress import render_progress
from .judging.run.panel import JudgeOutcome
from .judging.run.progress import RunCounters
from .judging.run.stage import judge_panel, judge_study, panel_api_keys
from .scoring.scores.draws import next_round
from .scoring.scores.results import StudyResults
from .study.code_study import CodeStudy, Criterion, define_study
from .study.config import load_config
from .study.prepare import prepare_study

__all__ = ["STUDIES", "Criterion", "aevaluate", "define_study", "evaluate", "run_study_in_code"]

# Where evaluate() saves a study built in code, each in a folder named by its content.
STUDIES = Path("geval-studies")

_T = TypeVar("_T")


def evaluate(
    records: Any,
    criteria: Criterion | Iterable[Criterion],
    *,
    judge: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    name: str = "study",
    folder: str | os.PathLike[str] | None = None,
    retry_failed: bool = False,
    progress: bool = True,
    strict: bool = False,
    **settings: Any,
) -> StudyResults:
    """Judge ``records`` on ``criteria`` and score them: the results that
    :func:`geval_async.load_results` gives, ``.frame()`` the records with the scores joined.

    Works in a plain script and in a notebook cell (whose event loop is running); Ctrl-C stops
    the run with every answer received kept in the cache, then raises KeyboardInterrupt.

    Args:
        records: a pandas DataFrame, a list of dicts, or the path of a records file (JSON,
            JSONL, CSV, TSV or Parquet).
        criteria: one :class:`Criterion` or several.
        judge: the judge's model name, a ``[judge]`` table as a dict, or a panel (a list of
            ``[[judges]]`` tables).
        name: the study's name (its config's stem and its outputs' prefix).
        folder: where the study's config, records and prompts are saved; default: a folder
            named by the study's content in ``geval-studies/``.
        retry_failed: ask again for requests the cache holds as refused.
        progress: show a progress bar (``tqdm.auto``) or, without tqdm, the progress line.
        strict: raise ConfigError when any item lacks an answer.
        settings: every setting of ``[judge]``, ``[sampling]`` and ``[limits]`` under its
            name, and more (:func:`~geval_async.study.code_study.define_study`).

    Raises:
        ConfigError: an argument is invalid; the one-line message names it.
        KeyboardInterrupt: the run was interrupted (the answers received are cached).
    """
    study = define_study(records, criteria, judge=judge, name=name, **settings)
    options = {"retry_failed": retry_failed, "progress": progress, "strict": strict}
    return _in_own_loop(lambda stop: run_study_in_code(study, folder, stop=stop, **options))


async def aevaluate(
    records: Any,
    criteria: Criterion | Iterable[Criterion],
    *,
    judge: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    name: str = "study",
    folder: str | os.PathLike[str] | None = None,
    retry_failed: bool = False,
    progress: bool = True,
    strict: bool = False,
    **settings: Any,
) -> StudyResults:
    """:func:`evaluate` in the caller's event loop: ``results = await ga.aevaluate(...)``."""
    study = define_study(records, criteria, judge=judge, name=name, **settings)
    options = {"retry_failed": retry_failed, "progress": progress, "strict": strict}
    return await run_study_in_code(study, folder, stop=asyncio.Event(), **options)


async def run_study_in_code(
    study: CodeStudy,
    folder: str | os.PathLike[str] | None,
    *,
    stop: asyncio.Event,
    retry_failed: bool,
    progress: bool,
    strict: bool,
) -> StudyResults:
    """Save ``study`` (to ``folder``, or by content under :data:`STUDIES`), judge what the
    cache lacks, and score it; ``stop`` set: no new requests."""
    path = study.save(folder) if folder is not None else study.save_by_content(STUDIES)
    config = load_config(path)
    bar = _Progress(study.name) if progress else None
    options: dict[str, Any] = {"retry_failed": retry_failed, "stop": stop, "rounds": next_round}
    if bar is not None:
        options |= {"on_progress": bar, "progress_interval": bar.interval}
    try:
        if config.is_panel:
            members = zip(config.judge_names, config.members(), strict=True)
            studies = {name: prepare_study(member) for name, member in members}
            await judge_panel(studies, api_keys=panel_api_keys(config), **options)
        else:
            prepared = prepare_study(config)
            await judge_study(prepared, api_key=config.required_api_key(), **options)
    finally:
        if bar is not None:
            bar.close()
    results = load_results(config, strict=strict)
    if hasattr(study.records, "columns"):  # the DataFrame given, for results.frame()
        results.records_frame = study.records
    return results


class _Progress:
    """A run's progress as a ``tqdm.auto`` bar (a widget in a notebook, text elsewhere), or
    without tqdm the command line's progress line."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bar: Any = None
        try:
            from tqdm.auto import tqdm
        except ImportError:
            self.tqdm: Any = None
            # A notebook's output is no terminal: a line every few seconds, not a redraw.
            self.interactive = sys.stderr.isatty()
            self.interval = 0.5 if self.interactive else 5.0
        else:
            self.tqdm, self.interval = tqdm, 0.5

    def __call__(self, state: RunCounters | Mapping[str, JudgeOutcome]) -> None:
        if self.tqdm is None:
            if isinstance(state, RunCounters):
                show_line(render_progress(state), interactive=self.interactive)
            else:
                show_line(render_panel_progress(state), interactive=self.interactive)
            return
        runs = [state] if isinstance(state, RunCounters) else _panel_counters(state)
        totals = [run.total() for run in runs]
        items = sum(t.items for t in totals)
        finished = sum(t.done + t.rejected + t.failed for t in totals)
        if self.bar is None:
            self.bar = self.tqdm(total=items, desc=self.name, unit="item")
        self.bar.total = items
        self.bar.n = finished
        self.bar.set_postfix(
            new=sum(t.answered for t in totals),
            cached=sum(t.cached for t in totals),
            failed=sum(t.rejected + t.failed for t in totals),
            refresh=False,
        )
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.tqdm is None and self.interactive:
            print(file=sys.stderr)  # end the progress line


def _panel_counters(outcomes: Mapping[str, JudgeOutcome]) -> list[RunCounters]:
    return [o.counters for o in outcomes.values() if o.counters is not None]


def _in_own_loop(job: Callable[[asyncio.Event], Coroutine[Any, Any, _T]]) -> _T:
    """``job(stop)`` run to its end in an event loop of its own, in a thread of its own, while
    this thread waits: in a notebook this thread's loop is running already (``asyncio.run``
    refuses to start another in it), and a script's main thread is where Ctrl-C arrives. The
    first Ctrl-C sets ``stop`` (no new requests; answers in flight saved), a second cancels;
    either way the run ends before KeyboardInterrupt is raised here."""
    started = threading.Event()
    finished = threading.Event()
    state: dict[str, Any] = {}

    async def main() -> _T:
        state["loop"], state["task"] = asyncio.get_running_loop(), asyncio.current_task()
        state["stop"] = stop = asyncio.Event()
        started.set()
        return await job(stop)

    def run() -> None:
        try:
            state["result"] = asyncio.run(main())
        except BaseException as exc:  # handed to the waiting thread, which raises it
            state["error"] = exc
        finally:
            started.set()
            finished.set()

    threading.Thread(target=run, name="geval-async judge", daemon=True).start()
    interrupts = 0
    while True:
        try:
            finished.wait()
            break
        except KeyboardInterrupt:
            interrupts += 1
            started.wait()
            loop = state.get("loop")
            if loop is None or finished.is_set():
                continue
            if interrupts == 1:
                say("stopping: no new requests; saving answers in flight (interrupt again to quit)")
                loop.call_soon_threadsafe(state["stop"].set)
            else:
                loop.call_soon_threadsafe(state["task"].cancel)
    if interrupts:
        raise KeyboardInterrupt(
            "stopped: every answer received is in the cache; run again to ask for the rest"
        )
    if "error" in state:
        raise state["error"]
    return state["result"]
