"""Sampling that grows: raising n asks only for the new samples, lowering it asks for nothing.

Keys do not hold the total n (see geval_async/study/keys.py), so a study judged with n = 5
and then n = 20 pays for 15 more samples per item, counted by the simulated judge itself, and
scores exactly like a study judged with n = 20 from the start. Caches written by the first key
scheme (tests/data/legacy: written by geval-async at commit 10c036d against this file's study)
are refused until `geval-async cache migrate CONFIG` moves them, then never asked again.
"""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
from pathlib import Path

import diskcache
import pandas as pd
import pytest
from conftest import ROOT, StudyFiles, cache_snapshot, run_cli, run_study, summary_cells

from geval_async.sim import SimServer

LEGACY = ROOT / "tests" / "data" / "legacy"


def _long_table(study: StudyFiles, *flags: str) -> str:
    """The long score table `geval-async score` writes with these flags."""
    out = study.root / ("out" + "".join(flags).replace("-", "_").replace("/", "_"))
    result = run_cli("score", str(study.config), "--output", str(out), *flags)
    assert result.returncode == 0, result.stderr
    # --limit (like --criteria) is in the output names: t-limit-3_long.csv
    (long_table,) = (out / "scores").glob("t*_long.csv")
    return long_table.read_text(encoding="utf-8")


def _same_as_legacy(table: str, name: str) -> None:
    """The long table equals the one the first key scheme's code wrote, in every column that
    code wrote (the standard error ``se`` came later)."""
    ours = pd.read_csv(io.StringIO(table), dtype=str, keep_default_na=False)
    theirs = pd.read_csv(LEGACY / f"{name}_long.csv", dtype=str, keep_default_na=False)
    assert "se" in ours.columns
    pd.testing.assert_frame_equal(ours[list(theirs.columns)], theirs)


def _items(study: StudyFiles, limit: int | None = None) -> int:
    return 2 * (study.n_records if limit is None else limit)


def test_raising_n_asks_only_for_the_new_samples(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url, sampling={"n": 5, "seed": 1})
    assert run_study(study).returncode == 0
    items = _items(study)
    assert (sim.stats.received, sim.stats.samples) == (items, 5 * items)

    grown = run_study(study, "--n", "20")
    assert grown.returncode == 0, grown.stderr
    # One request per item, asking for exactly the 15 samples it lacks.
    assert (sim.stats.received, sim.stats.samples) == (2 * items, 20 * items)
    assert run_study(study, "--n", "20").returncode == 0
    assert sim.stats.received == 2 * items, "the grown study is complete"

    # The same scores as a study judged with n = 20 from the start (in a cache of its own).
    fresh = study.root / "fresh"
    assert run_study(study, "--n", "20", "--cache", str(fresh)).returncode == 0
    assert _long_table(study, "--n", "20") == _long_table(study, "--n", "20", "--cache", str(fresh))


def test_lowering_n_reads_the_first_samples_and_sends_nothing(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url, sampling={"n": 20, "seed": 1})
    assert run_study(study).returncode == 0
    received = sim.stats.received
    before = cache_snapshot(study.cache)

    fewer = run_study(study, "--n", "5")
    assert fewer.returncode == 0, fewer.stderr
    assert sim.stats.received == received, "n = 5 after n = 20 must not send a request"
    assert cache_snapshot(study.cache) == before

    # Scored from the first 5 samples of each item: the scores of a study judged with n = 5.
    fresh = study.root / "fresh"
    assert run_study(study, "--n", "5", "--cache", str(fresh)).returncode == 0
    lowered = _long_table(study, "--n", "5")
    assert lowered == _long_table(study, "--n", "5", "--cache", str(fresh))
    assert lowered != _long_table(study, "--n", "20")
    assert ',5,0,1.0,"' in lowered  # 5 valid samples, 0 invalid


@pytest.mark.parametrize("server", ["ignore_n", "max_n"])
def test_servers_returning_one_choice_grow_the_same_way(
    sim: SimServer, study: StudyFiles, server: str
) -> None:
    # llama.cpp ignores n; llama-server with one slot refuses n > 1 (then every request asks 1).
    if server == "ignore_n":
        sim.settings.ignore_n = True
    else:
        sim.settings.max_n = 1
    study.write_config(sim.base_url, sampling={"n": 2})
    assert run_study(study, "--limit", "3").returncode == 0
    items = _items(study, 3)
    assert sim.stats.samples == 2 * items
    answered = sim.stats.by_status[200]
    assert answered == 2 * items

    grown = run_study(study, "--limit", "3", "--n", "4")
    assert grown.returncode == 0, grown.stderr
    assert sim.stats.samples == 4 * items
    assert sim.stats.by_status[200] - answered == 2 * items, "one request per new sample"
    before = sim.stats.received
    assert run_study(study, "--limit", "3", "--n", "3").returncode == 0
    assert sim.stats.received == before


def _load_legacy(study: StudyFiles, name: str) -> None:
    """Put the entries the first key scheme wrote into the study's cache folder."""
    rows = [json.loads(line) for line in (LEGACY / f"{name}.jsonl").read_text().splitlines()]
    with diskcache.Cache(str(study.cache)) as cache:
        for row in rows:
            cache.set(row["key"], row["value"].encode())


def _keys(path: Path) -> set[str]:
    return {key[:3] for key in cache_snapshot(path)}


def _refused(result: subprocess.CompletedProcess[str], study: StudyFiles) -> None:
    """One line naming the cache folder and `cache migrate`, exit 2."""
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert str(study.cache) in lines[0] and "`geval-async cache migrate CONFIG`" in lines[0]


def _migrate(study: StudyFiles, moved: int) -> None:
    migrated = run_cli("cache", "migrate", str(study.config))
    assert migrated.returncode == 0, migrated.stderr
    assert f"moved {moved} entries" in migrated.stdout, migrated.stdout


def test_a_cache_of_the_first_key_scheme_is_refused_until_migrated(
    sim: SimServer, study: StudyFiles
) -> None:
    _load_legacy(study, "samples_n3")
    study.write_config(sim.base_url)  # n = 3, as the old cache was written
    before = cache_snapshot(study.cache)
    for command in ("status", "score", "run", "answers"):
        _refused(run_cli(command, str(study.config)), study)
    _refused(run_cli("cache", "stats", str(study.cache)), study)
    assert sim.stats.received == 0
    assert cache_snapshot(study.cache) == before, "a refused command writes nothing"
    assert not (study.output / "scores").exists()

    _migrate(study, _items(study))
    assert _keys(study.cache) == {"g2-"}
    status = run_cli("status", str(study.config))
    assert status.returncode == 0, status.stderr
    total = summary_cells(status.stdout)
    assert total == [str(_items(study)), str(_items(study)), "0", "0"]
    # Scored from the moved entries: what the old code scored.
    _same_as_legacy(_long_table(study), "samples_n3")
    again = run_study(study)
    assert again.returncode == 0, again.stderr
    assert sim.stats.received == 0, "no paid-for answer is asked again"
    stats = run_cli("cache", "stats", str(study.cache))
    assert stats.returncode == 0 and "old keys" not in stats.stdout, stats.stdout


def test_a_cache_of_the_first_key_scheme_grows(sim: SimServer, study: StudyFiles) -> None:
    _load_legacy(study, "samples_n3")
    study.write_config(sim.base_url, sampling={"n": 5})
    items = _items(study)
    _migrate(study, items)
    # After the migration status sees the 3 old samples; 2 are missing.
    status = run_cli("status", str(study.config))
    total = summary_cells(status.stdout)
    assert total == [str(items), "0", "0", str(items)]

    grown = run_study(study)
    assert grown.returncode == 0, grown.stderr
    assert (sim.stats.received, sim.stats.samples) == (items, 2 * items)
    assert _keys(study.cache) == {"g2-"}
    # n = 3 still scores the old samples, exactly as the old code did.
    _same_as_legacy(_long_table(study, "--n", "3"), "samples_n3")


def test_a_first_scheme_cache_from_a_server_ignoring_n(sim: SimServer, study: StudyFiles) -> None:
    # Written against ignore_n: per item, draw 0 (n = 3, one choice) and two draws of n = 1.
    _load_legacy(study, "ignore_n_n3")
    sim.settings.ignore_n = True
    study.write_config(sim.base_url)
    migrated = run_cli("cache", "migrate", str(study.config), "--limit", "3")
    assert migrated.returncode == 0, migrated.stderr
    assert f"moved {3 * _items(study, 3)} entries" in migrated.stdout, migrated.stdout
    _same_as_legacy(_long_table(study, "--limit", "3"), "ignore_n_n3")
    assert run_study(study, "--limit", "3").returncode == 0
    assert sim.stats.received == 0
    _same_as_legacy(_long_table(study, "--limit", "3"), "ignore_n_n3")
    assert run_study(study, "--limit", "3", "--n", "4").returncode == 0
    assert (sim.stats.received, sim.stats.samples) == (_items(study, 3), _items(study, 3))


def test_old_answers_of_an_item_the_new_keys_answer_too_are_kept(
    sim: SimServer, study: StudyFiles
) -> None:
    # A mixed history: the new code judged n = 2 first, then a cache of the first key scheme
    # (n = 3, the same items) was copied in and migrated. Five samples per item are paid for.
    study.write_config(sim.base_url, sampling={"n": 2})
    assert run_study(study).returncode == 0
    items = _items(study)
    assert sim.stats.samples == 2 * items
    _load_legacy(study, "samples_n3")
    study.write_config(sim.base_url, sampling={"n": 5})
    _migrate(study, items)
    grown = run_study(study)
    assert grown.returncode == 0, grown.stderr
    assert sim.stats.samples == 2 * items, "the old answers make up the 5: nothing is asked"
    assert _keys(study.cache) == {"g2-"}


def test_a_migrate_interrupted_mid_item_never_counts_an_answer_twice(
    sim: SimServer, study: StudyFiles
) -> None:
    _load_legacy(study, "samples_n3")
    study.write_config(sim.base_url)
    items = _items(study)
    # The migrate fails (as a kill or Ctrl-C would stop it) the moment it drops one item's
    # old key: a trigger in the folder's own database refuses that delete.
    old_key = sorted(key for key in cache_snapshot(study.cache) if key.startswith("g1-"))[5]
    with sqlite3.connect(study.cache / "cache.db") as db:
        db.execute(
            "CREATE TRIGGER interrupt BEFORE DELETE ON Cache WHEN OLD.key = ?"
            " BEGIN SELECT RAISE(ABORT, 'interrupted'); END".replace("?", f"'{old_key}'")
        )
    db.close()
    stopped = run_cli("cache", "migrate", str(study.config))
    assert stopped.returncode != 0, stopped.stdout
    with sqlite3.connect(study.cache / "cache.db") as db:
        db.execute("DROP TRIGGER interrupt")
    db.close()

    again = run_cli("cache", "migrate", str(study.config))
    assert again.returncode == 0, again.stderr
    stats = run_cli("cache", "stats", str(study.cache))
    assert f"{items} answers holding {3 * items} samples" in stats.stdout, stats.stdout
    _same_as_legacy(_long_table(study), "samples_n3")


def _journal_record(key: str, value: bytes) -> bytes:
    """A record of the journal older runs kept (``<key length, value length, crc32 of the
    key, replace>``, the key, the entry's bytes)."""
    import struct
    import zlib

    raw = key.encode()
    return struct.pack("<HIIB", len(raw), len(value), zlib.crc32(raw), 0) + raw + value


def test_a_journal_left_by_an_older_run_is_stored_by_migrate_and_its_damage_said(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    stored = cache_snapshot(study.cache)
    moved = sorted(stored)[:6]  # answers the older run had journaled, not stored yet
    with diskcache.Cache(str(study.cache)) as cache:
        for key in moved:
            del cache[key]
    records = [_journal_record(key, stored[key]) for key in moved]
    damaged = bytearray(records[3])
    damaged[-5] ^= 1  # the fourth record's entry damaged: it alone is lost
    records[3] = bytes(damaged)
    (study.cache / "journal").mkdir(exist_ok=True)
    (study.cache / "journal" / "41-aa-000000.journal").write_bytes(b"".join(records))
    received = sim.stats.received

    _refused(run_cli("status", str(study.config)), study)  # its lock file gone, or not
    migrated = run_cli("cache", "migrate", str(study.config))
    assert migrated.returncode == 0, migrated.stderr
    assert "stored 5 answers a stopped run had kept" in migrated.stdout, migrated.stdout
    assert "1 damaged or cut-off records of it were left out" in migrated.stdout, migrated.stdout
    assert not (study.cache / "journal").exists()
    status = run_cli("status", str(study.config))
    assert summary_cells(status.stdout)[3] == "1", status.stdout  # missing: the damaged one
    assert run_study(study).returncode == 0
    assert sim.stats.received == received + 1
