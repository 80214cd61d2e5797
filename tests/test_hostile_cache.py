"""A cache folder from someone else is input: nothing in it runs code or touches another file.

A folder travels (a shared drive, a co-author's copy, an unpacked archive), so each test here
fills a real cache with the simulated judge, then edits one row of diskcache's table the way a
hostile or damaged folder would hold it: diskcache's file mode naming a file outside the
folder (absolute, or ``../``), its pickle mode holding a pickle that runs a command,
``/dev/zero``, a FIFO. Every command (``status``, ``run``, ``cache verify``, ``cache merge``,
``cache migrate``) reads such a row as a damaged entry: the run asks it again, and the file it
names is neither read nor deleted. Real CLI processes, real folders.
"""

from __future__ import annotations

import os
import pickle
import shutil
import sqlite3
import subprocess
from pathlib import Path

import diskcache
import pytest
from conftest import StudyFiles, keys_by_digest, run_process

from geval_async.judging.store.stored import CachedResponse
from geval_async.sim import SimServer

_FILE_MODE, _PICKLE_MODE = 2, 4  # diskcache's modes of a value in a file, and a pickled one


class _RunsCode:
    """A pickle that, when loaded, creates the file it names (as ``os.system`` would run)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def _filled(sim: SimServer, study: StudyFiles) -> list[str]:
    study.write_config(sim.base_url)
    first = run_process("run", str(study.config), "--quiet")
    assert first.returncode == 0, first.stdout + first.stderr
    return sorted(keys_by_digest(study).values())


def _set_row(cache: Path, key: str, assignment: str, *values: object) -> None:
    with sqlite3.connect(cache / "cache.db") as db:
        db.execute(f"UPDATE Cache SET {assignment} WHERE key = ?", (*values, key))
    db.close()


def _missing(stdout: str) -> int:
    return int(stdout.split("total")[1].split()[3])


@pytest.mark.parametrize("where", ["absolute", "relative"])
def test_a_row_naming_a_file_outside_the_folder_never_deletes_or_reads_it(
    sim: SimServer, study: StudyFiles, where: str
) -> None:
    keys = _filled(sim, study)
    good = study.root / "good-copy"
    shutil.copytree(study.cache, good)
    victim = study.root / "precious.txt"
    victim.write_text("a file the cache has nothing to do with\n")
    # ../precious.txt from the cache folder is the same file as its absolute path.
    name = str(victim) if where == "absolute" else os.path.join("..", victim.name)

    def damage() -> None:
        for key in keys[:2]:
            _set_row(study.cache, key, "mode = ?, filename = ?, value = NULL", _FILE_MODE, name)

    damage()
    received = sim.stats.received
    status = run_process("status", str(study.config))
    assert status.returncode == 0, status.stderr
    assert _missing(status.stdout) == 2, status.stdout
    rerun = run_process("run", str(study.config), "--quiet")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert sim.stats.received == received + 2, "the two rows are asked again"
    assert victim.read_text() == "a file the cache has nothing to do with\n", "left alone"

    damage()  # a merge from a healthy copy replaces the two rows, and only the rows
    merged = run_process("cache", "merge", str(study.cache), str(good))
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert victim.read_text() == "a file the cache has nothing to do with\n", "left alone"
    assert _missing(run_process("status", str(study.config)).stdout) == 0
    with diskcache.Cache(str(study.cache)) as plain:  # the answers replaced those rows
        for key in keys[:2]:
            assert CachedResponse.decode(plain.get(key)).key == key


def test_a_pickled_row_never_runs_code(sim: SimServer, study: StudyFiles) -> None:
    keys = _filled(sim, study)
    good = study.root / "good-copy"
    shutil.copytree(study.cache, good)
    marker = study.root / "pickle-ran"
    payload = pickle.dumps(_RunsCode(marker))
    _set_row(study.cache, keys[0], "mode = ?, value = ?", _PICKLE_MODE, payload)
    received = sim.stats.received

    for command in (
        ["status", str(study.config)],
        ["cache", "verify", str(study.cache)],
        ["cache", "merge", str(study.root / "copy"), str(study.cache)],
        ["cache", "migrate", str(study.config)],
        ["run", str(study.config), "--quiet"],
    ):
        result = run_process(*command)
        assert "Traceback" not in result.stderr, (command, result.stderr)
        assert not marker.exists(), f"{command[0]} loaded the pickle"
    assert sim.stats.received == received + 1, "the pickled row is asked again"

    # A merge into the folder that holds the row replaces it with the healthy copy's answer.
    _set_row(study.cache, keys[0], "mode = ?, value = ?", _PICKLE_MODE, payload)
    merged = run_process("cache", "merge", str(study.cache), str(good))
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert not marker.exists(), "merge into the folder loaded the pickle"
    assert _missing(run_process("status", str(study.config)).stdout) == 0


def test_a_row_naming_dev_zero_or_a_fifo_reads_as_damaged_at_once(
    sim: SimServer, study: StudyFiles
) -> None:
    keys = _filled(sim, study)
    fifo = study.root / "fifo"
    os.mkfifo(fifo)
    _set_row(study.cache, keys[0], "mode = ?, filename = ?, value = NULL", 1, "/dev/zero")
    _set_row(study.cache, keys[1], "mode = ?, filename = ?, value = NULL", 3, str(fifo))
    _set_row(study.cache, keys[2], "filename = ?", "/dev/zero")  # raw mode, a file named too

    status = run_process("status", str(study.config), timeout=60)
    assert status.returncode == 0, status.stderr
    assert _missing(status.stdout) == 3, status.stdout
    verify = run_process("cache", "verify", str(study.cache), timeout=60)
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert "3 of" in verify.stdout, verify.stdout
    received = sim.stats.received
    rerun = run_process("run", str(study.config), "--quiet", timeout=60)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert sim.stats.received == received + 3, "the three rows are asked again"
    assert fifo.exists() and _missing(run_process("status", str(study.config)).stdout) == 0


def test_a_plain_diskcache_reads_every_answer_through_get(
    sim: SimServer, study: StudyFiles
) -> None:
    keys = _filled(sim, study)
    assert not list(study.cache.rglob("*.val")), "every value is kept in its row"
    with diskcache.Cache(str(study.cache)) as plain:
        stored = [key for key in plain.iterkeys() if key.startswith("g2-")]
        assert set(keys) <= set(stored)
        for key in stored:
            entry = CachedResponse.decode(plain.get(key))
            assert entry.key == key
            assert entry.choices(), key


def test_a_key_that_does_not_decode_every_command_agrees_and_repair_removes_it(
    sim: SimServer, study: StudyFiles
) -> None:
    keys = _filled(sim, study)
    damaged = keys[3].encode()[:-1] + b"\xff"  # one byte of the key turned to 0xff
    with sqlite3.connect(study.cache / "cache.db") as db:
        db.execute("UPDATE Cache SET key = CAST(? AS TEXT) WHERE key = ?", (damaged, keys[3]))
    db.close()
    received = sim.stats.received

    status = run_process("status", str(study.config))
    assert status.returncode == 0, status.stderr
    assert _missing(status.stdout) == 1, status.stdout
    strict = run_process("score", str(study.config), "--strict")
    assert strict.returncode == 2, strict.stdout + strict.stderr
    assert "1 of " in strict.stderr and "have no answer in the cache" in strict.stderr
    verify = run_process("cache", "verify", str(study.cache))
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert "1 entries have a key that does not decode" in verify.stdout, verify.stdout
    assert "cache verify --repair" in verify.stdout
    rerun = run_process("run", str(study.config), "--quiet")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert sim.stats.received == received + 1, "the one whose key was damaged is asked again"
    assert _missing(run_process("status", str(study.config)).stdout) == 0

    repair = run_process("cache", "verify", "--repair", str(study.cache))
    assert repair.returncode == 0, repair.stdout + repair.stderr
    clean = run_process("cache", "verify", str(study.cache))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    again = run_process("run", str(study.config), "--quiet")
    assert again.returncode == 0 and sim.stats.received == received + 1, again.stdout


def test_verify_repair_removes_damaged_entries_so_a_run_asks_them_again(
    sim: SimServer, study: StudyFiles
) -> None:
    keys = _filled(sim, study)
    _set_row(study.cache, keys[0], "value = ?", b"\x00not an entry")
    _set_row(study.cache, keys[1], "mode = ?, value = ?", _PICKLE_MODE, b"\x80\x05junk")
    received = sim.stats.received
    repair = run_process("cache", "verify", "--repair", str(study.cache))
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert "2 of" in repair.stdout and "removed" in repair.stdout, repair.stdout
    assert run_process("cache", "verify", str(study.cache)).returncode == 0
    rerun = run_process("run", str(study.config), "--quiet")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert sim.stats.received == received + 2


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_a_damaged_byte_in_the_database_s_schema_is_one_line(
    sim: SimServer, study: StudyFiles
) -> None:
    _filled(sim, study)
    with sqlite3.connect(study.cache / "cache.db", isolation_level=None) as db:
        name, sql = db.execute(
            "SELECT name, sql FROM sqlite_master WHERE name = 'Settings_size_delete'"
        ).fetchone()
        damaged = bytearray(sql.encode())
        damaged[len(damaged) // 2] = 0xFF
        db.execute("PRAGMA writable_schema = ON")
        db.execute(
            "UPDATE sqlite_master SET sql = CAST(? AS TEXT) WHERE name = ?", (bytes(damaged), name)
        )
    db.close()
    for command in ("status", "run"):
        line = _one_line(run_process(command, str(study.config)))
        assert str(study.cache) in line and "damaged" in line, line


def test_a_damaged_claims_folder_is_one_line_naming_it(sim: SimServer, study: StudyFiles) -> None:
    _filled(sim, study)
    (study.cache / "claims" / "cache.db").write_bytes(b"not a database at all" * 100)
    line = _one_line(run_process("run", str(study.config), "--n", "5", "--quiet"))
    assert str(study.cache / "claims") in line and "delete that folder" in line, line


def test_a_folder_that_is_not_a_cache_is_not_adopted(sim: SimServer, study: StudyFiles) -> None:
    study.cache.mkdir()
    (study.cache / "thesis.tex").write_text("\\documentclass{article}")
    study.write_config(sim.base_url)
    line = _one_line(run_process("run", str(study.config), "--quiet"))
    assert "not a cache folder" in line and "thesis.tex" in line, line
    assert sorted(path.name for path in study.cache.iterdir()) == ["thesis.tex"]
    assert sim.stats.received == 0


def test_an_entry_copied_under_another_key_is_never_counted_for_it(
    sim: SimServer, study: StudyFiles
) -> None:
    keys = _filled(sim, study)
    # One item's answer, checksum and all, copied over another's row: read as it was, that
    # answer would count for an item it does not belong to.
    with sqlite3.connect(study.cache / "cache.db") as db:
        db.execute(
            "UPDATE Cache SET value = (SELECT value FROM Cache WHERE key = ?) WHERE key = ?",
            (keys[0], keys[1]),
        )
    db.close()
    received = sim.stats.received

    status = run_process("status", str(study.config))
    assert _missing(status.stdout) == 1, status.stdout
    verify = run_process("cache", "verify", str(study.cache))
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert f"{keys[1]}: holds the entry of another key ({keys[0]})" in verify.stdout
    rerun = run_process("run", str(study.config), "--quiet")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert sim.stats.received == received + 1, "the item whose row was overwritten is asked again"
    assert _missing(run_process("status", str(study.config)).stdout) == 0
    with diskcache.Cache(str(study.cache)) as plain:
        assert CachedResponse.decode(plain.get(keys[1])).key == keys[1]
