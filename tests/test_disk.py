"""The cache folder under stress: two writers at once, a read-only or full disk, damaged entries.

Everything runs the real CLI against the simulated judge and looks at the real cache folder
(diskcache's sqlite file) afterwards. Every command runs in a process of its own
(``run_process``): on a full tmpfs, sqlite's memory-mapped pages can end a process with SIGBUS,
which must not be the test runner's.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from conftest import (
    StudyFiles,
    cache_snapshot,
    keys_by_digest,
    remount,
    run_process,
    start_process,
    summary_row,
    wait_for,
    write_records,
)

from geval_async.judging.store.cache import CachedResponse
from geval_async.sim import SimServer


def _decoded(path: Path) -> dict[str, CachedResponse]:
    """Every entry of a cache folder, decoded (raises if one does not decode)."""
    return {key: CachedResponse.decode(value) for key, value in cache_snapshot(path).items()}


# --- two processes, one cache ------------------------------------------------------------------


def test_two_runs_of_one_plan_share_a_cache_safely(sim: SimServer, study: StudyFiles) -> None:
    sim.settings.latency_ms = 5
    study.n_records = write_records(study.records, 100)  # 200 records, 400 requests
    study.write_config(sim.base_url, limits={"concurrency": 8})
    processes = [start_process("run", str(study.config), "--quiet") for _ in range(2)]
    outputs = [process.communicate(timeout=120) for process in processes]
    for process, (stdout, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stdout + stderr

    keys = keys_by_digest(study)
    entries = _decoded(study.cache)  # no entry is damaged
    assert set(entries) == set(keys.values()), "the cache holds exactly the plan's requests"
    with sqlite3.connect(study.cache / "cache.db") as db:
        rows = db.execute("SELECT count(*), count(DISTINCT key) FROM Cache").fetchone()
    assert rows == (len(keys), len(keys)), "each request is stored once"
    answered = sim.stats.answered
    for digest, key in keys.items():
        # The stored body is one of the answers the server gave for that very request.
        stored_id = orjson.loads(entries[key].body)["id"]
        ids = {
            "chatcmpl-sim-" + hashlib.sha256(f"{digest}:{r}".encode()).hexdigest()[:24]
            for r in range(answered[digest])
        }
        assert stored_id in ids
    # Both walk the plan in the same order and race on the same missing keys; a claim on each
    # request in flight (geval_async/claims.py) makes the other process wait for the answer
    # instead of asking again: the server answers every request exactly once.
    assert len(answered) == len(keys)
    assert max(answered.values()) == 1, f"{sum(answered.values()) - len(answered)} duplicates"
    assert sim.stats.received == len(keys)

    # Each run's summary counts as new only what the judge answered it; an item the other
    # process was answered while this one waited for it is counted as cached.
    rows = [summary_row(stdout) for stdout, _ in outputs]
    assert sum(row["new"] for row in rows) == len(keys), rows
    for row in rows:
        assert row["cached"] + row["new"] == row["items"] == len(keys), rows

    status = run_process("status", str(study.config))
    assert status.returncode == 0, status.stderr
    assert "corrupted" not in status.stdout
    assert status.stdout.split("total")[1].split()[3] == "0", status.stdout  # nothing missing


# --- a hostile disk ----------------------------------------------------------------------------


def _writable(folder: Path) -> bool:
    probe = folder / "probe"
    try:
        probe.write_text("x")
    except OSError:
        return False
    probe.unlink()
    return True


@contextlib.contextmanager
def _read_only(cache: Path, mount: Callable[[Path, str], None]) -> Iterator[tuple[Path, str]]:
    """The cache folder made read-only by the first mechanism that works here.

    chmod, unless we are root (root ignores permission bits); then the immutable attribute
    (chattr +i, needs CAP_LINUX_IMMUTABLE and ext4/xfs/btrfs); then a copy on a tmpfs
    remounted read-only (needs CAP_SYS_ADMIN). Yields (folder, mechanism).
    """
    paths = [cache, *cache.iterdir()]
    for path in paths:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        if not _writable(cache):
            yield cache, "chmod"
            return
    finally:
        for path in paths:
            path.chmod(0o755 if path.is_dir() else 0o644)
    chattr = shutil.which("chattr")
    if (
        chattr
        and subprocess.run([chattr, "+i", *map(str, paths)], capture_output=True).returncode == 0
    ):
        try:
            if not _writable(cache):
                yield cache, "chattr +i"
                return
        finally:
            subprocess.run([chattr, "-i", *map(str, paths)], check=True)
    disk = cache.parent / "ro-disk"
    mount(disk, "8m")  # skips the test when no tmpfs can be mounted
    copy = disk / "cache"
    shutil.copytree(cache, copy)
    remount(disk, "ro")
    try:
        yield copy, "read-only tmpfs"
    finally:
        remount(disk, "rw")


def test_read_only_cache_fails_before_any_request(
    sim: SimServer, study: StudyFiles, mount_tmpfs: Callable[[Path, str], None]
) -> None:
    study.write_config(sim.base_url)
    assert run_process("run", str(study.config), "--quiet", "--limit", "3").returncode == 0
    received = sim.stats.received
    before = cache_snapshot(study.cache)

    with _read_only(study.cache, mount_tmpfs) as (cache, mechanism):
        result = run_process("run", str(study.config), "--quiet", "--cache", str(cache))
        status = run_process("status", str(study.config), "--cache", str(cache))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "writable" in lines[0] and str(cache) in lines[0], lines
    assert "Traceback" not in result.stderr
    assert sim.stats.received == received, "no request may be sent"
    assert cache_snapshot(cache) == before, "the cache is unchanged"
    print(
        f"\nread-only by {mechanism}: {lines[0]}\nstatus on it: exit {status.returncode}: "
        f"{(status.stdout + status.stderr).strip().splitlines()[-1]}"
    )


# --- damaged entries ---------------------------------------------------------------------------


def test_damaged_entries_are_reported_treated_as_missing_and_fetched_again(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert run_process("run", str(study.config), "--quiet").returncode == 0
    received = sim.stats.received
    before = cache_snapshot(study.cache)
    keys = sorted(before)[:5]
    good = before[keys[0]]
    body = CachedResponse.decode(good).body.encode()  # stored last, after the metadata
    damage = [
        ("value = ?", (b"\x00\xffnot an entry at all",)),  # garbage bytes
        ("value = ?", (good[: len(good) // 2],)),  # cut in half
        ("value = ?", (good[: len(good) - len(body) + 20],)),  # metadata whole, body cut
        ("value = NULL", ()),  # a row that lost its value
        ("mode = 4, value = ?", (b"\x80\x05garbage pickle",)),  # unpickling fails
    ]
    with sqlite3.connect(study.cache / "cache.db") as db:
        for key, (assignment, values) in zip(keys, damage, strict=True):
            db.execute(f"UPDATE Cache SET {assignment} WHERE key = ?", (*values, key))
    db.close()

    status = run_process("status", str(study.config))
    assert status.returncode == 0, status.stderr
    assert "5 corrupted cache entries" in status.stdout, status.stdout
    assert status.stdout.split("total")[1].split()[3] == "5", status.stdout  # missing

    result = run_process("run", str(study.config), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 corrupted cache entries" in result.stdout, result.stdout
    assert sim.stats.received == received + 5, "exactly the damaged entries are fetched again"
    after = _decoded(study.cache)
    assert set(after) == set(before)
    assert {k: v for k, v in cache_snapshot(study.cache).items() if k not in keys} == {
        k: v for k, v in before.items() if k not in keys
    }, "the healthy entries are untouched"

    clean = run_process("status", str(study.config))
    assert "corrupted" not in clean.stdout
    assert clean.stdout.split("total")[1].split()[3] == "0", clean.stdout


def test_a_full_disk_at_the_run_s_end_leaves_no_half_written_endpoints_file(
    tmp_path: Path, mount_tmpfs: Callable[[Path, str], None]
) -> None:
    # The run saves what the endpoint showed (endpoints.json) after its last answer is
    # stored; on a disk that is full by then it says so in one line and what to do, and
    # leaves no temporary file behind.
    from geval_async.errors import CacheError
    from geval_async.judging.wire.capabilities import Capabilities, save_capabilities

    disk = tmp_path / "disk"
    mount_tmpfs(disk, "64k")
    with contextlib.suppress(OSError), (disk / "filler").open("wb") as filler:
        while True:
            filler.write(b"x" * 4096)
            filler.flush()
    before = sorted(p.name for p in disk.iterdir())
    with pytest.raises(CacheError) as raised:
        save_capabilities(disk, "http://127.0.0.1:9/v1", "judge", Capabilities())
    message = str(raised.value)
    assert "\n" not in message and str(disk) in message and "endpoints.json" in message
    assert "run again to resume" in message
    assert sorted(p.name for p in disk.iterdir()) == before, "no temporary file left"


# --- another process's lock --------------------------------------------------------------------

_HOLD_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def _lock_held(database: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``database``'s write lock until the block is left."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(database)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        yield holder
    finally:
        holder.kill()
        holder.communicate()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_ends_a_wait_for_another_process_s_lock_at_once(
    sim: SimServer, study: StudyFiles, signum: signal.Signals
) -> None:
    study.write_config(sim.base_url)
    assert run_process("run", str(study.config), "--quiet", "--limit", "2").returncode == 0
    database = study.cache / "cache.db"
    with _lock_held(database) as holder:
        log = study.root / "run.log"
        run = start_process("run", str(study.config), "--quiet", log=log)
        # Opening the folder waits for the lock, and says whose it is, before the minute ends.
        said = f"waiting for the lock of {database}, held by another process (pid {holder.pid} "
        wait_for(lambda: said in log.read_text(), "the run says whose lock it waits for", run)
        run.send_signal(signum)
        try:
            run.wait(timeout=5)
        except subprocess.TimeoutExpired:  # a second Ctrl-C quits at once
            run.send_signal(signum)
            run.wait(timeout=15)  # not the minute the lock is waited for
        stderr = log.read_text()
        assert run.returncode in (2, 130), stderr
        assert "Traceback" not in stderr, stderr


def test_one_ctrl_c_ends_a_run_waiting_for_another_process_s_lock_on_its_claims(
    sim: SimServer, study: StudyFiles
) -> None:
    # Slow answers keep the run going while another process takes the claims' lock: each
    # request the run asks next must be claimed first, and the lock is held until the end.
    sim.settings.latency_ms = 1000
    study.write_config(sim.base_url)
    claims = study.cache / "claims" / "cache.db"
    log = study.root / "run.log"
    run = start_process("run", str(study.config), log=log)
    wait_for(lambda: sim.stats.received > 0, "the run's first requests", run)
    try:
        with _lock_held(claims) as holder:
            said = f"waiting for the lock of {claims}, held by another process (pid {holder.pid} "
            wait_for(lambda: said in log.read_text(), "the run says whose lock it waits for", run)
            run.send_signal(signal.SIGINT)
            run.wait(timeout=15)  # one Ctrl-C: not the minute a lock is waited for, nor three
            shown = log.read_text()
            assert run.returncode == 130, shown
            assert "Traceback" not in shown and "interrupted" in shown, shown
    finally:
        run.kill()
        run.wait()
    sim.settings.latency_ms = 0
    resumed = run_process("run", str(study.config), "--quiet")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert summary_row(run_process("status", str(study.config)).stdout)["missing"] == 0


def test_a_lock_held_too_long_names_the_process_holding_it(study: StudyFiles) -> None:
    from geval_async.errors import CacheError
    from geval_async.judging.store.cache import open_diskcache
    from geval_async.judging.store.locks import wait_for_lock

    with open_diskcache(study.cache) as cache, _lock_held(study.cache / "cache.db") as holder:
        with pytest.raises(CacheError) as raised:
            wait_for_lock(study.cache, lambda: cache.set("g2-k", b"v"), patience=0.5)
        assert f"pid {holder.pid} (" in str(raised.value), raised.value
        assert "held by another process" in str(raised.value)
