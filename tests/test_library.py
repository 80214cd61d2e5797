"""The library API, as a notebook uses it, and the pure pieces under the engine."""

from __future__ import annotations

import string

import pytest
from conftest import StudyFiles
from hypothesis import given
from hypothesis import strategies as st

import geval_async as ga
from geval_async.judging.wire.server_waits import parse_duration, retry_after
from geval_async.sim import SimServer
from geval_async.study.keys import canonical_json, request_key
from geval_async.study.prompts import Template


async def test_judge_then_load_results_in_one_loop(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    run = await ga.judge(study.config, limit=4)
    assert run.complete and run.counters.requests_sent == 8
    results = ga.load_results(study.config, limit=4)
    assert results.missing == 0
    assert list(results.table("clar").columns) == ["A", "B"]
    assert results.table("clar").index[-1] == "Average"
    assert results.long.shape[0] == 8
    again = await ga.judge(study.config, limit=4)
    assert again.counters.requests_sent == 0 and sim.stats.received == 8


async def test_judge_override_of_unknown_criterion_is_a_config_error(study: StudyFiles) -> None:
    study.write_config("http://127.0.0.1:9/v1")
    with pytest.raises(ga.ConfigError, match="no criterion named 'nope'"):
        await ga.judge(study.config, criteria="nope")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6), st.integers(0, 50))
def test_request_key_ignores_key_order(body: dict, draw: int) -> None:
    reordered = dict(reversed(list(body.items())))
    assert request_key(body, draw) == request_key(reordered, draw)
    assert canonical_json(body) == canonical_json(reordered)


@given(st.text(max_size=30), st.integers(0, 20))
def test_request_key_changes_with_content_and_draw(content: str, draw: int) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "n": 1}
    other = {**body, "messages": [{"role": "user", "content": content + "."}]}
    assert request_key(body, draw) != request_key(other, draw)
    assert request_key(body, draw) != request_key(body, draw + 1)
    assert request_key(body, draw).startswith("g2-")


@given(st.text(max_size=30), st.integers(0, 20), st.integers(1, 50))
def test_request_key_does_not_depend_on_how_many_samples_are_asked(
    content: str, draw: int, n: int
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "n": 1}
    assert request_key(body, draw) == request_key({**body, "n": n}, draw)


@given(st.text(alphabet=string.printable + "{}", max_size=60))
def test_record_text_is_inserted_literally(value: str) -> None:
    template = Template(
        source=__import__("pathlib").Path("t.txt"),
        parts=("Rate this:\n", "text", "\n- Score (1-5):"),
    )
    assert template.render({"text": value}) == f"Rate this:\n{value}\n- Score (1-5):"


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("120ms", 0.12),
        ("1m30.5s", 90.5),
        ("2", 2.0),
        ("0.5", 0.5),
        ("1h2m", 3720.0),
        ("soon", None),
        ("1x", None),
    ],
)
def test_reset_header_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_retry_after_prefers_milliseconds() -> None:
    assert retry_after({"retry-after-ms": "250", "retry-after": "3"}) == pytest.approx(0.25)
    assert retry_after({"Retry-After": "3"}) == 3.0
    assert (
        retry_after(
            {"x-ratelimit-reset-tokens": "1.5s", "x-ratelimit-reset-requests": "20s"}, "tokens"
        )
        == 1.5
    )
    assert retry_after({}) is None
