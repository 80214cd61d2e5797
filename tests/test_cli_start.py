"""The command line starts light: no command but ``sim`` and ``demo`` loads the simulated judge.

Building the parser used to import the simulated judge (and with it aiohttp.web) for every
command, just to list the ``sim`` command's flags. Each check runs in a fresh interpreter, so
what this test process has imported cannot hide an import.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from conftest import ROOT, StudyFiles, run_process

from geval_async.cli.app import build_parser
from geval_async.judging.store.cache import JudgeCache

HEAVY = ("geval_async.sim", "aiohttp.web")


def _loaded_after(code: str) -> list[str]:
    """The HEAVY modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys\nprint(sorted(m for m in sys.modules if m in {HEAVY!r}))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return eval(result.stdout.strip().splitlines()[-1])  # noqa: S307 - our own printed list


def _commands() -> list[str]:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(commands.choices)


def test_building_the_parser_leaves_the_simulated_judge_out() -> None:
    assert _loaded_after("import geval_async.cli.app as app; app.build_parser()") == []
    # ... and parsing a command other than sim does too.
    parse = "from geval_async.cli.app import build_parser; build_parser().parse_args"
    assert _loaded_after(f"{parse}(['status', 'x.toml'])") == []
    # The probe can see the imports it is looking for: choosing `sim` loads them.
    assert _loaded_after(f"{parse}(['sim'])") == sorted(HEAVY)


def test_a_command_runs_without_the_simulated_judge(study: StudyFiles) -> None:
    study.write_config("http://127.0.0.1:9/v1")
    with JudgeCache(study.cache):  # status reads a cache folder that is there (an empty one)
        pass
    code = f"from geval_async.cli import main; assert main(['status', {str(study.config)!r}]) == 0"
    assert _loaded_after(code) == []


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_its_help(command: str) -> None:
    # In a fresh `python -m geval_async`: every command's real process, stdout and exit code
    # once (the other tests run most commands in their own process, with run_cli).
    result = run_process(command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: geval-async {command}")
    if command == "sim":  # the flags added when sim is chosen are in its help
        assert "--latency-ms" in result.stdout and "--spurious-429" in result.stdout


def test_the_judge_stage_loads_no_table_library() -> None:
    """A run's memory is the plan and the answers in flight: the scoring stage's tables
    (pandas, numpy, scipy: some 80 MB resident) are not imported to judge, even where a study's
    draws are spent by need (its rounds read ratings, not tables)."""
    code = (
        "import geval_async.cli.app as app, geval_async.api, geval_async.judging.run.runner\n"
        "from geval_async.scoring.scores.draws import next_round\n"
        "app.build_parser().parse_args(['run', 'x.toml'])\n"
        "import sys\nprint(sorted(m for m in ('pandas', 'numpy', 'scipy') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
