"""The cache folder under the last hostile conditions: a disk that fills while answers are in
flight, a folder made read-only while a run writes to it, a Batch API that quotes the key back.

Each drives the real command against the simulated judge on 127.0.0.1 (in a process of its own
where a signal, a full disk or another user is involved) and looks where a user would: what is
printed, the exit code, every file of the cache folder, the simulated judge's request counts.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import (
    NOT_PASSED,
    ROOT,
    StudyFiles,
    as_other_user,
    cache_snapshot,
    keys_by_digest,
    remount,
    run_cli,
    run_process,
    start_process,
    study_every_user_may_read,
    summary_cells,
    wait_for,
    write_records,
)

from geval_async.judging.store.cache import CachedResponse
from geval_async.sim import SimServer

KEY = "sk-leftover-7d2e91c4a06b3f58"
KEY_ENV = {"LEFTOVER_JUDGE_KEY": KEY}


def _files_holding(folder: Path, needle: bytes) -> list[Path]:
    """The files under ``folder`` holding ``needle`` as they lie on disk, and the cache's
    entries holding it once their bodies are inflated (a stored body is deflated)."""
    found = [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]
    for key, value in cache_snapshot(folder).items():
        if needle.decode() in repr(CachedResponse.decode(value)):
            found.append(folder / key)
    return found


# --- the Batch API quoting the key ------------------------------------------------------------


@pytest.mark.parametrize("failing", ["lines", "batch"])
def test_a_key_the_batch_api_quotes_in_its_lines_never_reaches_the_cache_or_the_screen(
    sim: SimServer, study: StudyFiles, tmp_path: Path, failing: str
) -> None:
    # Every line the batch writes quotes the Authorization header: the answers' bodies, the
    # refused (400) and expired lines of the error file; or the batch fails validation with
    # the header in its errors.
    sim.settings.api_key = KEY
    sim.settings.batch_echo_key = True
    if failing == "lines":
        sim.settings.batch_failed_lines = 0.3
        sim.settings.batch_failure_status = 400
        sim.settings.batch_expired_lines = 0.2
    else:
        sim.settings.batch_invalid = "The model sim-judge does not support batches. (sim)"
    study.write_config(sim.base_url, judge={"api_key_env": "LEFTOVER_JUDGE_KEY"})

    result = run_cli("run", str(study.config), "--batch", "--quiet", "--poll", "0.05", env=KEY_ENV)
    assert result.returncode == 1, result.stdout + result.stderr
    assert sim.stats.batches == 1
    shown = result.stdout + result.stderr
    assert KEY not in shown
    assert "Traceback" not in shown
    _, answered, refused, missing = (int(cell) for cell in summary_cells(result.stdout))
    if failing == "lines":
        assert answered > 0 and refused > 0 and missing > 0, result.stdout
    else:
        assert "failed validation" in shown and "[API key removed]" in shown, shown
        assert answered == refused == 0
    assert _files_holding(study.cache, KEY.encode()) == []

    # What the cache holds is read back, shown and exported without the key.
    for command in (
        ["status", str(study.config)],
        ["batch", "status", str(study.config)],
        ["answers", str(study.config), "--record", "u000-A"],
        ["score", str(study.config)],
    ):
        shown = run_cli(*command, env=KEY_ENV)
        assert KEY not in shown.stdout + shown.stderr, command
    archive = tmp_path / "shared.jsonl.gz"
    exported = run_cli("cache", "export", str(study.config), str(archive), env=KEY_ENV)
    assert exported.returncode == 0, exported.stderr
    unpacked = gzip.decompress(archive.read_bytes())
    assert KEY.encode() not in unpacked
    if failing == "lines":
        assert b"[API key removed]" in unpacked  # the refusals and the answers, as received
    assert _files_holding(study.output, KEY.encode()) == []


# --- a disk that fills mid-run ----------------------------------------------------------------

_HELD = "the disk is full;"


def _run_onto_a_small_disk(
    sim: SimServer, study: StudyFiles, mount: Callable[[Path, str], None]
) -> tuple[subprocess.Popen[str], Path, Path]:
    """A run started on a tmpfs with room for a few dozen answers of its 600, waited for until
    it says it holds answers for lack of room; the run, its log and the disk."""
    disk = study.root / "disk"
    mount(disk, "600k")  # the empty cache, its claims and a few dozen answers
    study.n_records = write_records(study.records, 150)  # 300 records: 600 requests
    study.write_config(sim.base_url, cache={"path": "disk/cache"}, limits={"concurrency": 4})
    log = study.root / "run.log"
    run = start_process("run", str(study.config), "--quiet", log=log)
    wait_for(lambda: _HELD in log.read_text(), "the run says the disk is full", run)
    return run, log, disk


def _decoded(folder: Path) -> dict[str, CachedResponse]:
    """Every entry of a cache folder, decoded (raises if one is half-written)."""
    return {key: CachedResponse.decode(value) for key, value in cache_snapshot(folder).items()}


def test_a_full_disk_holds_the_answers_received_until_there_is_room(
    sim: SimServer, study: StudyFiles, mount_tmpfs: Callable[[Path, str], None]
) -> None:
    run, log, disk = _run_onto_a_small_disk(sim, study, mount_tmpfs)
    remount(disk, "size=8m")  # the user frees space
    assert run.wait(timeout=120) == 0, log.read_text()

    said = log.read_text().splitlines()
    held = [line for line in said if _HELD in line]
    assert len(held) == 1, said  # said once, in one line: where, how many, what to do
    assert str(disk / "cache") in held[0] and "answers received are held" in held[0]
    assert "Traceback" not in log.read_text()
    keys = keys_by_digest(study)
    assert set(_decoded(disk / "cache")) == set(keys.values()), "every answer is stored"
    # No answer was lost: each request was asked once, none paid twice.
    assert set(sim.stats.answered) == set(keys)
    assert max(sim.stats.answered.values()) == 1
    received = sim.stats.received
    again = run_process("run", str(study.config), "--quiet")
    assert again.returncode == 0, again.stderr
    assert sim.stats.received == received, "the rerun has nothing left to ask"


def test_ctrl_c_while_answers_are_held_says_how_many_were_lost(
    sim: SimServer, study: StudyFiles, mount_tmpfs: Callable[[Path, str], None]
) -> None:
    run, log, disk = _run_onto_a_small_disk(sim, study, mount_tmpfs)
    run.send_signal(signal.SIGINT)
    assert run.wait(timeout=60) == 2, log.read_text()
    said = log.read_text().strip().splitlines()
    assert "Traceback" not in log.read_text()
    last = said[-1]
    assert last.startswith(f"error: {disk / 'cache'}: the disk is still full; "), said
    lost = int(last.split("still full; ")[1].split()[0])
    assert 0 < lost <= 4, last  # a few answers in flight, never more than the workers
    assert "answers received were lost" in last and "run again to resume" in last

    remount(disk, "size=8m")
    stored = _decoded(disk / "cache")  # nothing half-written
    asked_before = dict(sim.stats.answered)
    again = run_process("run", str(study.config), "--quiet")
    assert again.returncode == 0, again.stderr
    keys = keys_by_digest(study)
    assert set(_decoded(disk / "cache")) == set(keys.values())
    # The rerun asks what was never answered, and again exactly the answers said lost.
    asked_twice = [digest for digest, count in sim.stats.answered.items() if count > 1]
    assert len(asked_twice) == lost, log.read_text()
    assert max(sim.stats.answered.values()) == 2
    assert not {keys[digest] for digest in asked_twice} & set(stored)
    assert set(asked_before) | set(keys) == set(keys)


# --- a cache folder made read-only mid-run ---------------------------------------------------


def _make_read_only(folder: Path) -> list[Path]:
    """Every file and folder under ``folder`` (itself included) made read-only to its owner
    and everyone; the paths changed."""
    paths = [folder, *folder.rglob("*")]
    for path in paths:
        path.chmod(0o555 if path.is_dir() else 0o444)
    return paths


def test_a_cache_folder_made_read_only_mid_run_ends_in_one_line_with_its_answers_readable(
    sim: SimServer,
) -> None:
    # Root passes every mode: the run is another user's (as_other_user), whom chmod binds.
    sim.settings.latency_ms = 5
    with study_every_user_may_read(150, "cache", "out") as study:  # 600 requests
        study.write_config(sim.base_url, limits={"concurrency": 4})
        study.config.chmod(0o644)
        for folder in (study.cache, study.output):
            folder.mkdir(mode=0o777)
            folder.chmod(0o777)
        log = study.root / "run.log"
        with log.open("wb") as out:
            run = subprocess.Popen(
                _as_other_user("run", str(study.config)),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_ENV,
                cwd=ROOT,
            )
        wait_for(lambda: sum(sim.stats.answered.values()) >= 40, "40 answers", run)
        changed = _make_read_only(study.cache)
        try:
            assert run.wait(timeout=120) == 2, log.read_text()
            said = log.read_text()
            assert "Traceback" not in said, said
            errors = [line for line in said.splitlines() if line.startswith("error:")]
            assert len(errors) == 1 and str(study.cache) in errors[0], said
            assert "fix permissions" in errors[0], errors
            leftovers = [p.name for p in study.cache.rglob("*") if p.name.startswith(".")]
            assert leftovers == [], "nothing half-written"
            stored = _decoded(study.cache)  # every entry whole
            keys = keys_by_digest(study)
            assert set(stored) <= set(keys.values())
            # Every answer the run received is stored (its open database is still written).
            assert {keys[digest] for digest in sim.stats.answered} <= set(stored)
            # The user reads them from the read-only folder.
            status = subprocess.run(
                _as_other_user("status", str(study.config)),
                capture_output=True,
                text=True,
                env=_ENV,
                cwd=ROOT,
                timeout=120,
            )
            assert status.returncode == 0, status.stderr
            assert summary_cells(status.stdout)[1] == str(len(stored)), status.stdout
            print(f"\n{len(stored)} answers stored; the run said: {errors[0]}")
        finally:
            for path in changed:
                if path.exists():  # a write-ahead log is gone once the last reader closed
                    path.chmod(0o777 if path.is_dir() else 0o666)


_ENV = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}


def _as_other_user(*args: str) -> list[str]:
    """``python -m geval_async ARGS`` as a user the folders' modes bind."""
    return [*as_other_user(), sys.executable, "-m", "geval_async", *args]
