"""``run --batch`` under the Batch API's enqueued-token limit, against the simulated judge.

The sim enforces the limit as OpenAI does (a batch over it ends ``failed`` with
``token_limit_exceeded``) and counts, per model, the peak of the tokens queued and how many
times each request body entered the queue (``batch_peak_queued_tokens``, ``batch_requests``):
so "never over the limit" and "no request submitted twice" are checked where the provider would
count them. Batches end at their second retrieval (``batch_polls = 2``), so they stay queued
while the client polls and the next files wait for room.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import (
    POLL,
    StudyFiles,
    keys_by_digest,
    run_batch,
    run_cli,
    start_process,
    summary_row,
)

from geval_async.judging.batch.ledger import BatchRecord
from geval_async.judging.batch.queue import QueueLimits, stated_limit
from geval_async.sim import SimServer
from geval_async.study.config import load_config
from geval_async.study.plan import first_request, plan_items
from geval_async.study.prepare import prepare_study

MODEL = "sim-judge"


def _tokens(study: StudyFiles) -> list[int]:
    """The client's estimate of each request's tokens (what it counts against the limit)."""
    plan = prepare_study(load_config(study.config))
    return [first_request(item, plan.config).est_tokens for item in plan_items(plan)]


def _limit_for(study: StudyFiles, sim: SimServer) -> int:
    """A limit a quarter of the study's tokens: four files or more, each request fits."""
    study.write_config(sim.base_url)
    tokens = _tokens(study)
    return max(sum(tokens) // 4, max(tokens))


def _assert_each_request_queued_once(sim: SimServer, study: StudyFiles, limit: int) -> None:
    assert set(sim.stats.batch_requests) == set(keys_by_digest(study))  # every request queued
    assert set(sim.stats.batch_requests.values()) == {1}  # and each one once
    assert 0 < sim.stats.batch_peak_queued_tokens[MODEL] <= limit


def _complete(study: StudyFiles) -> bool:
    status = run_cli("status", str(study.config))
    row = summary_row(status.stdout)
    return row["answered"] == row["items"] == 2 * study.n_records


def test_a_study_larger_than_the_configured_queue_completes_under_it(
    sim: SimServer, study: StudyFiles
) -> None:
    limit = _limit_for(study, sim)
    sim.settings.batch_polls = 2
    study.write_config(sim.base_url, limits={"batch_queue_tokens": limit})
    result = run_batch(study)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("submitted batch") >= 4
    assert "refused for the queue limit" not in result.stdout  # the limit was known: none was
    _assert_each_request_queued_once(sim, study, limit)
    assert _complete(study)


def test_the_limit_is_learned_from_a_batch_refused_for_it(
    sim: SimServer, study: StudyFiles
) -> None:
    limit = _limit_for(study, sim)
    sim.settings.batch_polls = 2
    sim.settings.batch_queue_tokens = limit  # the provider's; the config says nothing
    result = run_batch(study)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "refused for the queue limit: 48 requests back in line" in result.stdout
    assert "failed validation" not in result.stdout  # not reported as a failure of its requests
    _assert_each_request_queued_once(sim, study, limit)
    assert _complete(study)
    # The limit OpenAI's message states is kept for the next command, which reports it.
    status = run_cli("batch", "status", str(study.config))
    assert f"limit {limit:,} (learned from a batch the provider refused for it)" in status.stdout


def test_batch_status_shows_queued_running_and_finished_files(
    sim: SimServer, study: StudyFiles
) -> None:
    limit = _limit_for(study, sim)
    sim.settings.batch_polls = 3
    study.write_config(sim.base_url, limits={"batch_queue_tokens": limit})
    submitted = run_cli("batch", "submit", str(study.config))
    assert submitted.returncode == 0, submitted.stderr
    assert "the batch queue is full (limit" in submitted.stdout
    first = run_cli("batch", "status", str(study.config))  # the first retrieval: in_progress
    assert first.returncode == 0, first.stderr
    files = [line for line in first.stdout.splitlines() if line.startswith("batch_")]
    assert files and all(" running " in line for line in files)
    queued = sum(int(line.split()[4]) for line in files)
    assert 0 < queued <= limit
    assert f"tokens queued: {queued:,}, limit {limit:,} ([limits] batch_queue_tokens)" in (
        first.stdout
    )
    run_cli("batch", "status", str(study.config))
    ended = run_cli("batch", "status", str(study.config))  # the third: completed
    assert f"files: 0 queued, 0 running, {len(files)} finished" in ended.stdout
    assert "tokens queued: 0," in ended.stdout


@pytest.mark.parametrize("value", ["0", "-5", "1.5", '"lots"'])
def test_a_bad_batch_queue_tokens_is_one_line_naming_the_key(
    sim: SimServer, study: StudyFiles, value: str
) -> None:
    study.write_config(sim.base_url)
    text = study.config.read_text().replace(
        "[limits]\n", f"[limits]\nbatch_queue_tokens = {value}\n"
    )
    study.config.write_text(text)
    result = run_batch(study)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "batch_queue_tokens" in lines[0] and str(study.config) in lines[0]
    assert sim.stats.batches == 0 and not (study.cache / "batches").exists()


def test_the_limit_openais_message_states_is_read_else_what_was_queued_is_halved(
    tmp_path: Path,
) -> None:
    message = (
        "Enqueued token limit reached for gpt-4o-mini in organization org-abc. "
        "Limit: 2,000,000 enqueued tokens. Please try again once some in_progress batches "
        "have been completed."
    )
    assert stated_limit(message) == 2_000_000
    assert stated_limit("Enqueued token limit reached.") is None
    limits = QueueLimits(tmp_path)
    live = BatchRecord("gb-a", 10, status="in_progress", tokens=1_500_000)
    refused = BatchRecord("gb-b", 10, status="failed", tokens=900_000, queue_refusal=message)
    assert limits.learn("gpt-4o-mini", refused, [live, refused]) == 2_000_000
    # No number in the message: half of what was queued (the refused batch's tokens included).
    refused.queue_refusal = "Enqueued token limit reached."
    assert limits.learn("gpt-4o-mini", refused, [live]) == 1_200_000
    # A stated limit the client's own queue stays under: others share the queue; halve.
    small = BatchRecord("gb-c", 10, status="failed", tokens=100_000, queue_refusal=message)
    assert limits.learn("gpt-4o-mini", small, []) == 50_000
    assert QueueLimits(tmp_path).limit("gpt-4o-mini", 80_000).tokens == 50_000
    assert QueueLimits(tmp_path).limit("gpt-5-mini", 80_000).tokens == 80_000


# --- SIGKILL, then resume ---------------------------------------------------------------------


def _ledger(study: StudyFiles) -> list[dict[str, object]]:
    records = []
    for path in (study.cache / "batches").glob("*.json"):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # being replaced or collected just now
    return records


def _after_a_submit(sim: SimServer, study: StudyFiles, calls: int, batches: int) -> bool:
    return sim.stats.batches > batches  # batches.create has returned (the record may lag)


def _while_waiting(sim: SimServer, study: StudyFiles, calls: int, batches: int) -> bool:
    polled = sim.stats.batch_calls > calls + 2
    return polled and any(r.get("status") == "in_progress" for r in _ledger(study))


def _while_collecting(sim: SimServer, study: StudyFiles, calls: int, batches: int) -> bool:
    # A record is live and ended only from the poll that saw it end to the collect's end.
    polled = sim.stats.batch_calls > calls
    return polled and any(r.get("status") == "completed" for r in _ledger(study))


Point = Callable[[SimServer, StudyFiles, int, int], bool]


@pytest.mark.parametrize(
    "point", [_after_a_submit, _while_waiting, _while_collecting], ids=lambda f: f.__name__[1:]
)
def test_sigkill_then_resume_completes_with_no_request_queued_twice(
    sim: SimServer, study: StudyFiles, point: Point
) -> None:
    limit = _limit_for(study, sim)
    sim.settings.batch_polls = 2
    study.write_config(sim.base_url, limits={"batch_queue_tokens": limit})
    killed = False
    for _ in range(5):  # until a kill lands at the point (a race lost: resume and try again)
        calls, batches = sim.stats.batch_calls, sim.stats.batches
        process = start_process("run", str(study.config), "--batch", *POLL, quiet=True)
        try:
            deadline = time.monotonic() + 60
            while not point(sim, study, calls, batches) and process.poll() is None:
                assert time.monotonic() < deadline, "the point was never reached"
                time.sleep(0.001)
            process.send_signal(signal.SIGKILL)
        finally:
            process.wait(30)
        # The state the kill left shows it landed there (the ledger still says so).
        killed = process.returncode == -signal.SIGKILL and point(sim, study, calls, batches)
        if killed or process.returncode == 0:
            break
    assert killed, "no kill landed at the point"
    assert 0 < len(sim.stats.batch_requests) < len(keys_by_digest(study))  # work was left
    final = run_batch(study)
    assert final.returncode == 0, final.stdout + final.stderr
    _assert_each_request_queued_once(sim, study, limit)
    assert _complete(study)
    assert not list((study.cache / "batches").glob("*.json"))  # every batch collected


def test_a_request_larger_than_the_whole_queue_is_left_for_an_online_run(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    smallest = min(_tokens(study))
    study.write_config(sim.base_url, limits={"batch_queue_tokens": smallest - 1})
    result = run_batch(study)
    assert result.returncode == 1  # nothing answered: not a success
    assert "48 requests are larger than the whole batch queue" in result.stdout
    assert sim.stats.batches == 0  # nothing submitted that could never fit
    online = run_cli("run", str(study.config), "--quiet")
    assert online.returncode == 0, online.stderr
    assert sim.stats.received == 2 * study.n_records
