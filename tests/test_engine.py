"""The judge engine end to end: real HTTP to the simulated judge, a real cache folder."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

from conftest import StudyFiles, azure_judge, cache_snapshot, run_cli, run_study, start_process
from conftest import summary_row as _total_row

from geval_async.sim import SimServer


def test_complete_run_then_rerun_sends_nothing(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    first = run_study(study)
    assert first.returncode == 0, first.stderr
    items = study.n_records * 2
    assert sim.stats.received == items  # n = 3 honoured: one request per item
    before = cache_snapshot(study.cache)
    assert len(before) == items

    second = run_study(study)
    assert second.returncode == 0, second.stderr
    assert sim.stats.received == items, "the rerun must not send a single request"
    assert cache_snapshot(study.cache) == before, "the rerun must leave the cache unchanged"
    assert _total_row(second.stdout) == {
        "items": items,
        "cached": items,
        "new": 0,
        "refused": 0,
        "failed": 0,
        "missing": 0,
    }


def test_status_counts_without_network(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    assert run_study(study, "--limit", "5").returncode == 0
    received = sim.stats.received
    status = run_cli("status", str(study.config))
    assert status.returncode == 0, status.stderr
    assert sim.stats.received == received
    lines = {
        line.split()[0]: line.split()[1:]
        for line in status.stdout.splitlines()
        if line and line.split()[0] in ("clar", "fit", "total")
    }
    # items, answered, refused, missing
    assert lines["clar"] == [str(study.n_records), "5", "0", str(study.n_records - 5)]
    assert lines["total"] == [str(2 * study.n_records), "10", "0", str(2 * study.n_records - 10)]


def test_editing_one_prompt_rerequests_exactly_that_criterion(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    received = sim.stats.received
    prompt = study.root / "prompts" / "fit.txt"
    prompt.write_text(prompt.read_text().replace("how well it fits", "how well it suits"))
    result = run_study(study)
    assert result.returncode == 0, result.stderr
    assert sim.stats.received - received == study.n_records  # every fit item, no clar item


def test_server_ignoring_n_gets_the_rest_as_further_draws(
    sim: SimServer, study: StudyFiles
) -> None:
    sim.settings.ignore_n = True
    study.write_config(sim.base_url, sampling={"n": 4})
    result = run_study(study, "--limit", "3")
    assert result.returncode == 0, result.stderr
    assert sim.stats.received == 3 * 2 * 4  # 1 + 3 further draws per item
    again = run_study(study, "--limit", "3")
    assert again.returncode == 0
    assert sim.stats.received == 3 * 2 * 4


def test_logprobs_mode_sends_one_request_per_item(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url, sampling={"mode": "logprobs", "top_logprobs": 5})
    result = run_study(study)
    assert result.returncode == 0, result.stderr
    assert sim.stats.received == 2 * study.n_records


def test_transient_faults_are_retried_and_the_run_completes(
    sim: SimServer, study: StudyFiles
) -> None:
    sim.settings.error_500 = 0.15
    sim.settings.error_503 = 0.1
    sim.settings.reset = 0.1
    sim.settings.truncated = 0.05
    study.write_config(sim.base_url, limits={"retries": 10, "concurrency": 4, "backoff": 0.01})
    result = run_study(study)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sum(sim.stats.faults.values()) > 0
    status = run_cli("status", str(study.config))
    assert _total_row(status.stdout) == {
        "items": 2 * study.n_records,
        "answered": 2 * study.n_records,
        "refused": 0,
        "missing": 0,
    }
    # Every item answered: exactly one 200 per distinct request body.
    assert len(sim.stats.answered) == 2 * study.n_records
    assert re.search(r"retries: .*(http 50[03]|connection)", result.stdout)


def test_insufficient_quota_stops_with_one_clear_line(sim: SimServer, study: StudyFiles) -> None:
    sim.settings.quota_after = 5
    study.write_config(sim.base_url, limits={"concurrency": 2})
    result = run_study(study)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("stopped:")]
    assert len(lines) == 1 and "quota" in lines[0]
    assert "resume with" in result.stderr
    # The five answers that arrived are kept; a rerun after the quota is raised completes.
    assert len(cache_snapshot(study.cache)) == 5
    sim.settings.quota_after = None
    assert run_study(study).returncode == 0


def test_refusals_are_stored_and_not_paid_for_twice(sim: SimServer, study: StudyFiles) -> None:
    rows = study.records.read_text().splitlines()
    rows[0] = rows[0].replace("Text 0A", "Text 0A [[FILTER]]")
    study.records.write_text("\n".join(rows) + "\n")
    study.write_config(sim.base_url)
    first = run_study(study)
    assert first.returncode == 1  # two items (both criteria of record 0) are refused
    items = 2 * study.n_records
    assert _total_row(first.stdout) == {
        "items": items,
        "cached": 0,
        "new": items - 2,
        "refused": 2,
        "failed": 0,
        "missing": 0,
    }
    received = sim.stats.received
    second = run_study(study)
    assert second.returncode == 1
    assert sim.stats.received == received, "a stored refusal is not asked again"
    assert _total_row(second.stdout)["new"] == 0
    third = run_study(study, "--retry-failed")
    assert sim.stats.received == received + 2
    assert third.returncode == 1
    assert _total_row(third.stdout)["refused"] == 2, "asked again, refused again"


def test_sigkill_then_resume_answers_each_request_once(tmp_path: Path, study: StudyFiles) -> None:
    from geval_async.sim import SimSettings

    concurrency = 6
    with SimServer(SimSettings(latency_ms=40)) as server:
        study.write_config(server.base_url, limits={"concurrency": concurrency})
        items = 2 * study.n_records
        process = start_process("run", str(study.config), "--quiet", quiet=True)
        deadline = time.monotonic() + 60
        while sum(server.stats.answered.values()) < items // 2:
            assert time.monotonic() < deadline, "the run made no progress"
            assert process.poll() is None, "the run ended before it could be killed"
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait()
        in_flight_at_kill = server.stats.in_flight
        stored = len(cache_snapshot(study.cache))
        assert 0 < stored < items

        result = run_study(study)
        assert result.returncode == 0, result.stderr
        assert len(cache_snapshot(study.cache)) == items
        answered = server.stats.answered
        assert len(answered) == items, "every request of the plan answered"
        duplicates = sum(answered.values()) - len(answered)
        assert duplicates <= max(in_flight_at_kill, concurrency)
        assert duplicates <= concurrency


def test_api_key_is_never_written(sim: SimServer, study: StudyFiles) -> None:
    key = "sk-test-SECRET-4d1f9a"
    sim.settings.api_key = key
    study.write_config(sim.base_url, judge={"api_key_env": "MY_JUDGE_KEY"})
    missing = run_study(study)
    assert missing.returncode == 1 and "MY_JUDGE_KEY" in missing.stderr
    assert key not in missing.stderr
    result = run_study(study, env={"MY_JUDGE_KEY": key})
    assert result.returncode == 0, result.stderr
    assert key not in result.stdout + result.stderr
    for path in study.root.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), f"the key leaked into {path}"


def test_server_rate_limits_are_honoured_without_failures(study: StudyFiles) -> None:
    from geval_async.sim import SimSettings

    # A tight server: 1,200 requests/min with only a one-second burst; the client is told
    # nothing about it, so it must learn the limit from the x-ratelimit-* headers or live on
    # 429s and their retry-after-ms; either way nothing may fail and nothing may be lost.
    with SimServer(SimSettings(rpm=1200, bucket_seconds=1.0)) as server:
        study.write_config(server.base_url, limits={"concurrency": 8})
        result = run_study(study)
        assert result.returncode == 0, result.stdout + result.stderr
        assert len(server.stats.answered) == 2 * study.n_records
        assert server.stats.rate_limited <= study.n_records, "no storm of 429s"
        total = _total_row(result.stdout)
        assert total["failed"] == 0 and total["new"] == 2 * study.n_records


def test_azure_form_with_api_key_header(sim: SimServer, study: StudyFiles) -> None:
    sim.settings.api_key = "azure-test-key"
    # a clean Azure section: no base_url (Azure ignores it)
    study.write_config(sim.base_url, judge=azure_judge(sim, "2024-06-01", model="gpt-4o-mini"))
    result = run_study(study, "--limit", "2", env={"AZ_KEY": "azure-test-key"})
    assert result.returncode == 0, result.stderr
    assert sim.stats.by_status[200] == 4


def test_dry_run_sends_nothing_and_estimates(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url, judge={"model": "gpt-4o-mini"})
    result = run_cli("run", str(study.config), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert sim.stats.received == 0 and not study.cache.exists()
    assert f"requests to send: {2 * study.n_records}" in result.stdout
    assert "estimated cost: $" in result.stdout


def test_request_too_large_is_refused_not_retried(study: StudyFiles) -> None:
    from geval_async.sim import SimSettings

    # The server's whole token budget is smaller than one request: a 429 that will not pass.
    with SimServer(SimSettings(tpm=60, bucket_seconds=60)) as server:
        study.write_config(server.base_url)
        result = run_study(study, "--limit", "1")
        assert result.returncode == 1
        assert server.stats.received == 2, "each request is asked once, then stored as refused"
        assert "too large" in result.stdout


def test_server_refusing_n_falls_back_to_single_draws(sim: SimServer, study: StudyFiles) -> None:
    sim.settings.max_n = 1  # llama-server with one slot: 400 "Field 'n': ..." for n > 1
    study.write_config(sim.base_url, sampling={"n": 3}, limits={"concurrency": 1})
    result = run_study(study, "--limit", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    items = 2 * 2
    assert sim.stats.by_status[400] == 1, "one refusal teaches the run to ask for one choice"
    assert sim.stats.by_status[200] == items * 3
    assert "n refused 1" in result.stdout
    from geval_async.scoring.scores.results import load_results

    results = load_results(study.config, limit=2)
    assert all(s.valid + s.invalid == 3 for s in results.scores if s.status != "missing")
    again = run_study(study, "--limit", "2")
    assert again.returncode == 0 and sim.stats.received == 1 + items * 3


def test_identical_requests_are_sent_once(sim: SimServer, study: StudyFiles) -> None:
    import json

    rows = [
        {
            "id": f"r{i}",
            "user": f"u{i}",
            "condition": "A",
            "reader": "same reader",
            "text": "the very same text",
        }
        for i in range(6)
    ]
    study.records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sim.settings.latency_ms = 50  # keep the first answer in flight while the others queue
    # One condition only: no [stats] comparison.
    study.write_config(sim.base_url, limits={"concurrency": 6}, stats={"conditions": []})
    result = run_study(study)
    assert result.returncode == 0, result.stderr
    assert sim.stats.received == 2, "one request per criterion, whatever the number of copies"
    total = _total_row(result.stdout)
    assert total["items"] == 12 and total["missing"] == 0 and total["failed"] == 0


def test_each_answer_stores_its_latency_to_the_microsecond(study: StudyFiles) -> None:
    from geval_async.judging.store.stored import CachedResponse
    from geval_async.sim import SimSettings

    with SimServer(SimSettings(latency_ms=30)) as server:
        study.write_config(server.base_url)
        result = run_study(study)
        assert result.returncode == 0, result.stderr
    entries = [CachedResponse.decode(raw) for raw in cache_snapshot(study.cache).values()]
    assert len(entries) == 2 * study.n_records
    for entry in entries:
        # The simulated judge waits about 30 ms: the time the attempt took, in ms, to 3 places.
        assert 5.0 < entry.latency_ms < 60_000.0
        assert entry.latency_ms == round(entry.latency_ms, 3)
