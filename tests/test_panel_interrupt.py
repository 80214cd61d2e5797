"""Ctrl-C on a panel run: a real ``python -m geval_async run`` of a
panel of slow simulated judges is sent SIGINT; it exits 130 with the resume line, every judge's
answers received so far are in the cache, and the rerun sends each judge only what it lacks,
as its server's ``/sim/stats`` counts it.
"""

from __future__ import annotations

import hashlib
import json
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from conftest import (
    StudyFiles,
    cache_snapshot,
    run_cli,
    running_sims,
    sim_judges,
    start_process,
    wait_for,
)

from geval_async.sim import SimServer, SimSettings
from geval_async.study.config import load_config
from geval_async.study.plan import first_request, plan_items
from geval_async.study.prepare import prepare_study

NAMES = ("a", "b", "c")


@pytest.fixture
def slow_sims() -> Iterator[dict[str, SimServer]]:
    """Three simulated judges, each answering after 300 ms."""
    with running_sims(NAMES, lambda: SimSettings(latency_ms=300)) as servers:
        yield servers


def keys_of_judges(config: Path) -> dict[str, dict[str, str]]:
    """Per judge: sha256 of each request body as sent (what its sim counts) -> cache key."""
    panel = load_config(config)
    keys = {}
    for name in panel.judge_names:
        plan = prepare_study(panel.for_judge(name))
        keys[name] = {
            hashlib.sha256(orjson.dumps(request.body)).hexdigest(): request.key
            for request in (first_request(item, plan.config) for item in plan_items(plan))
        }
    return keys


def sim_stats(server: SimServer) -> dict[str, object]:
    """``GET /sim/stats`` of a simulated judge."""
    with urllib.request.urlopen(f"{server.root_url}/sim/stats", timeout=10) as response:
        stats: dict[str, object] = json.loads(response.read())
    return stats


def test_ctrl_c_on_a_panel_keeps_every_judges_answers_and_the_rerun_sends_the_rest(
    study: StudyFiles, slow_sims: dict[str, SimServer], tmp_path: Path
) -> None:
    config = study.write_panel(sim_judges(slow_sims))  # 4 requests in flight a judge
    log = tmp_path / "run.log"
    process = start_process("run", str(config), log=log)
    try:
        # every judge has answered something and has requests in flight
        wait_for(
            lambda: all(s.stats.answered and s.stats.in_flight >= 2 for s in slow_sims.values()),
            "every judge answering with requests in flight",
            process,
        )
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
    output = log.read_text(encoding="utf-8")
    assert code == 130, output
    assert "interrupted: answers received so far are saved; resume with: geval-async run" in output
    assert "stopping: no new requests; saving answers in flight" in output
    assert "Traceback" not in output

    keys = keys_of_judges(config)
    items = 2 * study.n_records
    stored = set(cache_snapshot(study.cache))
    for name, server in slow_sims.items():
        answered = {keys[name][digest] for digest in sim_stats(server)["answered"]}  # type: ignore[attr-defined]
        # what this judge's server answered before the process ended, and nothing else of its
        assert stored & set(keys[name].values()) == answered, name
        assert 0 < len(answered) < items, name

    resumed = run_cli("run", str(config), "--quiet")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    for name, server in slow_sims.items():
        answered = sim_stats(server)["answered"]
        assert isinstance(answered, dict)
        assert set(answered) == set(keys[name]), f"judge {name}: every item answered"
        assert set(answered.values()) == {1}, f"judge {name}: an item was asked twice"
    assert len(cache_snapshot(study.cache)) == 3 * items
