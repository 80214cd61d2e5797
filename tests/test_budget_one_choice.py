"""The dry run and the ``--max-cost`` cap on an endpoint that refuses ``n`` > 1 (the simulated
judge's ``anthropic-compat`` profile): once a run has learned it, a request of n answers is
sent as n requests of one, each carrying the prompt. The estimate counts those requests and
prompts, and the cap charges each request ``max_tokens`` once, so a cap of exactly the
estimate lets the run finish."""

from __future__ import annotations

import json
import re

from conftest import StudyFiles, run_cli

from geval_async.sim import SimServer

PRICE_IN, PRICE_OUT = 10_000.0, 20_000.0  # USD per million tokens: a request about a dollar
N = 3  # the test study's answers per item


def _dry_run(study: StudyFiles, criterion: str, *, learned: bool) -> tuple[int, int, int]:
    """(requests to send, prompt tokens, completion tokens) of ``run --dry-run``."""
    done = run_cli("run", str(study.config), "--criteria", criterion, "--dry-run")
    assert done.returncode == 0, done.stderr
    note = f"gives one answer a request (an earlier run learned it refuses n > 1): an item's {N}"
    assert (note in done.stdout) is learned, done.stdout
    requests = re.search(r"requests to send: (\d+)", done.stdout)
    tokens = re.search(r"estimated tokens: \d+ \((\d+) prompt \+ (\d+) completion", done.stdout)
    assert requests is not None and tokens is not None, done.stdout
    return int(requests[1]), int(tokens[1]), int(tokens[2])


def _spent(study: StudyFiles) -> list[float]:
    """The estimated USD of each run, as spend.jsonl records it."""
    lines = (study.cache / "spend.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["usd"] for line in lines]


def test_a_learned_one_choice_endpoint_is_estimated_and_capped_as_it_is_sent(
    sim: SimServer, study: StudyFiles
) -> None:
    sim.settings.profile = "anthropic-compat"
    study.write_config(
        sim.base_url,
        prices={"sim-judge": [PRICE_IN, PRICE_OUT]},
        limits={"concurrency": 2, "backoff": 0.01},
    )
    unknown = _dry_run(study, "fit", learned=False)  # nothing learned yet: a request of n per item
    assert unknown[0] == study.n_records
    learned_run = run_cli("run", str(study.config), "--criteria", "clar", "--quiet")
    assert learned_run.returncode == 0, learned_run.stderr
    assert "n = 1 only" in learned_run.stdout

    requests, prompt, completion = _dry_run(study, "fit", learned=True)
    assert requests == N * study.n_records
    assert (prompt, completion) == (N * unknown[1], unknown[2])  # the prompt paid n times

    estimate = (prompt * PRICE_IN + completion * PRICE_OUT) / 1_000_000
    cap = sum(_spent(study)) + estimate + 1e-6
    before = sim.stats.by_status.copy()
    done = run_cli(
        "run", str(study.config), "--criteria", "fit", "--quiet", "--max-cost", f"{cap:.6f}"
    )
    assert done.returncode == 0, done.stderr
    assert sim.stats.by_status[200] - before[200] == requests  # the estimate's requests
    assert sim.stats.by_status[400] == before[400]  # n = 1 from the first request on
    assert abs(_spent(study)[-1] - estimate) < 1e-6  # charged as estimated
