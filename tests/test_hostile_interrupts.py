"""Ctrl-C where it is least expected: while a command that only reads is reading, after a
command has ended, and while the judge holds the run's first GET unanswered.

The commands run as real processes. Where the Ctrl-C must land at one exact point, the process
sends it to itself there, through the interpreter's own hooks (an audit hook on opening a file,
an exit handler), so that the test never guesses a moment with a sleep.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from conftest import NOT_PASSED, ROOT, StudyFiles, start_process

# Runs geval-async as ``python -m geval_async`` does, with a Ctrl-C sent to itself the first
# time it opens a file whose path ends with argv[1] (the rest of argv is the command line).
_AT_OPEN = """
import os, runpy, signal, sys
target = sys.argv.pop(1)
sent = []
def hook(event, args):
    if event == "open" and not sent and str(args[0]).endswith(target):
        sent.append(True)
        signal.raise_signal(signal.SIGINT)
sys.addaudithook(hook)
runpy.run_module("geval_async", run_name="__main__", alter_sys=True)
"""

# The same, with the Ctrl-C sent once the command has ended: from an exit handler, while the
# interpreter shuts down.
_AT_EXIT = """
import atexit, os, runpy, signal
atexit.register(os.kill, os.getpid(), signal.SIGINT)
runpy.run_module("geval_async", run_name="__main__", alter_sys=True)
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


@pytest.mark.parametrize("command", ["status", "score"])
def test_a_command_that_only_reads_says_nothing_of_saved_answers_when_interrupted(
    judged: StudyFiles, command: str
) -> None:
    result = _python(_AT_OPEN, judged.records.name, command, str(judged.config))
    assert result.returncode == 130, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "interrupted"
    assert "answers received so far are saved" not in result.stderr
    assert "Traceback" not in result.stderr


def test_a_ctrl_c_after_report_has_ended_exits_130_without_python_noise(
    judged: StudyFiles,
) -> None:
    result = _python(_AT_EXIT, "report", str(judged.config))
    assert "Exception ignored" not in result.stderr
    assert "KeyboardInterrupt" not in result.stderr
    assert result.returncode == 130, result.stderr
    assert (judged.output / "t_report.md").is_file()


class SilentServer:
    """A TCP server on 127.0.0.1 that takes every connection and never answers a byte."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.held.append(connection)
            self.accepted.set()

    def close(self) -> None:
        self.listener.close()
        for connection in self.held:
            connection.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def test_one_ctrl_c_ends_a_run_whose_first_get_is_never_answered(
    study: StudyFiles, silent: SilentServer
) -> None:
    study.write_config(
        f"http://127.0.0.1:{silent.port}/v1", limits={"timeout": 600, "concurrency": 2}
    )
    process = start_process("run", str(study.config), "--quiet")
    try:
        assert silent.accepted.wait(60), "the run never asked the judge"
        process.send_signal(signal.SIGINT)
        # The GET alone would give up after 10 s: the run must end well before that.
        _, stderr = process.communicate(timeout=5)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "interrupted: answers received so far are saved" in stderr
    assert "Traceback" not in stderr
