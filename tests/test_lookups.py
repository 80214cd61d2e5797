"""How a run looks its plan up: one pass over a cache the plan covers, keyed batches otherwise.

A rerun reads the head of every entry of its plan. When the cache holds not much more than
the plan, it reads the whole table in one pass (``JudgeCache.scan_heads``); in a big, shared
cache it asks for the plan's keys in batches. Both must find the same: answers, refusals,
damaged entries (fetched again), entries kept in a file, another server's answers (read as
missing), absent keys. Real cache folders, the real CLI.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import diskcache
import orjson
from conftest import StudyFiles, cached_answer, incompressible, run_cli, run_study, summary_row

from geval_async.judging.store.cache import CachedResponse, JudgeCache
from geval_async.judging.store.head_table import HeadTable
from geval_async.judging.store.rows import CacheRows
from geval_async.options import EntryStatus
from geval_async.sim import SimServer
from geval_async.study.config import load_config
from geval_async.study.plan import (
    ChunkSizes,
    first_request,
    plan_chunks,
    plan_items,
    planned_requests,
)
from geval_async.study.prepare import prepare_study


def _entry(key: str, *, ok: bool = True, body: str = '{"choices": [{}, {}]}') -> CachedResponse:
    fields: dict[str, Any] = {"n": 2, "model": "m", "record_id": "r", "criterion": "c"}
    if not ok:
        fields.update(status=EntryStatus.REJECTED, http_status=400, error="refused")
    return cached_answer(key, body, received=2 if ok else 0, simulated=True, **fields)


def _set_value(folder: Path, key: str, value: bytes) -> None:
    with sqlite3.connect(folder / "cache.db") as db:
        db.execute("UPDATE Cache SET value = ? WHERE key = ?", (value, key))
    db.close()


def _cache_of_every_kind(folder: Path) -> list[str]:
    """A cache holding each kind of entry a lookup meets; the keys looked up (one absent)."""
    keys = [f"g2-{name}" for name in ("answered", "refused", "damaged", "file", "absent")]
    with JudgeCache(folder) as cache:
        for key in keys[:3]:
            assert cache.put(_entry(key, ok=key != "g2-refused"))
    damaged = bytearray(_entry("g2-damaged").encode())
    damaged[-3] ^= 1  # one flipped bit in the body
    _set_value(folder, "g2-damaged", bytes(damaged))
    # With its default of 32 kB (a cache written before geval-async raised it), diskcache
    # keeps a large value in a file next to the table, not in the row.
    long_body = orjson.dumps({"choices": [{}, {}], "pad": incompressible(80_000)}).decode()
    with diskcache.Cache(str(folder), disk_min_file_size=2**15) as raw:
        raw.set("g2-file", _entry("g2-file", body=long_body).encode())
    assert list(folder.rglob("*.val")), "the value is kept in a file"
    return keys


def _lookups(cache: JudgeCache, keys: list[str]) -> dict[str, tuple[bool, int] | None]:
    found = {}
    for key in keys:
        head = cache.head(key)
        found[key] = None if head is None else (head.ok, head.received)
    return found


def test_one_pass_and_keyed_batches_find_the_same_entries(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    keys = _cache_of_every_kind(folder)
    expected = {
        "g2-answered": (True, 2),
        "g2-refused": (False, 0),
        "g2-damaged": None,
        "g2-file": (True, 2),
        "g2-absent": None,
    }
    for create in (True, False):  # a run's cache, and a read-only one (status)
        with JudgeCache(folder, create=create) as whole:
            assert whole.scan_heads(planned=len(keys)), "4 entries for 5 lookups: one pass"
            assert _lookups(whole, keys) == expected
            assert whole.corrupted == {"g2-damaged"}
        with JudgeCache(folder, create=create) as batched:
            assert not batched.scan_heads(planned=1), "4 entries for 1 lookup: batches"
            batched.prefetch(keys)
            assert _lookups(batched, keys) == expected
            assert batched.corrupted == {"g2-damaged"}


def _heads(cache: JudgeCache, keys: list[str]) -> list[tuple[bool, int, bool] | None]:
    return [None if h is None else (h.ok, h.received, h.simulated) for h in cache.heads(keys)]


def test_one_pass_holds_every_key_exactly(tmp_path: Path) -> None:
    # A large cache's pass keeps keys as digests in sorted arrays, one per kind of head,
    # searched by their first 8 bytes: keys sharing those, a key in capitals, heads of several
    # kinds and damage must read as the keyed batches read them.
    shared = "ab" * 8
    keys = {
        "answered": f"g2-{shared}{'1' * 48}",
        "twin": f"g2-{shared}{'2' * 48}",  # the same first 8 bytes, and one choice of two
        "refused": f"g2-{'0' * 64}",
        "real server": f"g2-{'f' * 64}",
        "damaged": f"g2-{'c' * 64}",
        "capitals": f"g2-{'D' * 64}",
    }
    folder = tmp_path / "cache"
    with JudgeCache(folder) as cache:
        for name, key in keys.items():
            entry = _entry(key, ok=name != "refused")
            if name == "twin":
                entry = dataclasses.replace(entry, received=1)
            if name == "real server":
                entry = dataclasses.replace(entry, simulated=False)
            assert cache.put(entry)
    damaged = bytearray(_entry(keys["damaged"]).encode())
    damaged[-3] ^= 1
    _set_value(folder, keys["damaged"], bytes(damaged))
    asked = [
        *keys.values(),
        f"g2-{shared}{'3' * 48}",  # absent, with the first 8 bytes of two stored keys
        f"g2-{'d' * 64}",  # absent: only its capitals are stored
        "g2-short",
    ]
    expected = [
        (True, 2, True),
        (True, 1, True),
        (False, 0, True),
        (True, 2, False),
        None,
        (True, 2, True),
        None,
        None,
        None,
    ]
    # A large cache's pass (above 150,000 rows) keeps them in the arrays, read here from this
    # small one through the same reader.
    rows = CacheRows(folder)
    table = HeadTable.read(rows.scan())
    rows.close()
    assert table.unread == {keys["damaged"]}
    as_found = [None if h is None else (h.ok, h.received, h.simulated) for h in table.find(asked)]
    assert as_found == expected  # the damaged entry too: None, left to head() to judge
    assert [table.get(key) for key in asked] == table.find(asked)
    with JudgeCache(folder, create=False) as whole:
        assert whole.scan_heads(planned=len(asked))
        assert _heads(whole, asked) == expected
        assert _heads(whole, asked[::-1]) == expected[::-1]
        assert [whole.head(key) for key in asked] == whole.heads(asked)
        assert whole.corrupted == {keys["damaged"]}
    with JudgeCache(folder, create=False) as batched:
        assert not batched.scan_heads(planned=1)
        assert _heads(batched, asked) == expected
        assert batched.corrupted == {keys["damaged"]}


def test_after_forget_heads_lookups_see_new_entries(tmp_path: Path) -> None:
    with JudgeCache(tmp_path / "cache") as cache:
        assert cache.scan_heads(planned=10)
        assert cache.head("g2-new") is None
        cache.forget_heads()  # as a run does before it writes
        cache.put(_entry("g2-new"))
        cache.prefetch(["g2-new"])
        head = cache.head("g2-new")
        assert head is not None and head.ok


def _first_keys(study: StudyFiles) -> dict[tuple[str, str], str]:
    """(record id, criterion) -> the key of the item's first request."""
    plan = prepare_study(load_config(study.config))
    return {
        (item.record.id, item.criterion.name): first_request(item, plan.config).key
        for item in plan_items(plan)
    }


def _damage(study: StudyFiles, key: str) -> None:
    with sqlite3.connect(study.cache / "cache.db") as db:
        (value,) = db.execute("SELECT value FROM Cache WHERE key = ?", (key,)).fetchone()
        changed = bytearray(value)
        changed[-2] ^= 1
        db.execute("UPDATE Cache SET value = ? WHERE key = ?", (bytes(changed), key))
    db.close()


def _as_other_server(study: StudyFiles, key: str) -> None:
    """Make the entry under ``key`` read as another (not simulated) server's answer."""
    with sqlite3.connect(study.cache / "cache.db") as db:
        (value,) = db.execute("SELECT value FROM Cache WHERE key = ?", (key,)).fetchone()
        real = dataclasses.replace(CachedResponse.decode(value), simulated=False)
        db.execute("UPDATE Cache SET value = ? WHERE key = ?", (real.encode(), key))
    db.close()


def test_a_small_plan_in_a_big_cache_finds_damage_and_another_servers_answer(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    keys = _first_keys(study)
    _damage(study, keys["u000-A", "clar"])
    sent = sim.stats.received

    # --limit 2: 4 items in a cache of 48 entries, looked up in keyed batches.
    status = run_cli("status", str(study.config), "--limit", "2")
    assert status.returncode == 0, status.stderr
    assert summary_row(status.stdout)["missing"] == 1, status.stdout  # the damaged one
    _as_other_server(study, keys["u000-B", "fit"])
    rerun = run_study(study, "--limit", "2")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert summary_row(rerun.stdout) == {
        "items": 4,
        "cached": 2,
        "new": 2,
        "refused": 0,
        "failed": 0,
        "missing": 0,
    }
    assert sim.stats.received == sent + 2, "the damaged entry and the other server's, again"

    # The whole plan (one pass over the table) now finds everything stored.
    again = run_study(study)
    assert again.returncode == 0, again.stdout + again.stderr
    assert summary_row(again.stdout)["cached"] == study.n_records * 2
    assert sim.stats.received == sent + 2


def test_a_whole_plan_read_in_one_pass_finds_damage_and_another_servers_answer(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    keys = _first_keys(study)
    _damage(study, keys["u003-B", "fit"])
    sent = sim.stats.received

    status = run_cli("status", str(study.config))
    assert summary_row(status.stdout)["missing"] == 1, status.stdout
    _as_other_server(study, keys["u007-A", "clar"])
    rerun = run_study(study)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    row = summary_row(rerun.stdout)
    assert (row["cached"], row["new"]) == (study.n_records * 2 - 2, 2)
    assert sim.stats.received == sent + 2
    # The answers fetched again replaced the damaged and the other server's entries.
    with sqlite3.connect(study.cache / "cache.db") as db:
        values = dict(db.execute("SELECT key, value FROM Cache").fetchall())
    db.close()
    for key in (keys["u003-B", "fit"], keys["u007-A", "clar"]):
        assert CachedResponse.decode(values[key]).simulated


RUBRIC_CONFIG = """
[data]
path = "records.jsonl"
group = "user"
condition = "bot"
[judge]
model = "m"
base_url = "http://127.0.0.1:9/v1"
[sampling]
n = 3
seed = 11
[cache]
path = "cache"
[[criteria]]
name = "fair"
kind = "and"
prompt = "rubric.txt"
fields = ["reply", "turns"]
rubrics = [{ name = "a", text = "Quotes \\"{{reply}}\\" stay" }, { name = "b", text = "B\\n" }]
[[criteria]]
name = "plain"
prompt = "plain.txt"
scale = [1, 5]
fields = ["reply"]
"""


def test_a_walk_in_chunks_makes_each_first_request(tmp_path: Path) -> None:
    # Numbers in the fields (an integral float prints as "3"), quotes, braces and newlines in
    # the texts, rubrics: keys are content addresses users' caches depend on.
    (tmp_path / "rubric.txt").write_text("Rule: {{rubric}}\nReply: {{reply}} ({{turns}} turns)")
    (tmp_path / "plain.txt").write_text('"{{reply}}"\n\t\\ is it clear?')
    rows = [
        {"id": "1", "user": "u1", "bot": "A", "reply": 'She said "hi" {x}\n', "turns": 3.0},
        {"id": "2", "user": "u1", "bot": "B", "reply": 42, "turns": 2.5},
        {"id": "3", "user": "u2", "bot": "A", "reply": "naïve \u2028 ✓", "turns": 7},
    ]
    (tmp_path / "records.jsonl").write_text("".join(orjson.dumps(r).decode() + "\n" for r in rows))
    config = tmp_path / "config.toml"
    config.write_text(RUBRIC_CONFIG)
    plan = prepare_study(load_config(config))
    items = list(plan_items(plan))
    assert len(items) == 9  # 3 records x (2 rubrics + 1)
    one_by_one = [first_request(item, plan.config) for item in items]
    # A rerun's walk keys a chunk of items at a time, in plan order and in send order.
    firsts = [(r.item.record.id, r.item.criterion.name, r.item.rubric, r.key) for r in one_by_one]
    for chunk in (1, 2, 4, 2048):
        chunked = [r for part in plan_chunks(plan, chunk=chunk) for r in part.requests()]
        assert [
            (r.item.record.id, r.item.criterion.name, r.item.rubric, r.key) for r in chunked
        ] == firsts
        assert [r.est_tokens for r in chunked] == [r.est_tokens for r in one_by_one]
        sent = [r for part in plan_chunks(plan, send=True, chunk=chunk) for r in part.requests()]
        by_record = sorted(firsts, key=lambda f: f[0])  # stable: each record's items in order
        assert [
            (r.item.record.id, r.item.criterion.name, r.item.rubric, r.key) for r in sent
        ] == by_record
    assert "(3 turns)" in one_by_one[0].body["messages"][0]["content"]


def test_a_walk_in_chunks_that_grow_and_shrink_makes_the_same_requests(study: StudyFiles) -> None:
    # A run's feed starts its walk with a small chunk (its first request goes out before a
    # whole chunk of 2,048 is keyed) and makes smaller chunks once it sends (feed.py): the
    # requests, their keys and their order are those of the fixed chunks.
    plan = prepare_study(load_config(study.write_config("http://127.0.0.1:9/v1")))
    fixed = [(r.item.record.id, r.item.criterion.name, r.key) for r in planned_requests(plan)]
    fixed_sent = [
        (r.item.record.id, r.item.criterion.name, r.key)
        for part in plan_chunks(plan, send=True)
        for r in part.requests()
    ]
    assert sorted(fixed) == sorted(fixed_sent) and len(fixed) == 48  # 24 records x 2
    sizes = ChunkSizes(most=8, first=2)
    counts, sent = [], []
    for part in plan_chunks(plan, send=True, chunk=sizes):
        counts.append(len(part))
        sent += [(r.item.record.id, r.item.criterion.name, r.key) for r in part.requests()]
        if len(counts) == 4:
            sizes.most = 4  # as the feed lowers it once the run sends
    assert counts == [2, 4, 8, 8, 4, 4, 4, 4, 4, 4, 2]
    assert sent == fixed_sent
