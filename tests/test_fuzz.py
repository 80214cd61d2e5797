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

from conftest import PROMPT_A, PROMPT_B
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from geval_async.config import EvalConfig, apply_overrides, load_config
from geval_async.errors import GevalError, RateLimited
from geval_async.plan import first_request, plan_items, prepare_study
from geval_async.records import load_records
from geval_async.transport import JudgeAnswer, _answer, _failure

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# JSON-like values, with what JSON writers emit but strict parsers refuse (huge ints, NaN).
_scalars = (st.none() | st.booleans() | st.integers() | st.floats()
            | st.text(st.characters(exclude_categories=("Cs",)), max_size=20))
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
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
@given(content=_records_file(), group=st.sampled_from([None, "user"]),
       condition=st.sampled_from([None, "condition"]))
def test_any_records_file_loads_or_fails_cleanly(content: bytes, group: str | None,
                                                 condition: str | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "records.jsonl"
        path.write_bytes(content)
        records = _fails_cleanly(lambda: load_records(
            path, id_field="id", group_field=group, condition_field=condition,
            required_fields=["text"]))
    if records is not None:
        assert records and len({r.id for r in records}) == len(records)
        for record in records:
            assert isinstance(record.fields["text"], str | int | float)


# --- config documents --------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value).replace("inf", "inf").replace("nan", "nan")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}"
                               for k, v in value.items()) + "}"
    raise TypeError(value)


def _toml(document: dict[str, Any]) -> str:
    lines = []
    for name, table in document.items():
        if name == "criteria" and isinstance(table, list):
            for criterion in table:
                lines.append("[[criteria]]")
                lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in criterion.items()]
        elif isinstance(table, dict):
            lines.append(f"[{name}]")
            lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in table.items()]
        else:
            lines.insert(0, f"{json.dumps(name)} = {_toml_value(table)}")
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


_toml_scalars = (st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats()
                 | st.text(st.characters(exclude_categories=("Cs",)), max_size=12))
_toml_values = st.recursive(
    _toml_scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(st.characters(exclude_categories=("Cs",)), max_size=6), inner,
                      max_size=3),
    max_leaves=6,
)
_interesting = st.sampled_from([
    0, -1, 1, 10**12, 0.0, math.inf, math.nan, "", "clar", "logprobs", "azure", "regex",
    [1, 10**12], [5, 1], [], ["clar"], ["A", "B", "C"], {"x": 1}, "../../etc/passwd", "a\x00b",
])
_keys = st.sampled_from([
    "path", "id", "group", "condition", "model", "provider", "base_url", "headers", "mode", "n",
    "temperature", "top_p", "max_tokens", "top_logprobs", "seed", "rpm", "tpm", "concurrency",
    "retries", "timeout", "backoff", "max_backoff", "prefix", "criteria", "normalize",
    "conditions", "alpha", "test", "name", "prompt", "scale", "points", "fields", "role",
    "parser", "pattern", "display_name", "sim-judge", "deployment", "unknown_key",
])
_sections = st.sampled_from(["data", "judge", "sampling", "limits", "cache", "output",
                             "composite", "stats", "prices", "criteria", "bogus"])


@st.composite
def _config_document(draw: st.DrawFn) -> dict[str, Any]:
    document = _base_document()
    for _ in range(draw(st.integers(1, 5))):
        section = draw(_sections)
        action = draw(st.sampled_from(["set", "set", "delete", "replace section"]))
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
        key = draw(_keys)
        if action == "delete":
            table.pop(key, None)
        else:
            table[key] = draw(_interesting | _toml_values)
    return document


_overrides = st.fixed_dictionaries({}, optional={
    "concurrency": st.integers(-2, 64), "rpm": st.floats(-1, 1e6), "n": st.integers(-1, 30),
    "retries": st.integers(-1, 10), "timeout": st.floats(-1, 100), "limit": st.integers(-1, 50),
    "criteria": st.sampled_from(["clar", "fit,clar", "nope", ",", ""]),
    "mode": st.sampled_from(["samples", "logprobs", "bogus"]),
    "max_cost": st.floats(-1, 100) | st.just(math.nan),
    "model": st.sampled_from(["sim-judge", "gpt-4o-mini", "unknown-model"]),
})


@FUZZ
@given(document=_config_document(), overrides=_overrides, raw_text=st.booleans(),
       noise=st.text(max_size=40))
def test_any_config_document_loads_or_fails_cleanly(
    document: dict[str, Any], overrides: dict[str, Any], raw_text: bool, noise: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "clar.txt").write_text(PROMPT_A, encoding="utf-8")
        (root / "fit.txt").write_text(PROMPT_B, encoding="utf-8")
        (root / "records.jsonl").write_text(
            '{"id": "a", "user": "u", "condition": "A", "text": "t", "reader": "r"}\n'
            '{"id": "b", "user": "u", "condition": "B", "text": "t2", "reader": "r"}\n')
        config_path = root / "config.toml"
        text = _toml(document)
        if raw_text:  # a hand-edited file: stray text somewhere in it
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
        study = _fails_cleanly(lambda: prepare_study(config))
        if study is None:
            event("refused: study")
            return
        event("planned")
        for item in plan_items(study):
            request = first_request(item, config)
            assert request.key and request.est_tokens > 0


# --- response bodies ---------------------------------------------------------------------------

_message = st.fixed_dictionaries({}, optional={
    "role": _json, "content": st.text(max_size=20) | _json, "refusal": _json})
_choice = st.fixed_dictionaries({}, optional={
    "index": _json, "message": _message | _json, "finish_reason":
    st.sampled_from(["stop", "length", "content_filter"]) | _json, "logprobs": _json})
_completion = st.fixed_dictionaries({}, optional={
    "id": _json, "choices": st.lists(_choice | _json, max_size=3) | _json, "usage": _json,
    "model": _json})
_error = st.fixed_dictionaries({}, optional={
    "error": st.fixed_dictionaries({}, optional={
        "message": _json, "type": st.sampled_from(["requests", "tokens",
                                                   "insufficient_quota"]) | _json,
        "code": st.sampled_from(["insufficient_quota", "content_filter",
                                 "context_length_exceeded", "rate_limit_exceeded"]) | _json,
    }) | _json})


@st.composite
def _body(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["completion", "error", "json", "bytes", "cut"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    value = draw({"completion": _completion, "error": _error, "json": _json, "cut": _completion}
                 [kind])
    raw = json.dumps(value).encode()
    if kind == "cut":
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


_header_values = st.sampled_from(
    ["1", "0", "-5", "1.5", "250", "nan", "inf", "-inf", "1e400", "6m0s", "1m30.5s", "120ms",
     "soon", "", "Wed, 21 Oct 2015 07:28:00 GMT"]) | st.text(max_size=10)
_headers = st.dictionaries(
    st.sampled_from(["retry-after-ms", "Retry-After", "retry-after", "x-ratelimit-reset-requests",
                     "x-ratelimit-reset-tokens", "x-geval-simulated", "content-type"]),
    _header_values, max_size=4)


@FUZZ
@given(raw=_body(), headers=_headers)
def test_any_200_body_is_an_answer_or_a_transport_error(raw: bytes,
                                                        headers: dict[str, str]) -> None:
    answer = _fails_cleanly(lambda: _answer(200, raw, headers, 12.5))
    if answer is not None:
        assert isinstance(answer, JudgeAnswer)
        assert answer.choices and all(isinstance(c["message"], dict) for c in answer.choices)


@FUZZ
@given(status=st.sampled_from([400, 401, 403, 404, 408, 413, 422, 429, 500, 503])
       | st.integers(100, 599), raw=_body(), headers=_headers)
def test_any_failure_maps_to_an_error_with_a_message(status: int, raw: bytes,
                                                     headers: dict[str, str]) -> None:
    error = _failure(status, raw, headers, "http://127.0.0.1:9/v1/chat/completions", "MY_KEY")
    assert isinstance(error, GevalError), type(error)
    assert str(error).strip()
    if isinstance(error, RateLimited):
        # A pause the runner can honour: never negative, infinite or NaN.
        wait = error.retry_after
        assert wait is None or (math.isfinite(wait) and wait >= 0), wait
