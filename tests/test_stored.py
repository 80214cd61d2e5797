"""How entries are stored: caches written before are migrated once, damage is found by checksum.

Each test runs the real CLI against the simulated judge and edits the real cache folder
(diskcache's sqlite file) the way a disk, an old version or a bad copy would.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import zlib
from pathlib import Path

import orjson
from conftest import StudyFiles, cache_snapshot, run_cli, run_study, summary_row
from hypothesis import given
from hypothesis import strategies as st

from geval_async.judging.store.cache import CachedResponse
from geval_async.judging.store.stored import DEFLATED, MARKS, PACKED, decode_head
from geval_async.options import EntryStatus
from geval_async.sim import SimServer


def _old_form(entry: CachedResponse) -> bytes:
    """The entry as geval-async stored it before the packed form: its JSON, body inside."""
    return orjson.dumps(dataclasses.asdict(entry))


def _store(cache: Path, values: dict[str, bytes]) -> None:
    with sqlite3.connect(cache / "cache.db") as db:
        for key, value in values.items():
            db.execute("UPDATE Cache SET value = ? WHERE key = ?", (value, key))
    db.close()


def _scores(study: StudyFiles) -> str:
    result = run_cli("score", str(study.config))
    assert result.returncode == 0, result.stderr
    return (study.output / "scores" / "t_long.csv").read_text()


def _files(folder: Path) -> dict[str, tuple[int, bytes]]:
    files = (p for p in folder.rglob("*") if p.is_file())
    return {str(p): (p.stat().st_mtime_ns, p.read_bytes()) for p in files}


def _written_before(cache: Path, values: dict[str, bytes]) -> None:
    """Make ``cache`` a folder an older geval-async wrote: these values, and no mark."""
    _store(cache, values)
    (cache / "schema").unlink()


def _names(folder: Path) -> list[str]:
    """The folder's entries but sqlite's -wal/-shm side files, which come and go with the
    connections of earlier writers (closed by the garbage collector when it runs)."""
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm")))


def _unpacked(value: bytes) -> tuple[bytes, bool]:
    """An entry with its body as received (inflated when stored deflated), checksum as stored;
    and whether it was stored deflated."""
    end = value.index(b"\n", 18) + 1  # mark, checksum, header, then the metadata's line
    if value.startswith(DEFLATED):
        body = zlib.decompress(value[end:], -zlib.MAX_WBITS)
        return PACKED + value[len(PACKED) : end] + body, True
    return value, False


def _packed(value: bytes, deflated: bool) -> bytes:
    """:func:`_unpacked`'s entry stored again as it was (its checksum kept as it is)."""
    if not deflated:
        return value
    end = value.index(b"\n", 18) + 1
    body = zlib.compress(value[end:], 1, -zlib.MAX_WBITS)
    return DEFLATED + value[len(PACKED) : end] + body


def test_a_cache_written_before_is_refused_until_migrated(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    sent = sim.stats.received
    packed = cache_snapshot(study.cache)
    assert all(value.startswith(MARKS) for value in packed.values())
    scores = _scores(study)

    _written_before(
        study.cache, {k: _old_form(CachedResponse.decode(v)) for k, v in packed.items()}
    )
    old = cache_snapshot(study.cache)
    assert not any(value.startswith(MARKS) for value in old.values())
    files = _names(study.cache)
    outputs = _files(study.output)
    for command in (["run"], ["status"], ["score"], ["answers"]):
        refused = run_cli(*command, str(study.config))
        assert refused.returncode == 2, (command, refused.stdout, refused.stderr)
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1, (command, lines)
        assert str(study.cache) in lines[0] and "geval-async cache migrate CONFIG" in lines[0]
    assert sim.stats.received == sent, "a refused run sends nothing"
    assert cache_snapshot(study.cache) == old, "a refused command writes nothing"
    assert _names(study.cache) == files
    assert _files(study.output) == outputs, "a refused score writes no output"

    migrated = run_cli("cache", "migrate", str(study.config))
    assert migrated.returncode == 0, migrated.stderr
    assert f"repacked {len(old)} entries" in migrated.stdout
    assert all(value.startswith(MARKS) for value in cache_snapshot(study.cache).values())
    status = run_cli("status", str(study.config))
    assert "corrupted" not in status.stdout
    assert summary_row(status.stdout)["answered"] == study.n_records * 2
    rerun = run_study(study)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert sim.stats.received == sent, "no answer of the old cache is asked for again"
    assert _scores(study) == scores


def test_a_damaged_body_in_an_old_entry_is_found_and_fetched_again(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    sent = sim.stats.received
    key, value = sorted(cache_snapshot(study.cache).items())[0]
    damaged = orjson.loads(_old_form(CachedResponse.decode(value)))
    damaged["body"] = damaged["body"][:20]  # the entry's JSON parses, its body does not
    _written_before(study.cache, {key: orjson.dumps(damaged)})
    migrated = run_cli("cache", "migrate", str(study.config))
    assert migrated.returncode == 0, migrated.stderr
    assert "repacked 0 entries" in migrated.stdout, "a damaged entry is left as it is"

    result = run_study(study)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 corrupted cache entries" in result.stdout, result.stdout
    assert sim.stats.received == sent + 1
    stored = cache_snapshot(study.cache)[key]
    assert stored.startswith(MARKS), "the answer fetched again is stored in the packed form"
    assert CachedResponse.decode(stored).choices() == CachedResponse.decode(value).choices()


def test_a_changed_rating_in_a_stored_body_is_found_by_its_checksum(
    sim: SimServer, study: StudyFiles
) -> None:
    # A changed digit leaves the body valid JSON: only the checksum tells that the stored
    # rating is not the one the judge gave.
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    sent = sim.stats.received
    before = {k: _unpacked(v) for k, v in sorted(cache_snapshot(study.cache).items())}
    key, (value, deflated) = next(
        (k, v) for k, v in before.items() if re.search(rb'"content": "\D*[1-5]', v[0])
    )
    digit = re.search(rb'"content": "\D*([1-5])', value)
    assert digit is not None
    at = digit.start(1)
    changed = value[:at] + (b"2" if value[at : at + 1] != b"2" else b"3") + value[at + 1 :]
    orjson.loads(changed[changed.index(b"\n", 18) + 1 :])  # the body still parses
    _store(study.cache, {key: _packed(changed, deflated)})

    status = run_cli("status", str(study.config))
    assert "1 corrupted cache entries" in status.stdout, status.stdout
    result = run_study(study)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sim.stats.received == sent + 1, "exactly the changed entry is fetched again"
    after = CachedResponse.decode(cache_snapshot(study.cache)[key])
    assert after.choices() == CachedResponse.decode(_packed(value, deflated)).choices()


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_entries = st.builds(
    CachedResponse,
    key=st.just("g2-" + "ab" * 32),
    status=st.sampled_from(list(EntryStatus)),
    http_status=st.integers(0, 599),
    body=st.one_of(
        _text,
        st.lists(_text, max_size=3).map(lambda t: orjson.dumps({"choices": t}).decode()),
        # Many alike choices, as a judge's n answers are: a body that is stored deflated.
        st.tuples(_text, st.integers(2, 40)).map(
            lambda t: orjson.dumps({"choices": [t[0]] * t[1]}).decode()
        ),
    ),
    time=st.floats(0, 2e9),
    latency_ms=st.floats(0, 1e6),
    attempts=st.integers(1, 50),
    n=st.integers(1, 128),
    draw=st.integers(0, 127),
    model=_text,
    record_id=_text,
    criterion=_text,
    received=st.integers(1, 128),
    usage=st.none() | st.dictionaries(_text, st.integers(0, 10**6), max_size=3),
    error=st.none() | _text,
    simulated=st.booleans(),
)


@given(_entries)
def test_an_entry_reads_back_as_written(entry: CachedResponse) -> None:
    raw = entry.encode()
    assert CachedResponse.decode(raw) == entry
    assert decode_head(raw) == entry.head
    unpacked, deflated = _unpacked(raw)
    assert unpacked.endswith(b"\n" + entry.body.encode())
    # The body deflated only when that makes it smaller: never stored larger than received.
    assert deflated == (len(raw) < len(unpacked))
    assert len(raw) <= len(unpacked)


def test_a_run_stores_each_answer_deflated_and_reads_it_back_byte_for_byte(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    stored = cache_snapshot(study.cache)
    bodies = {key: _unpacked(value)[0] for key, value in stored.items()}
    assert stored and all(value.startswith(DEFLATED) for value in stored.values())
    for key, value in stored.items():
        body = CachedResponse.decode(value).body.encode()
        assert bodies[key].endswith(b"\n" + body), "inflated, the body is the entry's own"
    # What the cache holds: entries well smaller than with their bodies as received (these
    # small answers, n = 3, about 0.64 of it; 10 choices of 2.4 kB about 0.2).
    assert sum(map(len, stored.values())) < 0.75 * sum(map(len, bodies.values()))


@given(_entries, st.data())
def test_any_changed_byte_of_an_entry_is_found(entry: CachedResponse, data: st.DataObject) -> None:
    raw = entry.encode()
    at = data.draw(st.integers(0, len(raw) - 1))
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != raw[at]))
    changed = raw[:at] + bytes([byte]) + raw[at + 1 :]
    for decode in (CachedResponse.decode, decode_head):
        try:
            decode(changed)
        except (ValueError, TypeError):
            continue
        raise AssertionError(f"byte {at} changed to {byte} was not found by {decode}")


def test_an_answer_entry_is_the_one_the_dataclass_makes(study: StudyFiles) -> None:
    """The run builds each answer's entry without the dataclass's __init__ (its hot path):
    field for field it is the entry ``CachedResponse(...)`` makes, and it reads back as such."""
    from geval_async.judging.run.entries import answer_entry
    from geval_async.judging.wire.transport import _answer
    from geval_async.study.config import load_config
    from geval_async.study.plan import first_request, plan_items
    from geval_async.study.prepare import prepare_study

    config = load_config(study.write_config("http://127.0.0.1:9/v1"))
    item = next(iter(plan_items(prepare_study(config))))
    request = first_request(item, config)
    raw = (
        b'{"model":"m","choices":[{"message":{"content":"4"}},{"message":{"content":"2"}}],'
        b'"usage":{"total_tokens":9}}'
    )
    answer = _answer(200, raw, {"x-geval-simulated": "true"}, 12.346)
    entry = answer_entry(request, answer, attempts=2)
    expected = CachedResponse(
        key=request.key,
        status=EntryStatus.OK,
        http_status=200,
        body=raw.decode(),
        time=entry.time,
        latency_ms=12.346,
        attempts=2,
        n=request.n,
        draw=request.draw,
        model=request.model,
        record_id=item.record.id,
        criterion=item.criterion.name,
        received=2,
        usage={"total_tokens": 9},
        simulated=True,
    )
    assert entry == expected
    assert vars(entry) == vars(expected)
    assert CachedResponse.decode(entry.encode()) == expected
