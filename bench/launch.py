"""Run a command as the child of a fresh, small interpreter, so that its peak RSS is its own.

    python bench/launch.py FD COMMAND [ARG ...]

Linux counts in a process's peak resident set (``ru_maxrss``, what ``os.wait4`` and
``getrusage`` report) the image of the process it was spawned from: ``exec`` records the old
image's high-water mark before it replaces it. A command that a benchmark holding 300 MB
spawns reports at least 300 MB, whatever it used itself (``bench/million.py`` did, once its
own process had grown by the simulated judge's statistics of a million requests). Started
from here instead, the command is forked from this interpreter's few MB.

Writes to file descriptor FD two JSON lines: ``{"pid"}`` once the command is forked (the
benchmark samples its resident set by that pid), then ``{"status", "wall", "cpu",
"maxrss_kb"}`` once it has ended (``status`` as ``os.wait4`` gives it, ``wall`` from the fork).
"""

import json
import os
import sys
import time


def main() -> None:
    fd, command = int(sys.argv[1]), sys.argv[2:]
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(fd)
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    os.write(fd, json.dumps({"pid": pid}).encode() + b"\n")
    _, status, usage = os.wait4(pid, 0)
    ended = {
        "status": status,
        "wall": time.perf_counter() - started,
        "cpu": usage.ru_utime + usage.ru_stime,
        "maxrss_kb": usage.ru_maxrss,
    }
    os.write(fd, json.dumps(ended).encode() + b"\n")


if __name__ == "__main__":
    main()
