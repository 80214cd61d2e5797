"""Where a benchmark client's CPU went: the CPU seconds of each thread, and the context switches.

``bench/clients.py`` starts a :class:`ThreadClocks` where a contender's clock starts and puts
its :meth:`~ThreadClocks.report` in the contender's JSON line (benchmark 2's columns; see
bench/overhead.py). Linux only (``RUSAGE_THREAD``, ``/proc/self/task``).
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any


class ThreadClocks:
    """The CPU seconds of each thread and the context switches from now on (Linux).

    Each thread's own ``getrusage(RUSAGE_THREAD)`` is read as it ends (``Thread.run`` wrapped
    from now on, so a thread made earlier is not seen); the threads still alive at
    :meth:`report` are read from ``/proc/self/task``; the calling thread (the loop's) is read
    at both ends. Nothing runs per request.
    """

    def __init__(self) -> None:
        self.ended: list[tuple[str, float]] = []
        run = threading.Thread.run
        ended = self.ended

        def measured(thread: threading.Thread) -> None:
            try:
                run(thread)
            finally:
                usage = resource.getrusage(resource.RUSAGE_THREAD)
                ended.append((thread.name, usage.ru_utime + usage.ru_stime))

        threading.Thread.run = measured  # type: ignore[method-assign]
        self._loop0 = resource.getrusage(resource.RUSAGE_THREAD)
        self._process0 = resource.getrusage(resource.RUSAGE_SELF)
        self.started_monotonic = time.monotonic()

    def report(self) -> dict[str, Any]:
        """What the threads spent since the clocks started (call it from the same thread)."""
        ended_monotonic = time.monotonic()
        loop = resource.getrusage(resource.RUSAGE_THREAD)
        process = resource.getrusage(resource.RUSAGE_SELF)
        threads: Counter[str] = Counter()
        threads[threading.current_thread().name] = (
            loop.ru_utime + loop.ru_stime - self._loop0.ru_utime - self._loop0.ru_stime
        )
        for name, cpu in self.ended:
            threads[name] += cpu
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and thread.native_id is not None:
                threads[thread.name] += _task_cpu(thread.native_id)
        loop_name = threading.current_thread().name
        return {
            "started_monotonic": self.started_monotonic,
            "ended_monotonic": ended_monotonic,
            "threads": {name: round(cpu, 4) for name, cpu in threads.items()},
            "loop_cpu": threads[loop_name],
            "writer_cpu": threads["geval-writer"],
            "other_cpu": sum(v for k, v in threads.items() if k not in (loop_name, "geval-writer")),
            "voluntary_switches": process.ru_nvcsw - self._process0.ru_nvcsw,
            "involuntary_switches": process.ru_nivcsw - self._process0.ru_nivcsw,
            "loop_voluntary_switches": loop.ru_nvcsw - self._loop0.ru_nvcsw,
            "loop_involuntary_switches": loop.ru_nivcsw - self._loop0.ru_nivcsw,
        }


def _task_cpu(native_id: int) -> float:
    """CPU seconds of a live thread of this process, from /proc (0.0 where it cannot tell)."""
    try:
        stat = Path(f"/proc/self/task/{native_id}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
