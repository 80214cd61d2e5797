"""Fuzzing the boundaries: records files, config documents and response bodies.

Whatever arrives from outside (a records file, a TOML config, a judge's HTTP answer) either
loads or fails as a :class:`~geval_async.errors.GevalError` with a message a person can read;
never as an unhandled exception.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import PROMPT_A, PROMPT_B, cached_answer
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from geval_async.errors import GevalError, RateLimited
from geval_async.judging.wire.failures import Action, History, decide
from geval_async.judging.wire.transport import JudgeAnswer, _answer, _failure
from geval_async.study.config import EvalConfig, apply_overrides, load_config
from geval_async.study.criteria import CRITERION_KEYS
from geval_async.study.plan import first_request, plan_items
from geval_async.study.prepare import prepare_study
from geval_async.study.records import load_records
from geval_async.study.sections import SECTION_KEYS

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Pure functions, a few milliseconds an example: look harder.
FUZZ_MORE = settings(FUZZ, max_examples=400)

# JSON-like values, with what JSON writers emit but strict parsers refuse (huge ints, NaN).
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_names = st.sampled_from(["id", "user", "condition", "text", "reader", "other", ""])


def _fails_cleanly(action: Callable[[], Any]) -> Any:
    """Run ``action``; a failure must be a GevalError with a message."""
    try:
        return action()
    except GevalError as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a message"
        return None


# --- records files -----------------------------------------------------------------------------

_record = st.dictionaries(_names, _json, max_size=6) | _json


@st.composite
def _records_file(draw: st.DrawFn) -> bytes:
    rows = draw(st.lists(_record, max_size=6))
    kind = draw(st.sampled_from(["jsonl", "array", "bytes", "text"]))
    if kind == "jsonl":
        return "\n".join(json.dumps(r) for r in rows).encode()
    if kind == "array":
        return json.dumps(rows).encode()
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    return draw(st.text(max_size=200)).encode("utf-8", "surrogatepass")


@FUZZ
@given(
    content=_records_file(),
    group=st.sampled_from([None, "user"]),
    condition=st.sampled_from([None, "condition"]),
)
def test_any_records_file_loads_or_fails_cleanly(
    content: bytes, group: str | None, condition: str | None
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "records.jsonl"
        path.write_bytes(content)
        records = _fails_cleanly(
            lambda: load_records(
                path,
                id_field="id",
                group_field=group,
                condition_field=condition,
                required_fields=["text"],
            )
        )
        # Inside the folder: a record's fields are read from the file when asked for
        # (records stream), so the file must still be there.
        if records is not None:
            assert records and len({r.id for r in records}) == len(records)
            for record in records:
                assert isinstance(record.fields["text"], str | int | float)


# --- config documents --------------------------------------------------------------------------


def _toml_string(text: str) -> str:
    # JSON's escapes are TOML's, but TOML also wants DEL escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # inf, -inf and nan are TOML too
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    raise TypeError(value)


def _toml(document: dict[str, Any]) -> str:
    lines = []
    for name, table in document.items():
        if (
            name == "criteria"
            and isinstance(table, list)
            and all(isinstance(c, dict) for c in table)
        ):
            for criterion in table:
                lines.append("[[criteria]]")
                lines += [f"{_toml_string(k)} = {_toml_value(v)}" for k, v in criterion.items()]
        elif isinstance(table, dict):
            lines.append(f"[{name}]")
            lines += [f"{_toml_string(k)} = {_toml_value(v)}" for k, v in table.items()]
        else:
            lines.insert(0, f"{_toml_string(name)} = {_toml_value(table)}")
    return "\n".join(lines) + "\n"


def _base_document() -> dict[str, Any]:
    return {
        "data": {"path": "records.jsonl", "id": "id", "group": "user", "condition": "condition"},
        "judge": {"model": "sim-judge", "base_url": "http://127.0.0.1:9/v1"},
        "sampling": {"mode": "samples", "n": 3, "temperature": 1.0, "max_tokens": 5},
        "limits": {"concurrency": 4, "retries": 2, "timeout": 5},
        "cache": {"path": "cache"},
        "output": {"path": "out"},
        "composite": {"criteria": ["clar", "fit"]},
        "stats": {"conditions": ["A", "B"], "alpha": 0.05},
        "prices": {"sim-judge": [1.0, 2.0]},
        "criteria": [
            {"name": "clar", "prompt": "clar.txt", "scale": [1, 5], "fields": ["text"]},
            {"name": "fit", "prompt": "fit.txt", "scale": [1, 3], "fields": ["reader", "text"]},
        ],
    }


_toml_scalars = (
    st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
)
_toml_values = st.recursive(
    _toml_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=6), inner, max_size=3
        )
    ),
    max_leaves=6,
)
# Values that sit on the edges of what the checks accept.
_interesting = st.sampled_from(
    [
        0,
        -1,
        1,
        10**4,
        0.0,
        -0.0,
        math.inf,
        math.nan,
        "",
        "clar",
        "fit",
        "logprobs",
        "samples",
        "azure",
        "regex",
        "likert",
        "weighted",
        "and",
        "(\\d)",
        "([",
        [1, 10**4],
        [1, 10**12],
        [5, 1],
        [1, 5, 9],
        [],
        ["clar"],
        ["A", "B", "C"],
        ["text", "nope"],
        {"x": 1},
        {"text": "text"},
        "../../etc/passwd",
        "a\x00b",
        "~nobody/x",
        [-1.0, 2.0],
        [1.0, math.nan],
    ]
)
_section_keys = {name: sorted(keys) for name, keys in SECTION_KEYS.items()}
_section_keys["criteria"] = sorted(CRITERION_KEYS)
_section_keys["prices"] = ["sim-judge", "gpt-4o", ""]
_sections = st.sampled_from(sorted(_section_keys))


@st.composite
def _config_document(draw: st.DrawFn) -> dict[str, Any]:
    document = _base_document()
    for _ in range(draw(st.integers(0, 3))):
        section = draw(_sections)
        action = draw(st.sampled_from(["set", "set", "set", "delete", "replace section"]))
        if action == "replace section":
            document[section] = draw(_toml_values)
            continue
        table = document.setdefault(section, {})
        if isinstance(table, list):  # criteria: pick one criterion
            if not table:
                continue
            table = table[draw(st.integers(0, len(table) - 1))]
        if not isinstance(table, dict):
            continue
        key = draw(st.sampled_from([*_section_keys[section], "", "typo"]))
        if action == "delete":
            table.pop(key, None)
        else:
            table[key] = draw(_interesting | _toml_values)
    return document


_amounts = st.sampled_from([math.nan, math.inf, -1.0, 0.0, 0.5, 60.0]) | st.floats()
_overrides = st.fixed_dictionaries(
    {},
    optional={
        "concurrency": st.integers(0, 64) | st.sampled_from([2.5, True, "4"]),
        "rpm": _amounts,
        "tpm": _amounts,
        "n": st.integers(0, 30) | st.just(500),
        "retries": st.integers(-1, 10),
        "timeout": _amounts,
        "limit": st.integers(0, 50),
        "criteria": st.sampled_from(["clar", "fit,clar", "nope", ",", ""]),
        "mode": st.sampled_from(["samples", "logprobs", "bogus"]),
        "max_cost": _amounts,
        "target_se": _amounts,
        "draws": st.integers(-2, 400) | st.sampled_from([2.5, True, "40"]),
        "model": st.sampled_from(["sim-judge", "gpt-4o-mini", "unknown-model"]),
        "concurency": st.sampled_from([None, None, None, 1]),  # a typo: never silently ignored
    },
)


@settings(FUZZ, max_examples=300)
@given(document=_config_document(), overrides=_overrides, noise=st.text(max_size=40))
def test_any_config_document_loads_or_fails_cleanly(
    document: dict[str, Any], overrides: dict[str, Any], noise: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "clar.txt").write_text(PROMPT_A, encoding="utf-8")
        (root / "fit.txt").write_text(PROMPT_B, encoding="utf-8")
        (root / "records.jsonl").write_text(
            '{"id": "a", "user": "u", "condition": "A", "text": "t", "reader": "r"}\n'
            '{"id": "b", "user": "u", "condition": "B", "text": "t2", "reader": "r"}\n'
        )
        config_path = root / "config.toml"
        text = _toml(document)
        if len(noise) > 30:  # now and then a hand-edited file: stray text somewhere in it
            cut = len(noise) % (len(text) + 1)
            text = text[:cut] + noise + text[cut:]
        config_path.write_bytes(text.encode("utf-8", "surrogatepass"))

        config = _fails_cleanly(lambda: load_config(config_path))
        if config is None:
            event("refused: config")
            return
        assert isinstance(config, EvalConfig)
        config = _fails_cleanly(lambda: apply_overrides(config, **overrides))
        if config is None:
            event("refused: overrides")
            return
        assert overrides.get("concurency") is None, "a misspelt override was accepted"
        # What was accepted is usable: limits the runner can wait on, a cap it can compare.
        limits = config.limits
        assert type(limits.concurrency) is int and limits.concurrency >= 1, limits
        assert 1 <= config.sampling.n <= 128, config.sampling
        sampling = config.sampling
        assert sampling.target_se is None or 0 < sampling.target_se < math.inf, sampling
        assert sampling.draws is None or sampling.draws >= 1, sampling
        assert sampling.target_se is None or sampling.draws is None, sampling
        for value in (limits.rpm, limits.tpm, config.max_cost):
            assert value is None or (math.isfinite(value) and value > 0), limits
        for value in (limits.timeout, limits.backoff, limits.max_backoff):
            assert math.isfinite(value) and value > 0, limits
        study = _fails_cleanly(lambda: prepare_study(config))
        if study is None:
            event("refused: study")
            return
        event("planned")
        for item in plan_items(study):
            request = first_request(item, config)
            assert request.key and request.est_tokens > 0


def test_a_huge_integer_point_is_a_config_error(tmp_path: Path) -> None:
    document = _base_document()
    document["criteria"][0] = {
        "name": "clar",
        "prompt": "clar.txt",
        "kind": "likert",
        "points": [0, 10**400],
        "fields": ["text"],
    }
    (tmp_path / "clar.txt").write_text(PROMPT_A, encoding="utf-8")
    (tmp_path / "fit.txt").write_text(PROMPT_B, encoding="utf-8")
    config = tmp_path / "config.toml"
    config.write_text(_toml(document), encoding="utf-8")
    with pytest.raises(GevalError):
        load_config(config)


# --- response bodies ---------------------------------------------------------------------------

_message = st.fixed_dictionaries(
    {}, optional={"role": _json, "content": st.text(max_size=20) | _json, "refusal": _json}
)
_choice = st.fixed_dictionaries(
    {},
    optional={
        "index": _json,
        "message": _message | _json,
        "finish_reason": st.sampled_from(["stop", "length", "content_filter"]) | _json,
        "logprobs": _json,
    },
)
_completion = st.fixed_dictionaries(
    {},
    optional={
        "id": _json,
        "choices": st.lists(_choice | _json, max_size=3) | _json,
        "usage": _json,
        "model": _json,
    },
)
_error = st.fixed_dictionaries(
    {},
    optional={
        "error": st.fixed_dictionaries(
            {},
            optional={
                "message": _json,
                "type": st.sampled_from(["requests", "tokens", "insufficient_quota"]) | _json,
                "code": st.sampled_from(
                    [
                        "insufficient_quota",
                        "content_filter",
                        "context_length_exceeded",
                        "rate_limit_exceeded",
                    ]
                )
                | _json,
            },
        )
        | _json
    },
)


@st.composite
def _body(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["completion", "error", "json", "bytes", "cut"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    value = draw(
        {"completion": _completion, "error": _error, "json": _json, "cut": _completion}[kind]
    )
    raw = json.dumps(value).encode()
    if kind == "cut":
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


_header_values = st.sampled_from(
    [
        "1",
        "0",
        "-5",
        "1.5",
        "250",
        "nan",
        "inf",
        "-inf",
        "1e400",
        "6m0s",
        "1m30.5s",
        "120ms",
        "soon",
        "",
        "Wed, 21 Oct 2015 07:28:00 GMT",
    ]
) | st.text(max_size=10)
_headers = st.fixed_dictionaries(
    {},
    optional={
        name: _header_values
        for name in [
            "retry-after-ms",
            "Retry-After",
            "x-ratelimit-reset-requests",
            "x-ratelimit-reset-tokens",
            "x-geval-simulated",
            "content-type",
        ]
    },
)


@FUZZ_MORE
@given(raw=_body(), headers=_headers)
def test_any_200_body_is_an_answer_or_a_transport_error(
    raw: bytes, headers: dict[str, str]
) -> None:
    answer = _fails_cleanly(lambda: _answer(200, raw, headers, 12.5))
    if answer is not None:
        assert isinstance(answer, JudgeAnswer)
        assert answer.choices and all(isinstance(c["message"], dict) for c in answer.choices)


@FUZZ_MORE
@given(
    status=st.sampled_from([400, 401, 403, 404, 408, 413, 422, 429, 429, 429, 500, 503])
    | st.integers(100, 599),
    raw=_body(),
    headers=_headers,
)
def test_any_failure_maps_to_an_error_with_a_message(
    status: int, raw: bytes, headers: dict[str, str]
) -> None:
    error = _failure(status, raw, headers)
    assert isinstance(error, GevalError), type(error)
    assert str(error).strip()
    if isinstance(error, RateLimited):
        # Never negative nor NaN (a wait of 0 resends at once); an infinite one is kept, and
        # the run stops on it (longer than [limits] max_wait).
        wait = error.retry_after
        assert wait is None or wait >= 0, wait
        if wait is not None:
            history = History("http://judge", "KEY", max_wait=120.0)
            decision = decide(error.fact, history)
            assert decision.action is not Action.PAUSE or wait <= 120.0, decision


# --- cache folders: any row of diskcache's table ------------------------------------------------


class _MakesFile:
    """A pickle that creates the file it names when loaded (as any command could run)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.path, "w"))


def _hostile_row(folder: Path) -> st.SearchStrategy[tuple[int, str | None, object]]:
    """(mode, filename, value) of a row a damaged or hostile cache folder may hold: diskcache's
    four modes and one it does not know, a file named absolutely, through ``../``, /dev/zero or
    a FIFO, and values that are bytes, text, a pickle that runs code, another key's entry, or
    nothing."""
    import pickle

    outside = folder.parent / "outside.txt"
    filenames = st.sampled_from(
        [None, str(outside), "../outside.txt", "/dev/zero", str(folder.parent / "fifo")]
    )
    values = st.one_of(
        st.none(),
        st.binary(max_size=40),
        st.text(max_size=20),
        st.just(pickle.dumps(_MakesFile(str(folder.parent / "ran")))),
        st.just(cached_answer("g2-b", '{"choices": [{}]}', received=1).encode()),
    )
    # Half the rows in the raw in-row mode with no file named, as our own rows are: there the
    # value alone must be told apart from an entry of this key.
    places = st.one_of(st.just((1, None)), st.tuples(st.integers(0, 5), filenames))
    return st.tuples(places, values).map(lambda row: (*row[0], row[1]))


@given(data=st.data())
@settings(FUZZ, max_examples=60)
def test_any_row_of_a_cache_folder_reads_as_an_entry_or_damage(data: st.DataObject) -> None:
    import os
    import sqlite3

    from geval_async.judging.store.cache import JudgeCache

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "cache"
        outside = Path(tmp) / "outside.txt"
        outside.write_text("not the cache's")
        os.mkfifo(Path(tmp) / "fifo")
        entry = cached_answer("g2-a", '{"choices": [{}]}', received=1)
        with JudgeCache(folder) as cache:
            cache.put(entry)
        mode, filename, value = data.draw(_hostile_row(folder))
        with sqlite3.connect(folder / "cache.db") as db:
            db.execute(
                "UPDATE Cache SET mode = ?, filename = ?, value = ? WHERE key = 'g2-a'",
                (mode, filename, value),
            )
        db.close()
        for create in (False, True):  # status and score read it; a run replaces it
            with JudgeCache(folder, create=create) as cache:
                found = cache.get("g2-a")
                assert found is None or found == entry
                assert (found is None) == ("g2-a" in cache.corrupted)
                assert list(cache.keys("g2-")) == ["g2-a"]
                if create:
                    assert cache.put(entry)  # the damaged row is replaced by the answer
                    assert cache.get("g2-a") == entry
        assert outside.read_text() == "not the cache's", "a row's file is never touched"
        assert not (Path(tmp) / "ran").exists(), "a row's pickle is never loaded"


# --- the journal an older run left: one flipped byte ---------------------------------------------


def _journal(entries: list[tuple[str, bytes]]) -> tuple[bytes, list[int]]:
    """A journal segment of ``entries`` as older runs wrote it, and where each record starts."""
    import struct
    import zlib

    data, starts = b"", []
    for key, value in entries:
        raw = key.encode()
        starts.append(len(data))
        data += struct.pack("<HIIB", len(raw), len(value), zlib.crc32(raw), 0) + raw + value
    return data, starts


@given(data=st.data())
@settings(FUZZ_MORE)
def test_a_flipped_byte_in_a_journal_loses_its_record_at_most_and_takes_nothing_wrong(
    data: st.DataObject,
) -> None:
    from geval_async.judging.store.migrations import journal_records

    entries = [
        (f"g2-{i:04x}", cached_answer(f"g2-{i:04x}", '{"choices": [{}]}', received=1).encode())
        for i in range(data.draw(st.integers(1, 6)))
    ]
    whole, starts = _journal(entries)
    at = data.draw(st.integers(0, len(whole) - 1))
    damaged = bytearray(whole)
    damaged[at] ^= data.draw(st.integers(1, 255))
    hit = max(i for i, start in enumerate(starts) if start <= at)
    header_end = starts[hit] + 11 + len(entries[hit][0])  # struct "<HIIB" and the key

    records, unread = journal_records(bytes(damaged))
    read = [(key, value) for key, value, _ in records]
    assert all(record in entries for record in read), "no record that was not written"
    assert read[:hit] == entries[:hit], "every record before the damaged one is read"
    if at >= header_end:  # the flip is in the entry: that record alone is lost
        assert read == entries[:hit] + entries[hit + 1 :]
    if at != starts[hit] + 10:  # the replace flag, under no checksum, reads either way
        assert unread >= 1
    assert journal_records(whole) == ([(k, v, False) for k, v in entries], 0)
