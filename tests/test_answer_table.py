"""A run's new answers, written many at a time by our own statement, read as diskcache's own rows.

``JudgeCache.put_many`` inserts the new keys of a group with one ``executemany`` of our own
(:mod:`geval_async.judging.store.answer_table`). What it writes must be what ``diskcache.Cache.add``
writes: every check here goes through diskcache's public API on a real cache folder (``get``,
``len``, ``volume``, ``check``, ``delete``, ``evict``...), so a diskcache release that keeps
its count or size another way, or reads a row differently, fails here, not in a user's cache.
"""

from __future__ import annotations

import multiprocessing
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import diskcache
from conftest import cached_answer

from geval_async.judging.store.cache import CachedResponse, JudgeCache


def _entry(key: str, latency_ms: float = 2.0) -> CachedResponse:
    return cached_answer(key, latency_ms=latency_ms)


def _consistent(plain: diskcache.Cache) -> bool:
    """``Cache.check()`` finds the count, the size and every row consistent (the folder's files
    of ours beside diskcache's, the schema mark and the claims, are not its concern)."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # not errors: check() returns what it finds
        found = plain.check()
    return [w for w in found if not issubclass(w.category, diskcache.UnknownFileWarning)] == []


def test_grouped_answers_are_diskcaches_own_rows(tmp_path: Path) -> None:
    entries = [_entry(f"g2-{i:04d}") for i in range(1_000)]  # more than one IN (...) chunk
    with diskcache.Cache(str(tmp_path)) as plain:
        plain.set("g2-before", b"written by diskcache")
        volume = plain.volume()
    with JudgeCache(tmp_path) as cache:
        assert cache.put_many([(e, False) for e in entries]) == [True] * 1_000
    with diskcache.Cache(str(tmp_path)) as plain:
        assert _consistent(plain), "diskcache finds its count and size consistent"
        assert len(plain) == 1_001, "its count follows our insert"
        assert plain.get("g2-0007") == entries[7].encode()
        assert plain.get("g2-0007", read=False, expire_time=True, tag=True) == (
            entries[7].encode(),
            None,
            None,
        ), "no expiry, no tag: never evicted"
        assert plain.volume() >= volume
        assert "g2-0999" in plain
        assert plain.add("g2-0001", b"x") is False, "diskcache sees our row as present"
        assert plain.delete("g2-0001")
        assert len(plain) == 1_000, "and deletes it as its own"
        assert _consistent(plain)
        keys = list(plain.iterkeys())
        assert keys == sorted(keys) and len(keys) == 1_000
    with JudgeCache(tmp_path, create=False) as cache:
        assert cache.get("g2-0999") == entries[999]
        assert cache.get("g2-0001") is None


def test_a_key_another_writer_stored_is_left_as_it_is(tmp_path: Path) -> None:
    theirs, ours = _entry("g2-a", latency_ms=1.0), _entry("g2-a", latency_ms=9.0)
    with diskcache.Cache(str(tmp_path)) as plain:
        plain.add("g2-a", theirs.encode())
    with JudgeCache(tmp_path) as cache:
        assert cache.put_many([(_entry("g2-b"), False), (ours, False)]) == [True, False]
        assert cache.get("g2-a") == theirs
        # In one group, a replacement first and an add after it: the add finds it stored.
        again = replace(ours, attempts=3)
        assert cache.put_many([(ours, True), (again, False)]) == [True, False]
        assert cache.get("g2-a") == ours
    with diskcache.Cache(str(tmp_path)) as plain:
        assert len(plain) == 2 and _consistent(plain)


def test_two_writers_of_one_plan_store_each_answer_once(tmp_path: Path) -> None:
    JudgeCache(tmp_path).close()  # the folder made before either writer starts
    keys = [f"g2-{i:03d}" for i in range(300)]

    def write(latency_ms: float) -> list[bool]:
        done: list[bool] = []
        with JudgeCache(tmp_path) as cache:
            for start in range(0, len(keys), 7):
                group = [(_entry(k, latency_ms), False) for k in keys[start : start + 7]]
                done += cache.put_many(group)
        return done

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(write, (1.0, 2.0))
    assert all(a != b for a, b in zip(first, second, strict=True)), "each key stored by one"
    with diskcache.Cache(str(tmp_path)) as plain:
        assert len(plain) == 300 and _consistent(plain)


def _store(folder: str, start: int) -> None:
    with JudgeCache(Path(folder)) as cache:
        cache.put_many([(_entry(f"g2-{i:03d}"), False) for i in range(start, start + 200)])


def test_processes_writing_at_once_keep_the_count(tmp_path: Path) -> None:
    JudgeCache(tmp_path).close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_store, args=(str(tmp_path), s)) for s in (0, 100, 200)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(60)
        assert process.exitcode == 0
    with diskcache.Cache(str(tmp_path)) as plain:
        assert len(plain) == 400, "the overlapping keys stored once"
        assert _consistent(plain)
