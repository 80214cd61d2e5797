"""Waiting for another process's lock on a cache folder: in short slices, and saying whose.

Two runs on one folder take turns at its write lock for a few milliseconds at a time. A
process that holds it for long (a stalled run, a ``sqlite3`` shell left open in a
transaction, a backup tool) would otherwise keep a run inside one long SQLite call, where
neither Ctrl-C nor the end of the run can reach it. So SQLite waits at most ``LOCK_SLICE``
seconds at a time and the loop here looks again: a caller's ``stop`` ends the wait between
slices, and after ``LOCK_PATIENCE`` seconds the wait ends with one line naming the processes
that have the folder's database open. A wait of more than ``_SAY_AFTER`` seconds says so on
stderr, with those processes, once.

diskcache's own opening of a folder writes its settings through a loop of its own that waits
a minute for a lock inside the one call, saying nothing; :func:`said_if_slow` says that wait
too.

While the main thread waits, Ctrl-C (or SIGTERM) raises KeyboardInterrupt at once: a run's
event loop handles both itself, but cannot while its thread is held here, so the wait takes
the signals over until it ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import diskcache

from ...errors import CacheError

__all__ = ["LOCK_PATIENCE", "LOCK_SLICE", "lock_holders", "said_if_slow", "wait_for_lock"]

_T = TypeVar("_T")

LOCK_SLICE = 0.25  # seconds SQLite itself waits for a lock before the loop looks again
LOCK_PATIENCE = 60.0  # seconds a folder's lock is waited for in all
_SAY_AFTER = 2.0  # seconds of waiting before the wait is said on stderr


def _is_lock(exc: BaseException) -> bool:
    if isinstance(exc, diskcache.Timeout):
        return True
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc)
    )


def wait_for_lock(
    folder: Path,
    attempt: Callable[[], _T],
    *,
    stop: Callable[[], bool] | None = None,
    patience: float = LOCK_PATIENCE,
) -> _T:
    """``attempt()``, tried again while another process holds a lock it needs.

    Raises:
        CacheError: the lock was still held after ``patience`` seconds, or ``stop()`` said
            to give up; the line names the processes that have the database open.
    """
    started = time.monotonic()
    said = False
    with _interruptible():
        while True:
            try:
                return attempt()
            except (diskcache.Timeout, sqlite3.OperationalError) as exc:
                if not _is_lock(exc):
                    raise
                waited = time.monotonic() - started
                gave_up = stop is not None and stop()
                if not gave_up and waited < patience:
                    if not said and waited >= _SAY_AFTER:
                        said = True
                        _say_waiting(folder)
                    continue
                how = "gave up waiting for" if gave_up else f"waited {patience:g} s for"
                raise CacheError(
                    f"{folder}: {how} the lock of its cache.db, held by another process "
                    f"({lock_holders(folder / 'cache.db')}); let that process finish or end "
                    "it, then run again (what was stored is kept)"
                ) from exc


@contextlib.contextmanager
def said_if_slow(folder: Path) -> Iterator[None]:
    """Say the wait, as :func:`wait_for_lock` does, when what runs inside has not ended after
    ``_SAY_AFTER`` seconds: for diskcache's opening of a folder, which waits up to a minute for
    a lock inside the one call, saying nothing (a Ctrl-C still ends it: the main thread sleeps
    between its tries)."""
    timer = threading.Timer(_SAY_AFTER, _say_waiting, (folder,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _say_waiting(folder: Path) -> None:
    print(
        f"waiting for the lock of {folder / 'cache.db'}, held by another process "
        f"({lock_holders(folder / 'cache.db')}); Ctrl-C to stop",
        file=sys.stderr,
        flush=True,
    )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C, or SIGTERM (a job scheduler's stop), raises KeyboardInterrupt inside (in the
    main thread; elsewhere nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        signum: signal.signal(signum, handler)
        for signum, handler in (
            (signal.SIGINT, signal.default_int_handler),
            (signal.SIGTERM, _interrupt),
        )
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def lock_holders(database: Path) -> str:
    """Who has ``database`` (or its write-ahead log) open besides this process, as
    ``pid 123 (geval-async run ...)``; read from /proc where there is one."""
    names = {str(database), f"{database}-wal", f"{database}-shm"}
    try:
        names |= {os.path.realpath(name) for name in names}
        pids = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return "a process this system does not name"
    found = []
    for pid in pids:
        if int(pid) == os.getpid():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if not any(os.readlink(f"/proc/{pid}/fd/{fd}") in names for fd in fds):
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                # One line, whatever the command holds (a script given with -c has newlines).
                command = " ".join(
                    cmdline.read().replace(b"\0", b" ").decode(errors="replace").split()
                )
        except OSError:
            continue  # gone, or another user's: not ours to look at
        found.append(f"pid {pid} ({command[:80]})")
    return ", ".join(found) if found else "a process not visible from here"
