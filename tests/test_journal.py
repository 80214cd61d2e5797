"""The answers' journal: what a killed run journaled reaches the cache, and nothing else does.

A run's worker goes on once its answer is in the run's journal (``<cache>/journal``), before the
answer is in the cache's table (geval_async/judging/store/journal.py). These tests write journals in
real processes killed with SIGKILL, then open the folder as any later command does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import ROOT, StudyFiles, cached_answer, run_process

from geval_async.judging.store.cache import JudgeCache
from geval_async.judging.store.journal import Journal, decode, encode
from geval_async.sim import SimServer

_WRITER = textwrap.dedent(
    """
    import sys, time
    from dataclasses import replace
    from pathlib import Path
    from geval_async.judging.store.journal import Journal
    from geval_async.judging.store.stored import CachedResponse

    from geval_async.judging.store.claims import Claims

    folder, count = Path(sys.argv[1]), int(sys.argv[2])
    claims = Claims(folder, 60.0)  # held as a run holds its requests' claims
    claims.claim_many([f"g2-{i:04d}" for i in range(count)])
    journal = Journal(folder)
    sample = CachedResponse.decode(Path(sys.argv[3]).read_bytes())
    for i in range(count):
        entry = replace(sample, key=f"g2-{i:04d}")
        journal.append([(entry.key, entry.encode(), False)])
    print("journaled", flush=True)
    time.sleep(60)
    """
)


def _killed_writer(folder: Path, count: int, tmp_path: Path) -> None:
    """A process that journals ``count`` answers into ``folder`` and is SIGKILLed."""
    sample = tmp_path / "entry.bin"
    sample.write_bytes(cached_answer("g2-sample").encode())
    process = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(folder), str(count), str(sample)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ},
    )
    assert process.stdout is not None
    with process.stdout:
        assert process.stdout.readline().strip() == "journaled"
        process.send_signal(signal.SIGKILL)
        process.wait()


def test_a_killed_runs_journal_is_folded_by_the_next_open(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    JudgeCache(folder).close()
    _killed_writer(folder, 300, tmp_path)
    with JudgeCache(folder, create=False) as reader:
        assert reader.get("g2-0000") is None, "a reader changes nothing: not folded yet"
    with JudgeCache(folder) as cache:
        stored = [cache.get(f"g2-{i:04d}") for i in range(300)]
    assert all(entry is not None and entry.ok for entry in stored), "every journaled answer"
    assert list((folder / "journal").iterdir()) == [], "the journal is gone once folded"


def test_a_record_cut_short_ends_the_journal_there(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    JudgeCache(folder).close()
    _killed_writer(folder, 5, tmp_path)
    (segment,) = (folder / "journal").glob("*.journal")
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) - 10])  # the disk filled up during the last write
    with JudgeCache(folder) as cache:
        found = [cache.get(f"g2-{i:04d}") is not None for i in range(5)]
    assert found == [True, True, True, True, False]


def test_a_damaged_record_is_not_stored() -> None:
    records = [(f"g2-{i}", cached_answer(f"g2-{i}").encode(), False) for i in range(3)]
    data = bytearray(encode(records))
    assert list(decode(bytes(data))) == records
    data[-3] ^= 0xFF  # a byte of the last value changed
    assert list(decode(bytes(data))) == records[:2]


def test_a_live_runs_journal_is_left_to_it(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    JudgeCache(folder).close()
    journal = Journal(folder)  # held as a running run holds it
    entry = cached_answer("g2-live")
    journal.append([(entry.key, entry.encode(), False)])
    with JudgeCache(folder) as cache:
        assert cache.get("g2-live") is None, "another open does not take a live journal"
    journal.close(folded=False)  # the run ended without storing it: now it is an orphan
    with JudgeCache(folder) as cache:
        assert cache.get("g2-live") == entry


def test_a_finished_run_leaves_no_journal(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    result = run_process("run", str(study.config), "--quiet")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (study.cache / "journal").iterdir()) == [], "all deleted"
    with JudgeCache(study.cache, create=False) as cache:
        assert len(list(cache.keys())) == len(sim.stats.answered), "every answer in the table"


async def test_a_claim_taken_over_from_a_killed_run_finds_its_journaled_answer(
    tmp_path: Path,
) -> None:
    """Another run, already going when the first was killed, takes over the dead run's claims
    at once; the answers that run had journaled are stored first, so they are not asked again."""
    from geval_async.judging.run.writer import Writer
    from geval_async.judging.store.claims import Claims

    folder = tmp_path / "cache"
    JudgeCache(folder).close()
    with JudgeCache(folder) as cache, Claims(folder, 60.0) as claims:  # open before the kill
        _killed_writer(folder, 3, tmp_path)
        writer = Writer(cache, claims)
        found = await writer.claim_many(["g2-0000", "g2-0001", "g2-0002", "g2-9999"])
        writer.close()
        assert found == [(True, True)] * 3 + [(True, False)], "taken over, and found stored"
        assert cache.get("g2-0001") is not None


def test_status_and_dry_run_say_what_a_killed_runs_journal_holds(
    sim: SimServer, study: StudyFiles, tmp_path: Path
) -> None:
    study.write_config(sim.base_url)
    JudgeCache(study.cache).close()
    _killed_writer(study.cache, 5, tmp_path)
    for command in (["status"], ["run", "--dry-run"]):
        shown = run_process(*command[:1], str(study.config), *command[1:])
        assert shown.returncode == 0, shown.stderr
        assert "note: 5 answers of a run that was stopped before storing them" in shown.stdout
    JudgeCache(study.cache).close()  # a writer's open stores them
    after = run_process("status", str(study.config))
    assert "answers of a run that was stopped" not in after.stdout
