"""SIGKILL at random points, then resume: nothing stored is ever asked again, nothing is lost.

A 2,000-request run (1,000 records x 2 criteria, n = 3) against the simulated judge is killed
with SIGKILL at 20 seeded random points (when the server has answered a random fraction of the
plan) and resumed each time. The final cache must be complete and score exactly like an
uninterrupted run in a separate cache, and every request the server answered twice must be
explained by an answer that was in flight at a kill (answered but not yet in the cache).
"""

from __future__ import annotations

import hashlib
import random
import subprocess
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from conftest import (
    PROMPT_A,
    PROMPT_B,
    StudyFiles,
    cache_snapshot,
    run_process,
    start_process,
    write_records,
)

from geval_async.judging.store.cache import JudgeCache
from geval_async.judging.store.read_model import StudyAnswers
from geval_async.scoring.scores.scores import score_items
from geval_async.sim import SimServer, SimSettings
from geval_async.study.config import apply_overrides, load_config
from geval_async.study.plan import Study, first_request, plan_items
from geval_async.study.prepare import prepare_study

CONCURRENCY = 12
KILLS = 20
USERS = 500  # x 2 conditions = 1,000 records, x 2 criteria = 2,000 requests
SETTINGS = {"latency_ms": 10.0, "latency_sigma": 0.4}


def _big_study(root: Path, base_url: str) -> StudyFiles:
    (root / "prompts").mkdir(parents=True)
    (root / "prompts" / "clar.txt").write_text(PROMPT_A, encoding="utf-8")
    (root / "prompts" / "fit.txt").write_text(PROMPT_B, encoding="utf-8")
    records = root / "records.jsonl"
    files = StudyFiles(
        root,
        root / "config.toml",
        records,
        root / "cache",
        root / "out",
        write_records(records, USERS),
    )
    files.write_config(base_url, limits={"concurrency": CONCURRENCY, "retries": 4, "timeout": 30})
    return files


def _load(config: Path, cache: Path) -> Study:
    return prepare_study(apply_overrides(load_config(config), cache=str(cache)))


def _digest_to_key(study: Study) -> dict[str, str]:
    """sha256 of each request body as the transport sends it (what the sim counts) -> key."""
    out = {}
    for item in plan_items(study):
        request = first_request(item, study.config)
        out[hashlib.sha256(orjson.dumps(request.body)).hexdigest()] = request.key
    return out


def _start(config: Path, cache: Path) -> subprocess.Popen[str]:
    return start_process("run", str(config), "--quiet", "--cache", str(cache))


def _settle(server: SimServer) -> None:
    """Wait until the server has finished every request of the killed process."""
    deadline = time.monotonic() + 30
    for _ in range(2):
        while server.stats.in_flight or server.stats.received != len(server.stats.events):
            assert time.monotonic() < deadline, "the server never settled after the kill"
            time.sleep(0.002)
        # A round trip through the server's loop: data the dead client left in the socket
        # buffers has been read (and its handlers started) by the time this returns.
        with urllib.request.urlopen(f"{server.root_url}/sim/stats", timeout=10) as response:
            response.read()


def _duplicates(answered: Counter[str]) -> int:
    return sum(answered.values()) - len(answered)


def _scores(study: Study) -> dict[tuple[str, str], tuple[str, float | None, tuple[str, ...]]]:
    with JudgeCache(study.config.cache_path, create=False) as cache:
        return {
            (s.record_id, s.criterion): (s.status, s.weighted_score, s.answers)
            for s in score_items(study, StudyAnswers(study, cache))
        }


@dataclass
class Kill:
    """What one kill left behind, as the server saw it."""

    target: int  # distinct requests answered when the kill was sent
    sim_in_flight: int  # sim.stats.in_flight at the kill (requests inside a handler)
    in_flight: int  # requests of the killed run the server received that never reached the cache
    lost: int  # of those, answered by the server (paid for) but not stored: asked again later
    stored: int  # cache entries after the kill
    carried: int  # answers lost at earlier kills and not asked again yet
    duplicates: int = 0  # sum(answered) - distinct, after this kill's resume


@pytest.mark.slow
def test_twenty_sigkills_then_resume_match_an_uninterrupted_run(tmp_path: Path) -> None:
    rng = random.Random(20240611)
    with SimServer(SimSettings(**SETTINGS)) as server:
        files = _big_study(tmp_path / "study", server.base_url)
        study = _load(files.config, files.cache)
        digest_to_key = _digest_to_key(study)
        total = len(digest_to_key)
        assert total == 2 * 2 * USERS

        kills: list[Kill] = []
        lost_at: Counter[str] = Counter()  # digest -> kills at which its answer was lost
        pending: set[str] = set()  # lost and not asked again yet
        # Distinct percentages, so every resumed run gets some way before its kill.
        for percent in sorted(rng.sample(range(3, 98), KILLS)):
            before = Counter(server.stats.answered)
            arrivals_before = len(server.stats.arrivals)
            target = max(total * percent // 100, len(before) + 1)
            process = _start(files.config, files.cache)
            deadline = time.monotonic() + 120
            while len(server.stats.answered) < target:
                if process.poll() is not None:
                    pytest.fail(f"the run ended before its kill: {process.communicate()[1]}")
                assert time.monotonic() < deadline, "the run made no progress"
                time.sleep(0.001)
            sim_in_flight = server.stats.in_flight
            process.kill()
            process.communicate()  # its pipes read to their end and closed
            _settle(server)
            if kills:
                kills[-1].duplicates = _duplicates(server.stats.answered)

            stored = set(cache_snapshot(files.cache))
            assert stored <= set(digest_to_key.values()), "the cache holds a key of no request"
            received = {d for _, d in server.stats.arrivals[arrivals_before:]}
            in_flight = {d for d in received if digest_to_key[d] not in stored}
            after = server.stats.answered
            lost = {d for d in in_flight if after[d] > before[d]}
            lost_at.update(lost)
            pending = {d for d in pending if after[d] == before[d]}
            kills.append(
                Kill(
                    target,
                    sim_in_flight,
                    len(in_flight),
                    len(lost),
                    len(stored),
                    carried=len(pending),
                )
            )
            pending |= lost
            # Each answer is written the moment it arrives and at most `concurrency` requests
            # are out, so a kill can only cost the requests in flight, never stored ones.
            assert len(in_flight) <= CONCURRENCY, kills[-1]
            assert 0 < len(stored) < total, kills[-1]

        final = run_process("run", str(files.config), "--quiet", timeout=300)
        assert final.returncode == 0, final.stdout + final.stderr
        answered = server.stats.answered
        kills[-1].duplicates = _duplicates(answered)

    print(
        "\nkill: target, sim in flight, in flight (sent, not stored), lost (answered, not "
        "stored), stored, carried, duplicates after the resume"
    )
    for number, kill in enumerate(kills, 1):
        print(
            f"  {number:2d}: {kill.target:5d} {kill.sim_in_flight:3d} {kill.in_flight:3d} "
            f"{kill.lost:3d} {kill.stored:5d} {kill.carried:2d} {kill.duplicates:4d}"
        )
    total_duplicates = _duplicates(answered)
    print(f"duplicates: {total_duplicates} over {KILLS} kills")

    assert set(answered) == set(digest_to_key), "every request of the plan was answered"
    assert len(cache_snapshot(files.cache)) == total, "the final cache is complete"
    # Every extra answer is one that was in flight at a kill; nothing in the cache was re-asked.
    for digest, count in answered.items():
        assert count == 1 + lost_at[digest], (digest, count, lost_at[digest])
    previous = 0
    for kill in kills:
        # The duplicates a resume adds re-ask what was in flight at its kill (plus, rarely,
        # an earlier kill's loss whose re-ask was itself cut off before it was answered).
        assert kill.duplicates - previous <= kill.in_flight + kill.carried, kill
        previous = kill.duplicates
    assert total_duplicates == sum(k.lost for k in kills) <= sum(k.in_flight for k in kills)

    # The same plan, uninterrupted, in its own cache against a server with the same settings.
    reference_cache = tmp_path / "reference-cache"
    with SimServer(SimSettings(**SETTINGS)) as reference_server:
        files.write_config(
            reference_server.base_url,
            limits={"concurrency": CONCURRENCY, "retries": 4, "timeout": 30},
        )
        reference = run_process(
            "run", str(files.config), "--quiet", "--cache", str(reference_cache), timeout=300
        )
        assert reference.returncode == 0, reference.stdout + reference.stderr
        assert sum(reference_server.stats.answered.values()) == total

    resumed_scores = _scores(_load(files.config, files.cache))
    reference_scores = _scores(_load(files.config, reference_cache))
    assert len(resumed_scores) == total
    assert all(status == "scored" for status, _, _ in resumed_scores.values())
    assert resumed_scores == reference_scores
