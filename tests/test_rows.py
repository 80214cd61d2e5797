"""Many rows at once: written by ``JudgeCache.put_many``, read back by our own reader.

``JudgeCache.put_many`` writes a group's new answers with one statement of its own
(:mod:`geval_async.judging.store.answer_table`, ``tests/test_answer_table.py``) and replacements
with
diskcache's ``add``/``set`` inside one ``transact()``; the claims keep a table of their own; the
bulk reads (a rerun's one pass, keyed batches, which keys are stored) are
our own (:mod:`geval_async.judging.store.rows`). What that reader relies on of diskcache's file is
pinned here: rows that diskcache writes, in a real cache folder, read back the same through
our reader as through a plain ``diskcache.Cache``, so a diskcache release that changes the
file fails these tests, not a user's cache.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import diskcache
from conftest import ANSWER_BODY as BODY
from conftest import cached_answer, incompressible

from geval_async.judging.store.cache import CachedResponse, JudgeCache
from geval_async.judging.store.claims import Claims
from geval_async.judging.store.rows import CacheRows


def _entry(key: str, body: str = BODY) -> CachedResponse:
    return cached_answer(key, body)


def test_bulk_rows_read_back_through_plain_diskcache(tmp_path: Path) -> None:
    entries = [_entry(f"g2-{i:04d}") for i in range(1_000)]  # more than one IN (...) chunk
    big = _entry("g2-big", BODY[:-2] + "," + '"pad":"' + incompressible(100_000) + '"}]}')
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


def test_our_reader_reads_what_diskcache_wrote(tmp_path: Path) -> None:
    entries = {f"g2-{i:04d}": _entry(f"g2-{i:04d}").encode() for i in range(1_000)}
    pad = incompressible(80_000)
    large = _entry("g2-large", BODY[:-2] + "," + '"pad":"' + pad + '"}]}').encode()
    with diskcache.Cache(str(tmp_path), disk_min_file_size=2**15) as plain:
        for key, value in entries.items():
            assert plain.add(key, value)
        plain.set("g2-large", large)  # over 32 kB: diskcache keeps it in a file of its own
        plain.set(("not", "a", "str", "key"), b"pickled key")
        plain.set("g2-text", "a str value")
    rows = CacheRows(tmp_path)
    try:
        keys = [*entries, "g2-large", "g2-text", "g2-absent"]
        assert rows.read(keys) == {**entries, "g2-large": None, "g2-text": None}
        assert rows.stored(keys) == {*entries, "g2-large", "g2-text"}
        assert dict(rows.scan()) == {**entries, "g2-large": None, "g2-text": None}
        assert rows.get("g2-large") == large, "a value in a file is read from its file"
        assert rows.get("g2-0007") == entries["g2-0007"] and rows.get("g2-text") == "a str value"
        assert rows.get("g2-absent", "absent") == "absent"
        assert list(rows.iterkeys()) == sorted([*entries, "g2-large", "g2-text"])
        assert rows.count() == len(entries) + 3
        # A run's writer thread asks which keys are stored while the loop's thread reads.
        with ThreadPoolExecutor(4) as pool:
            found = list(pool.map(lambda _: rows.read(keys), range(16)))
        assert all(each == {**entries, "g2-large": None, "g2-text": None} for each in found)
    finally:
        rows.close()
