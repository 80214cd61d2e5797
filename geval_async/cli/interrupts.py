"""A judge run's one event loop, stopped gently by Ctrl-C (or SIGTERM) and at once by a second.

``run`` on one judge and on a panel both start their loop here (:func:`run_with_progress`,
with the progress line, the retries of a quiet run and the warnings said as they come): the
first signal sets the run's stop event (no new requests; answers in flight are saved), the
second cancels the run.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["run_until_interrupted", "run_with_progress", "say", "show_line"]

_T = TypeVar("_T")


def say(message: str) -> None:
    """A line to the user, on stderr."""
    print(message, file=sys.stderr, flush=True)


def show_line(line: str, *, interactive: bool) -> None:
    """The progress line: rewritten in place on a terminal, a line each otherwise (a log)."""
    if interactive:
        print("\r\033[K" + line, end="", file=sys.stderr, flush=True)
    else:
        print(line, file=sys.stderr, flush=True)


def run_until_interrupted(
    job: Callable[[asyncio.Event], Awaitable[_T]], *, interactive: bool, quiet: bool
) -> _T:
    """``job(stop)`` in a new event loop; Ctrl-C or SIGTERM sets ``stop``, a second cancels."""

    async def main() -> _T:
        stop = asyncio.Event()
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def on_interrupt() -> None:
            if stop.is_set():
                assert task is not None
                task.cancel()  # second Ctrl-C: quit now
                return
            stop.set()
            say("\nstopping: no new requests; saving answers in flight (Ctrl-C again to quit now)")

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_interrupt)
        try:
            return await job(stop)
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
            if interactive and not quiet:
                print(file=sys.stderr)  # end the progress line

    return asyncio.run(main())


def run_with_progress(
    start: Callable[..., Awaitable[_T]],
    *,
    quiet: bool,
    progress: Callable[[Any], str],
    retries: Callable[..., str],
) -> _T:
    """A judge run (``start``: one judge's or a panel's) in a new event loop, as
    :func:`run_until_interrupted` runs it, called with its ``stop`` and its callbacks: the
    progress line (``progress`` renders the run's state; none when ``quiet``), the retries
    of a quiet run (``retries`` renders what ``on_retries`` is called with) and each warning,
    at once. A terminal gets the line rewritten in place twice a second, a log a line every
    five seconds."""
    interactive = sys.stderr.isatty()

    def show(state: Any) -> None:
        line = progress(state)
        # Rewritten in place with "\r": a line far wider than the terminal would scroll.
        show_line(line[:200] if interactive else line, interactive=interactive)

    def retried(*state: Any) -> None:
        say(retries(*state))

    def warned(line: str) -> None:
        say(("\n" if interactive else "") + f"warning: {line}")

    def job(stop: asyncio.Event) -> Awaitable[_T]:
        return start(
            stop=stop,
            on_progress=None if quiet else show,
            progress_interval=0.5 if interactive else 5.0,
            on_retries=retried if quiet else None,
            on_warning=warned,
        )

    return run_until_interrupted(job, interactive=interactive, quiet=quiet)
