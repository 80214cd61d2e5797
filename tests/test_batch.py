"""Batch jobs against the simulated judge's Batch API: real HTTP, real caches, real processes.

The server's own counts (``SimStats.batches``, ``batch_lines``, ``received``) say what was
submitted and sent, so "nothing paid twice" is checked where the bill would come from.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
from conftest import (
    POLL,
    DemoRun,
    StudyFiles,
    azure_judge,
    cache_snapshot,
    run_batch,
    run_cli,
    run_process,
    start_process,
    summary_cells,
)
from hypothesis import given
from hypothesis import strategies as st

from geval_async.judging.store.cache import CachedResponse, JudgeCache
from geval_async.sim import SimServer


def _items(study: StudyFiles) -> int:
    return 2 * study.n_records  # two criteria, one request per item (n in one request)


def _choices_by_key(cache: Path) -> dict[str, list[object]]:
    """Every answer's choices in a cache folder, by key (refusals and other records left out)."""
    out = {}
    for key, raw in cache_snapshot(cache).items():
        try:
            entry = CachedResponse.decode(raw)
        except (ValueError, TypeError):
            continue  # not an answer (the cache's own bookkeeping)
        if entry.ok:
            out[key] = entry.choices()
    return out


def test_batch_run_scores_exactly_as_online(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    online = run_cli("run", str(study.config), "--quiet", "--cache", str(study.root / "online"))
    assert online.returncode == 0, online.stderr
    sent_online = sim.stats.received

    result = run_batch(study)
    assert result.returncode == 0, result.stderr
    assert sim.stats.batches == 1 and sim.stats.batch_lines == _items(study)
    assert sim.stats.received == sent_online  # the batch sent no online request
    assert summary_cells(result.stdout) == [str(_items(study)), str(_items(study)), "0", "0"]

    tables = []
    for cache, out in ((study.root / "online", "out-online"), (study.cache, "out-batch")):
        scored = run_cli(
            "score", str(study.config), "--cache", str(cache), "--output", str(study.root / out)
        )
        assert scored.returncode == 0, scored.stderr
        tables.append((study.root / out / "scores" / "t_long.csv").read_text())
    assert tables[0] == tables[1]

    rerun = run_batch(study)
    assert rerun.returncode == 0, rerun.stderr
    assert sim.stats.batches == 1  # nothing left to submit


def test_sigkill_while_waiting_then_rerun_attaches_without_a_second_submit(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    sim.settings.batch_seconds = 3600.0
    waiting = start_process("run", str(study.config), "--batch", *POLL, quiet=True)
    try:
        deadline = time.monotonic() + 60
        ledger = study.cache / "batches"
        while not (sim.stats.batches == 1 and _submitted(ledger)):
            assert waiting.poll() is None, "the waiting run ended early"
            assert time.monotonic() < deadline, "no batch was submitted"
            time.sleep(0.05)
        time.sleep(0.3)  # a few polls while the batch runs
        waiting.send_signal(signal.SIGKILL)
    finally:
        waiting.wait(30)

    status = run_cli("status", str(study.config))
    assert summary_cells(status.stdout) == [str(_items(study)), "0", "0", "0", str(_items(study))]

    online = run_cli("run", str(study.config), "--quiet")
    assert online.returncode == 1  # every item is in the live batch: nothing sent online
    assert sim.stats.received == 0
    assert f"{_items(study)} items are in live batch jobs" in online.stdout

    sim.settings.batch_seconds = 0.0
    rerun = run_batch(study)
    assert rerun.returncode == 0, rerun.stderr
    assert sim.stats.batches == 1 and sim.stats.batch_lines == _items(study)
    assert sim.stats.received == 0
    assert summary_cells(run_cli("status", str(study.config)).stdout) == [
        str(_items(study))
    ] * 2 + [
        "0",
        "0",
    ]


def _submitted(ledger: Path) -> bool:
    return any(
        json.loads(path.read_text()).get("state") == "submitted" for path in ledger.glob("*.json")
    )


def test_expiry_and_partial_errors_leave_exactly_those_items_missing(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    sim.settings.batch_failed_lines = 0.15
    sim.settings.batch_expired_lines = 0.15
    result = run_batch(study)
    assert result.returncode == 1
    assert " expired: " in result.stdout
    out = orjson.loads(_sim_file(sim, "error"))
    unanswered = len(out)
    assert 0 < unanswered < _items(study)
    _, answered, refused, missing = (int(count) for count in summary_cells(result.stdout))
    assert (answered, refused, missing) == (_items(study) - unanswered, 0, unanswered)

    sim.settings.batch_failed_lines = sim.settings.batch_expired_lines = 0.0
    online = run_cli("run", str(study.config), "--quiet")
    assert online.returncode == 0, online.stderr
    assert sim.stats.received == unanswered  # exactly the missing ones, online
    assert sim.stats.batches == 1


def _sim_file(sim: SimServer, kind: str) -> bytes:
    """The lines of the last batch's output or error file, as a JSON array."""
    from openai import OpenAI

    client = OpenAI(api_key="unused", base_url=sim.base_url)
    batch = next(iter(client.batches.list()))
    file_id = batch.error_file_id if kind == "error" else batch.output_file_id
    assert file_id is not None
    lines = client.files.content(file_id).content.splitlines()
    return b"[" + b",".join(lines) + b"]"


def test_refused_lines_are_stored_as_refusals(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    sim.settings.batch_failed_lines = 0.2
    sim.settings.batch_failure_status = 400
    result = run_batch(study)
    assert result.returncode == 1
    refused = len(orjson.loads(_sim_file(sim, "error")))
    assert refused > 0
    assert summary_cells(result.stdout)[2:] == [str(refused), "0"]
    rerun = run_cli("run", str(study.config), "--quiet")
    assert sim.stats.received == 0  # a refusal is not paid for twice
    assert rerun.returncode == 1


def test_two_processes_never_submit_the_same_request_twice(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    sim.settings.batch_seconds = 3600.0
    results: list[subprocess.CompletedProcess[str]] = []

    def submit() -> None:
        # Two real processes: what the claims must keep apart.
        results.append(run_process("batch", "submit", str(study.config)))

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    again = run_cli("batch", "submit", str(study.config))
    assert again.returncode == 0, again.stderr
    assert sim.stats.batch_lines == _items(study)  # each request in exactly one batch
    assert 1 <= sim.stats.batches <= 2

    sim.settings.batch_seconds = 0.0
    collected = run_cli("batch", "collect", str(study.config))
    assert collected.returncode == 0, collected.stderr
    assert summary_cells(collected.stdout) == [str(_items(study))] * 2 + ["0", "0"]


def test_export_then_import_reproduces_the_cache(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    assert run_batch(study).returncode == 0
    fresh = study.root / "fresh-cache"
    exported = study.root / "in.jsonl"
    result = run_cli("batch", "export", str(study.config), str(exported), "--cache", str(fresh))
    assert result.returncode == 0, result.stderr
    lines = exported.read_bytes().splitlines()
    assert len(lines) == _items(study) and sim.stats.batches == 1  # export sends nothing

    output = study.root / "out.jsonl"
    output.write_bytes(
        _run_elsewhere(sim, exported) + b'{"custom_id": "g1-not-ours", '
        b'"response": {"status_code": 200, "body": {}}, "error": null}\n'
    )
    imported = run_cli("batch", "import", str(study.config), str(output), "--cache", str(fresh))
    assert imported.returncode == 0, imported.stderr
    assert "1 lines name no request of this study" in imported.stdout
    answers = _choices_by_key(study.cache)
    assert len(answers) == _items(study)
    assert _choices_by_key(fresh) == answers


def test_imported_real_answers_replace_the_simulated_judges(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    online = run_cli("run", str(study.config), "--quiet")
    assert online.returncode == 0, online.stderr
    assert "SIMULATED" in run_cli("score", str(study.config)).stdout
    exported = study.root / "in.jsonl"
    result = run_cli("batch", "export", str(study.config), str(exported))
    assert result.returncode == 0, result.stderr
    # For another engine the synthetic answers are missing: every request is exported.
    assert len(exported.read_bytes().splitlines()) == _items(study)

    output = study.root / "out.jsonl"
    output.write_bytes(_run_elsewhere(sim, exported))
    imported = run_cli("batch", "import", str(study.config), str(output))
    assert imported.returncode == 0, imported.stderr
    assert f"{_items(study)} answers" in imported.stdout
    scored = run_cli("score", str(study.config))
    assert scored.returncode == 0, scored.stderr
    assert "SIMULATED" not in scored.stdout  # no synthetic answer is left in the scores


def _run_elsewhere(sim: SimServer, exported: Path) -> bytes:
    """What another engine's run-batch would write: here the sim's Batch API, by hand."""
    from openai import OpenAI

    client = OpenAI(api_key="unused", base_url=sim.base_url)
    uploaded = client.files.create(file=exported, purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    batch = client.batches.retrieve(batch.id)
    assert batch.status == "completed" and batch.output_file_id is not None
    return client.files.content(batch.output_file_id).content


def test_import_of_a_bad_file_says_where_and_stores_nothing(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    bad = study.root / "bad.jsonl"
    bad.write_text('{"custom_id": "x", "response": {"status_code": 200, "body": {}}}\nnot json\n')
    result = run_cli("batch", "import", str(study.config), str(bad))
    assert result.returncode == 2
    assert f"{bad}: line 2 is not JSON" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not study.cache.exists() or len(_choices_by_key(study.cache)) == 0


def test_failed_validation_says_why_in_one_line(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    sim.settings.batch_invalid = "The model sim-judge does not support batches. (sim)"
    result = run_batch(study)
    assert result.returncode == 1
    assert "failed validation: The model sim-judge does not support batches. (sim)" in result.stdout
    assert summary_cells(result.stdout) == [str(_items(study)), "0", "0", str(_items(study))]
    sim.settings.batch_invalid = None
    assert run_cli("run", str(study.config), "--quiet").returncode == 0  # claims were released
    assert sim.stats.received == _items(study)


def test_azure_form(sim: SimServer, study: StudyFiles) -> None:
    sim.settings.api_key = "azure-test-key"
    study.write_config(sim.base_url, judge=azure_judge(sim, "2024-10-21"))
    result = run_cli(
        "run", str(study.config), "--batch", "--quiet", *POLL, env={"AZ_KEY": "azure-test-key"}
    )
    assert result.returncode == 0, result.stderr
    assert sim.stats.batches == 1 and sim.stats.batch_lines == _items(study)
    assert "azure-test-key" not in result.stdout + result.stderr


def test_max_cost_caps_what_a_submit_commits(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url, judge={"model": "my-judge"}, prices={"my-judge": [100, 100]})
    dry = run_cli("run", str(study.config), "--dry-run")
    online_cost, batch_cost = (float(p.split()[0]) for p in dry.stdout.split("$")[1:3])
    assert abs(batch_cost - online_cost / 2) <= 0.01  # half, to the cent shown
    result = run_cli("batch", "submit", str(study.config), "--max-cost", str(batch_cost / 2))
    assert result.returncode == 0, result.stderr
    assert "held back by --max-cost" in result.stdout
    assert 0 < sim.stats.batch_lines < _items(study)
    assert os.path.isdir(study.cache / "batches")
    # The cap is the study's: a second submit may only spend what the first one left.
    lines = sim.stats.batch_lines
    again = run_cli("batch", "submit", str(study.config), "--max-cost", str(batch_cost / 2))
    assert again.returncode == 0, again.stderr
    assert "held back by --max-cost" in again.stdout and sim.stats.batch_lines == lines


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_submit_killed_between_create_and_record_is_attached(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    sim.settings.batch_seconds = 3600.0
    assert run_cli("batch", "submit", str(study.config)).returncode == 0
    # Rewind the record to what a SIGKILL right after batches.create leaves behind: the
    # input file is named, the batch is not.
    record_path = next((study.cache / "batches").glob("*.json"))
    record = json.loads(record_path.read_text())
    record.update(state="uploaded", batch_id=None, status=None, pid=_dead_pid())
    record_path.write_text(json.dumps(record))

    status = run_cli("batch", "status", str(study.config))
    assert status.returncode == 0, status.stderr
    assert "batch_" in status.stdout and "in_progress" in status.stdout
    assert sim.stats.batches == 1  # found by its input file, not created again
    sim.settings.batch_seconds = 0.0
    assert run_batch(study).returncode == 0
    assert sim.stats.batches == 1 and sim.stats.batch_lines == _items(study)


def test_a_submit_killed_after_upload_is_finished_by_the_next_command(
    sim: SimServer, study: StudyFiles
) -> None:
    from openai import OpenAI

    from geval_async.judging.batch.files import input_line
    from geval_async.judging.batch.ledger import UPLOADED, Ledger
    from geval_async.judging.store.claims import Claims
    from geval_async.judging.store.coverage import item_states
    from geval_async.study.config import load_config
    from geval_async.study.prepare import prepare_study

    study.write_config(sim.base_url)
    # What a submit killed right after the upload leaves: a record naming the uploaded file,
    # the requests claimed for it.
    plan = prepare_study(load_config(study.config))
    with JudgeCache(study.cache) as cache:
        requests = [r for s in item_states(plan, cache) for r in s.missing]
    ledger = Ledger(study.cache)
    record = ledger.new(len(requests))
    with Claims(study.cache, 60) as claims:
        claims.claim_for_batch([r.key for r in requests], record.name)
    ledger.save_keys(record, [r.key for r in requests])
    ledger.input_path(record).write_bytes(
        b"".join(input_line(r, plan.config.judge) for r in requests)
    )
    path = ledger.input_path(record)
    uploaded = OpenAI(api_key="unused", base_url=sim.base_url).files.create(
        file=path, purpose="batch"
    )
    record.input_file_id, record.state, record.pid = uploaded.id, UPLOADED, _dead_pid()
    ledger.save(record)

    online = run_cli("run", str(study.config), "--quiet")
    assert sim.stats.received == 0 and online.returncode == 1  # claimed: not sent online
    result = run_batch(study)
    assert result.returncode == 0, result.stderr
    assert sim.stats.batches == 1 and sim.stats.batch_lines == _items(study)
    assert "submitted batch" not in result.stdout  # attached, nothing new submitted


def test_input_files_are_split_at_the_line_limit(sim: SimServer, study: StudyFiles) -> None:
    import asyncio

    from geval_async.judging.batch.control import BatchControl
    from geval_async.judging.batch.provider import make_client
    from geval_async.judging.store.claims import Claims
    from geval_async.study.config import load_config
    from geval_async.study.prepare import prepare_study

    study.write_config(sim.base_url)
    plan = prepare_study(load_config(study.config))

    async def submit() -> int:
        with JudgeCache(study.cache) as cache, Claims(study.cache, 60) as claims:
            async with make_client(plan, None) as client:
                control = BatchControl(plan, cache, client)
                records, _ = await control.submit(claims, max_lines=10)
                return len(records)

    assert asyncio.run(submit()) == 5  # 48 requests, 10 a file
    assert sim.stats.batches == 5 and sim.stats.batch_lines == _items(study)
    result = run_batch(study)
    assert result.returncode == 0, result.stderr
    assert sim.stats.batches == 5
    # Five batches collected by one command (the plan walked once for all of them): every
    # line of every file is stored under its own item.
    assert summary_cells(result.stdout) == [str(_items(study)), str(_items(study)), "0", "0"]
    assert len(_choices_by_key(study.cache)) == _items(study)


@given(
    sizes=st.lists(st.integers(min_value=1, max_value=50), max_size=60),
    max_lines=st.integers(min_value=1, max_value=8),
    max_bytes=st.integers(min_value=50, max_value=200),
)
def test_split_lines_keeps_every_line_within_the_limits(
    sizes: list[int], max_lines: int, max_bytes: int
) -> None:
    from geval_async.judging.batch.files import split_lines

    lines = [(f"k{i}", b"x" * size) for i, size in enumerate(sizes)]
    numbered = list(split_lines(lines, max_lines=max_lines, max_bytes=max_bytes))
    assert [(key, line) for _, key, line in numbered] == lines
    files = [number for number, _, _ in numbered]
    assert files == sorted(files) and set(files) == set(range(len(set(files))))
    chunks = [[line for n, _, line in numbered if n == number] for number in set(files)]
    for chunk in chunks:
        assert 1 <= len(chunk) <= max_lines
        assert sum(len(line) for line in chunk) <= max_bytes


def test_cancel_then_collect_leaves_the_rest_to_an_online_run(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    sim.settings.batch_seconds = 3600.0
    assert run_cli("batch", "submit", str(study.config)).returncode == 0
    cancelled = run_cli("batch", "cancel", str(study.config))
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelling" in cancelled.stdout
    collected = run_cli("batch", "collect", str(study.config))
    assert collected.returncode == 1  # nothing was answered before the cancel
    assert " cancelled: " in collected.stdout
    assert summary_cells(collected.stdout) == [str(_items(study)), "0", "0", str(_items(study))]
    online = run_cli("run", str(study.config), "--quiet")
    assert online.returncode == 0, online.stderr
    assert sim.stats.received == _items(study) and sim.stats.batches == 1


def test_demo_by_batch_prints_the_tables_of_the_online_demo(
    demo_run: DemoRun, tmp_path: Path
) -> None:
    online = demo_run  # `geval-async demo --output FOLDER`, once a session
    batch = run_cli("demo", "--batch", "--output", str(tmp_path / "batch"))
    assert batch.returncode == 0, batch.stdout + batch.stderr
    assert "submitted batch" in batch.stdout

    def scoring(stdout: str) -> str:
        return stdout[stdout.index("scoring from the cache") : stdout.index(" files under ")]

    assert scoring(batch.stdout) == scoring(online.stdout)


def test_dry_run_leaves_out_what_live_batch_jobs_are_asking(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    sim.settings.batch_seconds = 3600.0
    assert run_cli("batch", "submit", str(study.config)).returncode == 0
    dry = run_cli("run", str(study.config), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"in live batch jobs: {_items(study)}; requests to send: 0" in dry.stdout
    assert sim.stats.received == 0 and sim.stats.batches == 1
