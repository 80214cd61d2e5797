"""A study of thousands of criteria loads in work that grows with the criteria, not their square.

The work is counted, not timed: the criterion names are text that counts each comparison made
with it (a ``str`` whose ``__eq__`` counts), which is what a check by ``list.count`` or ``in``
on a list spends, while a lookup by hash compares a name once. Loading four times the criteria
must cost about four times the comparisons. The timings of ``status`` at many criteria are
bench/many_criteria.py's.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from conftest import NOT_PASSED, ROOT, StudyFiles

from geval_async.study.config import parse_config


class CountedName(str):
    """A criterion name that counts the comparisons made with it."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        CountedName.compared += 1
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        CountedName.compared += 1
        return str.__ne__(self, other)

    __hash__ = str.__hash__


def _document(study: StudyFiles, count: int) -> dict[str, Any]:
    """A study's TOML document as tomllib returns it, with ``count`` criteria."""
    return {
        "data": {"path": "records.jsonl", "id": "id"},
        "judge": {"model": "judge", "base_url": "http://127.0.0.1:9/v1"},
        "cache": {"path": "cache"},
        "criteria": [
            {
                "name": CountedName(f"c{i}"),
                "prompt": "prompts/clar.txt",
                "scale": [1, 5],
                "fields": ["text"],
            }
            for i in range(count)
        ],
        "meta": {"human": {CountedName(f"c{i}"): f"human.c{i}" for i in range(0, count, 2)}},
    }


def _comparisons(study: StudyFiles, count: int) -> int:
    document = _document(study, count)
    CountedName.compared = 0
    config = parse_config(document, study.root / "config.toml")
    for criterion in config.criteria:  # as the tables and reports look each one up
        config.criterion(criterion.name)
    return CountedName.compared


def test_a_study_of_many_criteria_loads_in_linear_work(study: StudyFiles) -> None:
    small, large = _comparisons(study, 1000), _comparisons(study, 4000)
    # Linear: four times the criteria, about four times the comparisons (a check by
    # list.count alone makes 16 times, 16 million of them).
    assert large <= 5 * max(small, 1), (small, large)
    assert large < 50_000, large


# Runs geval-async as ``python -m geval_async`` does, counting how often it opens the file
# whose path is argv[1] (the rest of argv is the command line); the count goes to stderr.
_COUNT_OPENS = """
import atexit, runpy, sys
target = sys.argv.pop(1)
opened = []
def hook(event, args):
    if event == "open" and str(args[0]) == target:
        opened.append(1)
sys.addaudithook(hook)
atexit.register(lambda: print(f"opened {len(opened)} times", file=sys.stderr))
runpy.run_module("geval_async", run_name="__main__", alter_sys=True)
"""


def test_status_reads_the_config_once(judged: StudyFiles) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}
    config = str(judged.config)
    result = subprocess.run(
        [sys.executable, "-c", _COUNT_OPENS, config, "status", config],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "opened 1 times" in result.stderr
