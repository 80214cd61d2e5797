"""`geval-async cache ...`: merge, export/import, verify, stats, prune, migrate.

Every test judges a real study against the simulated judge into real cache folders, then runs
the cache commands as a user would (a fresh process each) and checks what a user would notice:
the scores, the requests a later run sends, the entries left.
"""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import diskcache
from conftest import StudyFiles, cache_snapshot, keys_by_digest, run_cli, run_study

from geval_async.judging.store.cache import CachedResponse
from geval_async.sim import SimServer


def _scores(study: StudyFiles, cache: Path, name: str) -> str:
    out = study.root / f"out-{name}"
    result = run_cli("score", str(study.config), "--cache", str(cache), "--output", str(out))
    assert result.returncode == 0, result.stderr
    return (out / "scores" / "t_long.csv").read_text()


def _tamper(cache: Path, key: str) -> CachedResponse:
    """Store a different answer under ``key`` (as another judge run might have)."""
    with diskcache.Cache(str(cache)) as raw:
        entry = CachedResponse.decode(raw[key])
        other = replace(entry, body=entry.body.replace('"content": "', '"content": "x'))
        raw[key] = other.encode()
    return other


def test_merging_overlapping_caches_is_a_union_that_keeps_the_first(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    first, second = study.root / "first", study.root / "second"
    assert run_study(study, "--limit", "4", "--cache", str(first)).returncode == 0
    assert run_study(study, "--limit", "8", "--cache", str(second)).returncode == 0
    clash = sorted(cache_snapshot(first))[0]
    _tamper(second, clash)

    merged = study.root / "merged"
    result = run_cli("cache", "merge", str(merged), str(first), str(second))
    assert result.returncode == 0, result.stderr
    # first: 4 records x 2 criteria; second: 8 x 2, of which 8 overlap (one with another answer)
    assert "16 entries added, 7 already there, 1 clashing, 0 damaged" in result.stdout
    assert clash in result.stdout
    assert cache_snapshot(merged)[clash] == cache_snapshot(first)[clash], "the first is kept"
    assert set(cache_snapshot(merged)) == set(cache_snapshot(second))

    received = sim.stats.received
    assert run_study(study, "--limit", "8", "--cache", str(merged)).returncode == 0
    assert sim.stats.received == received, "the merged cache answers both studies"


def test_export_then_import_scores_the_same_without_a_request(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    archive = study.root / "study.jsonl.gz"
    exported = run_cli("cache", "export", str(study.config), str(archive))
    assert exported.returncode == 0, exported.stderr
    assert f"wrote {2 * study.n_records} entries" in exported.stdout

    copy = study.root / "copy"
    imported = run_cli("cache", "import", str(archive), str(copy))
    assert imported.returncode == 0, imported.stderr
    assert f"{2 * study.n_records} entries added" in imported.stdout
    assert _scores(study, copy, "copy") == _scores(study, study.cache, "orig")
    received = sim.stats.received
    assert run_study(study, "--cache", str(copy)).returncode == 0
    assert sim.stats.received == received
    # Importing again adds nothing: every entry is already there.
    again = run_cli("cache", "import", str(archive), str(copy))
    assert f"0 entries added, {2 * study.n_records} already there" in again.stdout


def test_a_damaged_archive_is_refused_and_nothing_is_imported(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    archive = study.root / "study.jsonl.gz"
    assert run_cli("cache", "export", str(study.config), str(archive)).returncode == 0
    data = archive.read_bytes()
    lines = gzip.decompress(data).splitlines(keepends=True)

    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    edited = b"".join(lines).replace(b'\\"content\\": \\"', b'\\"content\\": \\"9', 1)
    assert edited != b"".join(lines)
    damaged = {
        "flipped": bytes(flipped),  # a bad byte in the compressed stream
        "cut": data[: len(data) * 2 // 3],  # a download cut short
        "edited": gzip.compress(edited),  # valid gzip, one answer changed
        "no-trailer": gzip.compress(b"".join(lines[:-1])),  # the checksum line lost
    }
    for name, content in damaged.items():
        bad = study.root / f"{name}.jsonl.gz"
        bad.write_bytes(content)
        dest = study.root / f"dest-{name}"
        result = run_cli("cache", "import", str(bad), str(dest))
        assert result.returncode == 2, (name, result.stdout, result.stderr)
        assert result.stderr.count("\n") == 1 and "damaged" in result.stderr, result.stderr
        assert "nothing was imported" in result.stderr
        assert not dest.exists(), f"{name}: the destination must not be created"


def test_verify_lists_damaged_entries(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    assert run_study(study, "--limit", "3").returncode == 0
    clean = run_cli("cache", "verify", str(study.cache))
    assert clean.returncode == 0, clean.stderr
    assert "all 6 entries decode" in clean.stdout

    keys = sorted(cache_snapshot(study.cache))
    with diskcache.Cache(str(study.cache)) as raw:
        raw[keys[0]] = b'{"v": 1, "key": "cut off'
        entry = CachedResponse.decode(raw[keys[1]])
        raw[keys[1]] = replace(entry, key=keys[2]).encode()
    result = run_cli("cache", "verify", str(study.cache))
    assert result.returncode == 1
    assert "2 of 6 entries are damaged" in result.stdout
    assert f"{keys[0]}: does not decode" in result.stdout
    assert f"{keys[1]}: holds the entry of another key" in result.stdout


def test_stats_counts_entries_by_model_and_criterion(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    assert run_study(study, "--limit", "3").returncode == 0
    assert run_study(study, "--limit", "2", "--model", "other-judge").returncode == 0
    result = run_cli("cache", "stats", str(study.cache))
    assert result.returncode == 0, result.stderr
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in result.stdout.splitlines()}
    assert rows[("sim-judge", "clar")] == ["3", "0"]  # records x answers, refusals
    assert rows[("other-judge", "fit")] == ["2", "0"]
    assert "10 entries (10 answers holding 30 samples, 0 refusals, 0 damaged)" in result.stdout


def test_prune_dry_run_then_prune_leaves_exactly_what_the_configs_use(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    assert run_study(study, "--limit", "3", "--model", "other-judge").returncode == 0
    assert run_study(study, "--limit", "2", "--n", "5").returncode == 0  # a second chunk each
    used = set(keys_by_digest(study).values())
    before = cache_snapshot(study.cache)
    assert len(before) == len(used) + 3 * 2 + 2 * 2

    dry = run_cli("cache", "prune", str(study.cache), "--unused-by", str(study.config), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would remove 10 entries, kept {len(used)}" in dry.stdout
    assert "6  other-judge  clar" not in dry.stdout and "3  other-judge  clar" in dry.stdout
    assert cache_snapshot(study.cache) == before, "a dry run removes nothing"

    pruned = run_cli("cache", "prune", str(study.cache), "--unused-by", str(study.config))
    assert pruned.returncode == 0, pruned.stderr
    assert f"removed 10 entries, kept {len(used)}" in pruned.stdout
    assert set(cache_snapshot(study.cache)) == used
    received = sim.stats.received
    assert run_study(study).returncode == 0
    assert sim.stats.received == received, "the config still has every answer it uses"

    by_model = run_cli("cache", "prune", str(study.cache), "--model", "sim-judge")
    assert f"removed {len(used)} entries, kept 0" in by_model.stdout
    nothing = run_cli("cache", "prune", str(study.cache))
    assert nothing.returncode == 2 and "--unused-by" in nothing.stderr
