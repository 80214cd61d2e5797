"""A hostile judge: 5xx, resets, stalls, truncated bodies, 429s, quota loss, Ctrl-C.

Every test drives the real CLI in a subprocess against the simulated judge, whose fault draws
are seeded per arrival, so each run sees the same sequence of faults.
"""

from __future__ import annotations

import math
import re
import signal
import subprocess
from collections import Counter
from pathlib import Path

from conftest import (
    StudyFiles,
    cache_snapshot,
    keys_by_digest,
    run_study,
    start_process,
    summary_row,
    wait_for,
    write_records,
)

from geval_async.sim import SimServer

RETRIES = 6


def _retries(stdout: str) -> dict[str, int]:
    """The "retries: kind N, kind N" part of the run summary."""
    match = re.search(r"retries: (.*?), peak in flight", stdout)
    assert match, stdout
    if match.group(1) == "none":
        return {}
    return {
        kind: int(count)
        for kind, count in (part.rsplit(" ", 1) for part in match.group(1).split(", "))
    }


def test_every_fault_kind_is_retried_counted_and_nothing_is_lost(
    sim: SimServer, study: StudyFiles
) -> None:
    study.n_records = write_records(study.records, 60)  # 120 records, 240 requests
    s = sim.settings
    s.error_500, s.error_503, s.reset, s.stall, s.truncated, s.spurious_429 = (
        0.05,
        0.05,
        0.05,
        0.02,
        0.02,
        0.05,
    )
    s.stall_seconds, s.retry_after_ms = 30.0, 20
    study.write_config(
        sim.base_url,
        limits={
            "concurrency": 8,
            "retries": RETRIES,
            "timeout": 0.5,
            "backoff": 0.01,
            "max_backoff": 0.05,
        },
    )
    result = run_study(study)
    assert result.returncode == 0, result.stdout + result.stderr

    keys = keys_by_digest(study)
    assert set(sim.stats.answered) == set(keys), "every request answered"
    assert set(cache_snapshot(study.cache)) == set(keys.values()), "every answer stored"
    faults = sim.stats.faults
    for kind in ("500", "503", "reset", "stall", "truncated", "429"):
        assert faults[kind] > 0, f"the seeded draws gave no {kind!r}: {dict(faults)}"
    retries = _retries(result.stdout)
    print(f"\nfaults {dict(faults)}\nretries {retries}")
    # The summary names every kind, with the count the server injected.
    assert retries["http 500"] == faults["500"]
    assert retries["http 503"] == faults["503"]
    assert retries["connection reset"] == faults["reset"]
    assert retries["malformed body"] == faults["truncated"]
    assert retries["429"] == faults["429"]
    assert f"429s {faults['429']}," in result.stdout
    # A loaded machine may time out an answer that was not stalled, never the reverse.
    assert retries["timeout"] >= faults["stall"]
    # Bounded: every request was sent once plus once per failed attempt the summary counts,
    # and none more often than its retries allow (429s are waits, not failures).
    arrivals = Counter(digest for _, digest in sim.stats.arrivals)
    assert sum(arrivals.values()) == len(keys) + sum(retries.values())
    assert max(arrivals.values()) <= 1 + RETRIES + faults["429"]


def test_retries_are_bounded_then_the_item_fails_and_a_rerun_resumes(
    sim: SimServer, study: StudyFiles
) -> None:
    sim.settings.error_503 = 1.0
    study.write_config(sim.base_url, limits={"retries": 2, "backoff": 0.01, "max_backoff": 0.02})
    result = run_study(study, "--limit", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert sim.stats.received == 2 * 2 * 3, "2 items x 2 criteria, each sent 1 + 2 times"
    total = summary_row(result.stdout)
    assert (total["failed"], total["new"], total["cached"]) == (4, 0, 0), result.stdout
    assert "after 3 attempts" in result.stdout
    assert "retried by running again" in result.stderr
    assert cache_snapshot(study.cache) == {}, "a transient failure is never stored"

    sim.settings.error_503 = 0.0
    again = run_study(study, "--limit", "2")
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(cache_snapshot(study.cache)) == 4


def test_no_request_reaches_the_server_inside_a_429_pause(
    sim: SimServer, study: StudyFiles
) -> None:
    pause_ms, concurrency = 300, 8
    study.n_records = write_records(study.records, 24)
    sim.settings.spurious_429 = 0.15
    sim.settings.retry_after_ms = pause_ms
    study.write_config(sim.base_url, limits={"concurrency": concurrency})
    result = run_study(study)
    assert result.returncode == 0, result.stdout + result.stderr
    events = sorted(sim.stats.events)
    digest_at = dict(sim.stats.arrivals)  # events and arrivals share the arrival time
    limited = [(digest_at[arrival], done) for arrival, done, status in events if status == 429]
    assert len(limited) >= 5, f"the seeded draws gave too few 429s: {len(limited)}"
    pause = pause_ms / 1000
    for digest, sent in limited:
        # The refused request comes back only after the pause the server asked for ...
        retry = min(a for a, d in sim.stats.arrivals if d == digest and a > sent)
        assert retry >= sent + pause, f"retried {(retry - sent) * 1000:.1f} ms after its 429"
        # ... and meanwhile nobody else starts one: what arrives inside the pause was already
        # on its way when the 429 reached the client (one per other worker, maybe two when a
        # worker's answer was read just before the 429). Timestamps are the server's, so
        # this holds however slow the machine is.
        inside = [a for a, _, _ in events if sent < a < sent + pause]
        assert len(inside) <= 2 * (concurrency - 1), (
            f"{len(inside)} requests arrived inside a {pause_ms} ms pause: "
            f"{[round((a - sent) * 1000, 1) for a in inside]} ms after the 429"
        )
    first_after = [
        min((a - sent for a, _, _ in events if a > sent), default=math.nan) for _, sent in limited
    ]
    print(
        f"\n{len(limited)} 429s; first arrival after each (ms): "
        f"{[round(a * 1000, 1) for a in first_after]}"
    )


def test_insufficient_quota_mid_run_stops_with_one_line_and_keeps_every_answer(
    sim: SimServer, study: StudyFiles
) -> None:
    sim.settings.quota_after = 20
    sim.settings.latency_ms = 20
    study.write_config(sim.base_url, limits={"concurrency": 8})
    result = run_study(study)
    assert result.returncode == 1, result.stdout + result.stderr
    stopped = [line for line in result.stderr.splitlines() if line.startswith("stopped:")]
    assert len(stopped) == 1 and "quota" in stopped[0] and "insufficient_quota" in stopped[0]
    assert "Traceback" not in result.stderr
    assert "resume with: geval-async run" in result.stderr
    assert sim.stats.by_status[200] == 20
    assert len(cache_snapshot(study.cache)) == 20, "every answer the server gave is stored"

    sim.settings.quota_after = None
    again = run_study(study)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sum(sim.stats.answered.values()) == len(sim.stats.answered) == 2 * study.n_records


def _popen(study: StudyFiles, log: Path) -> subprocess.Popen[str]:
    return start_process("run", str(study.config), log=log)


def test_ctrl_c_saves_answers_in_flight_and_prints_a_resume_command(
    sim: SimServer, study: StudyFiles, tmp_path: Path
) -> None:
    sim.settings.latency_ms = 300
    study.write_config(sim.base_url, limits={"concurrency": 8})
    log = tmp_path / "run.log"
    process = _popen(study, log)
    try:
        wait_for(
            lambda: sim.stats.answered and sim.stats.in_flight >= 4, "requests in flight", process
        )
        answered_before, in_flight = len(sim.stats.answered), sim.stats.in_flight
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
    output = log.read_text()
    assert code == 130, output
    assert "resume with: geval-async run" in output, output
    assert "Traceback" not in output

    keys = keys_by_digest(study)
    stored = set(cache_snapshot(study.cache))
    answered = {keys[d] for d in sim.stats.answered}
    # The requests in flight at Ctrl-C were answered after it, and everything the server
    # answered before the process ended is in the cache.
    assert len(answered) >= answered_before + in_flight
    assert stored == answered
    assert 0 < len(stored) < len(keys)

    resumed = run_study(study)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sum(sim.stats.answered.values()) == len(sim.stats.answered) == len(keys), (
        "the resumed run asked only for what was missing"
    )


def test_a_second_ctrl_c_quits_at_once(sim: SimServer, study: StudyFiles, tmp_path: Path) -> None:
    # Answers that take ten minutes: after the first Ctrl-C the run would wait for them.
    sim.settings.latency_ms = 600_000
    study.write_config(sim.base_url, limits={"concurrency": 4, "timeout": 900})
    log = tmp_path / "run.log"
    process = _popen(study, log)
    try:
        wait_for(lambda: sim.stats.in_flight >= 4, "requests in flight", process)
        process.send_signal(signal.SIGINT)
        wait_for(lambda: "stopping:" in log.read_text(), "the first Ctrl-C's message", process)
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
    output = log.read_text()
    assert code == 130, output
    assert "Traceback" not in output
    assert "interrupted" in output
    assert sim.stats.by_status[200] == 0
    assert len(cache_snapshot(study.cache)) == 0


async def test_an_attempt_without_an_answer_times_out_and_a_cancellation_stays_one() -> None:
    """The attempts' deadlines are kept by one watch task (judging/wire/transport.py): an attempt
    the server never answers fails as a timeout (retried by the run), and a cancellation of
    an attempt by the run itself (Ctrl-C, a failing task group) stays a cancellation."""
    import asyncio

    import pytest
    from aiohttp import web

    from geval_async.errors import Connection, Transient
    from geval_async.judging.wire.transport import Transport
    from geval_async.study.settings import JudgeConfig

    arrived, answer = asyncio.Event(), asyncio.Event()

    async def never(request: web.Request) -> web.Response:
        arrived.set()
        await answer.wait()  # not before the test is over
        return web.Response()

    app = web.Application()
    app.router.add_post("/v1/chat/completions", never)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    judge = JudgeConfig(model="judge", base_url=f"http://{host}:{port}/v1")
    body = {"model": "judge", "messages": [{"role": "user", "content": "rate"}], "n": 1}
    try:
        async with Transport(judge, None, concurrency=2, timeout=0.2) as transport:
            with pytest.raises(Transient) as timed_out:
                await transport.complete(body)
            assert timed_out.value.fact.connection == Connection.TIMEOUT
            assert "no answer within 0.2 s" in str(timed_out.value)

            arrived.clear()
            attempt = asyncio.ensure_future(transport.complete(body))
            await arrived.wait()  # in flight: the server has it
            attempt.cancel()
            with pytest.raises(asyncio.CancelledError):
                await attempt
    finally:
        answer.set()
        await runner.cleanup()
