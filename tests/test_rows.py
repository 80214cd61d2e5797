"""The hot path's bulk writes: rows diskcache itself reads as its own, and who stored first.

``JudgeCache.put_many`` and the claims write many rows with a few statements
(:mod:`geval_async.judging.rows`) instead of diskcache's ``add``; the rows must be exactly
what diskcache would have written, in a real cache folder, read back by a plain
``diskcache.Cache``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import diskcache

from geval_async.judging.cache import CachedResponse, JudgeCache
from geval_async.judging.claims import Claims
from geval_async.options import EntryStatus

BODY = '{"choices":[{"index":0,"message":{"role":"assistant","content":"4"}}]}'


def _entry(key: str, body: str = BODY) -> CachedResponse:
    return CachedResponse(
        key=key,
        status=EntryStatus.OK,
        http_status=200,
        body=body,
        time=1.0,
        latency_ms=2.0,
        attempts=1,
        n=1,
        draw=0,
        model="judge",
        record_id="r1",
        criterion="clarity",
        received=1,
    )


def test_bulk_rows_read_back_through_plain_diskcache(tmp_path: Path) -> None:
    entries = [_entry(f"g2-{i:04d}") for i in range(1_000)]  # more than one IN (...) chunk
    big = _entry("g2-big", BODY[:-2] + "," + '"pad":"' + "x" * 100_000 + '"}]}')
    with JudgeCache(tmp_path) as cache:
        assert cache.put_many([(e, False) for e in [*entries, big]]) == [True] * 1_001
    with diskcache.Cache(str(tmp_path)) as plain:
        assert len(plain) == 1_001, "diskcache's own count follows the bulk insert"
        assert plain.get("g2-0007") == entries[7].encode()
        assert plain.get("g2-big") == big.encode(), "a value over 32 kB stays readable"
    with JudgeCache(tmp_path, create=False) as cache:
        assert cache.get("g2-0999") == entries[999]


def test_the_first_writer_of_a_key_wins_unless_overwriting(tmp_path: Path) -> None:
    first, again = _entry("g2-a"), replace(_entry("g2-a"), latency_ms=99.0)
    with JudgeCache(tmp_path) as cache:
        # Twice in one batch: the second is not stored.
        assert cache.put_many([(first, False), (again, False)]) == [True, False]
        assert cache.put_many([(again, False)]) == [False], "another writer stored it first"
        assert cache.get("g2-a") == first
        assert cache.put_many([(again, True)]) == [True], "--retry-failed replaces it"
        assert cache.get("g2-a") == again


def test_a_damaged_row_is_replaced_by_the_next_answer(tmp_path: Path) -> None:
    with diskcache.Cache(str(tmp_path)) as plain:
        plain.set("g2-a", b"not an entry")
    with JudgeCache(tmp_path) as cache:
        assert cache.put_many([(_entry("g2-a"), False)]) == [True]
        assert cache.get("g2-a") == _entry("g2-a")


def test_claims_in_one_batch_respect_other_runs_and_repeats(tmp_path: Path) -> None:
    with Claims(tmp_path, 60.0) as mine, Claims(tmp_path, 60.0) as other:
        assert other.claim("g2-b")
        assert mine.claim_many(["g2-a", "g2-b", "g2-a", "g2-c"]) == [True, False, False, True]
        # Letting go and taking in one transaction: only this run's claims are let go.
        assert mine.settle(["g2-a", "g2-b"], ["g2-a"]) == [True]
        assert not other.claim("g2-a") and not other.claim("g2-c")
        mine.release_many(["g2-a", "g2-c"])
        assert other.claim_many(["g2-a", "g2-c"]) == [True, True]
