"""A judge run's one event loop, stopped gently by Ctrl-C (or SIGTERM) and at once by a second.

``run`` on one judge and on a panel both start their loop here: the first signal sets the
run's stop event (no new requests; answers in flight are saved), the second cancels the run.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["run_until_interrupted", "say", "show_line"]

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
