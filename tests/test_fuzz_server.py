"""Fuzz the judge stage with a real server on loopback.

Hypothesis draws what a server answers (status, body: choices, content types, logprob values;
headers: Retry-After in every form, x-ratelimit-*) and an aiohttp.web stub on 127.0.0.1 serves
it to the real runner, in this process. After each run: no exception but our own, no answer
stored from a failed request, every wait interruptible (a stop set while a request is at the
server ends the run, with no request after it), every rating a reading of the answer's text.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from conftest import PROMPT_A, LoopbackApp, StudyFiles
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geval_async.errors import GevalError
from geval_async.judging.run.runner import run_study
from geval_async.judging.store.cache import JudgeCache
from geval_async.scoring.scores.results import load_results
from geval_async.study.config import load_config
from geval_async.study.prepare import prepare_study

_numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**20), 10**20),
    st.sampled_from(["-0.1", None, True, [], {}]),
)
_content = st.one_of(
    st.none(),
    st.sampled_from(["3", "4", " 5 ", "", "Rating: 2", "1. Clarity: 4", "x" * 300]),
    st.text(max_size=20),
    st.integers(),
    st.lists(st.integers(), max_size=2),
)
_top = st.fixed_dictionaries(
    {"token": st.sampled_from(["1", "3", "5", "x", ""]), "logprob": _numbers}
)
_logprobs = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "content": st.lists(
                st.fixed_dictionaries(
                    {
                        "token": st.sampled_from(["3", "4", "x"]),
                        "logprob": _numbers,
                        "top_logprobs": st.lists(_top, max_size=4),
                    }
                ),
                max_size=2,
            )
        }
    ),
)
_choice = st.fixed_dictionaries(
    {
        "message": st.one_of(
            st.fixed_dictionaries({"role": st.just("assistant"), "content": _content}),
            st.none(),
            st.text(max_size=5),
        ),
        "finish_reason": st.sampled_from(["stop", "length", "content_filter", None]),
        "logprobs": _logprobs,
    }
)
_waits = st.sampled_from(
    [
        "-5",
        "NaN",
        "inf",
        "1e300",
        "999999",
        "0",
        "0.01",
        "soon",
        "Wed, 21 Oct 2099 07:28:00 GMT",
        "Wed, 21 Oct 2015 07:28:00 GMT",
        "30",
    ]
)
_headers = st.dictionaries(
    st.sampled_from(
        [
            "Retry-After",
            "retry-after-ms",
            "x-ratelimit-reset-requests",
            "x-ratelimit-limit-requests",
            "x-ratelimit-limit-tokens",
            "x-ratelimit-remaining-requests",
        ]
    ),
    _waits | st.sampled_from(["1e-9", "0", "5", "100000"]),
    max_size=3,
)
_reply = st.fixed_dictionaries(
    {
        "status": st.sampled_from([200, 200, 200, 429, 429, 500, 400, 302]),
        "choices": st.lists(_choice, max_size=4),
        "headers": _headers,
        "model": st.sampled_from(["sim-judge", "other-model", None]),
    }
)


class ScriptedJudge(LoopbackApp):
    """Serves the drawn replies in turn (the last one for good); the ``stop_at``-th request
    sets the run's stop event while it is at the server."""

    def __init__(self, replies: list[dict[str, Any]], stop_at: int) -> None:
        super().__init__()
        self.replies, self.stop_at = replies, stop_at
        self.received = 0
        self.received_at_stop: int | None = None
        self.stopped_at_server = False
        self.answered: set[bytes] = set()  # the bodies of every 200 sent
        self.stop: asyncio.Event | None = None
        self.client_loop: asyncio.AbstractEventLoop | None = None

    def _set_stop(self, at_server: bool = True) -> None:
        assert self.stop is not None
        if self.stop.is_set():
            return
        self.received_at_stop, self.stopped_at_server = self.received, at_server
        self.stop.set()

    async def _complete(self, request: web.Request) -> web.Response:
        self.received += 1
        body = await request.json()
        if self.received == self.stop_at and self.client_loop is not None:
            self.client_loop.call_soon_threadsafe(self._set_stop)
            await asyncio.sleep(0.05)  # the stop is set before this answer arrives
        reply = self.replies[min(self.received, len(self.replies)) - 1]
        status = reply["status"]
        headers = {k: str(v) for k, v in reply["headers"].items()}
        if status == 302:
            headers["Location"] = "http://127.0.0.1:9/elsewhere"
            return web.Response(status=302, headers=headers)
        if status != 200:
            error = {"error": {"message": "drawn failure", "type": "requests"}}
            return web.json_response(error, status=status, headers=headers)
        choices = [{"index": i, **c} for i, c in enumerate(reply["choices"][: body.get("n", 1)])]
        payload: dict[str, Any] = {"choices": choices, "usage": {"total_tokens": 10}}
        if reply["model"] is not None:
            payload["model"] = reply["model"]
        raw = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY, default=str)
        self.answered.add(raw)
        return web.Response(body=raw, headers=headers, content_type="application/json")

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/chat/completions", self._complete),
        ]


def _study(root: Path, base_url: str, mode: str) -> Path:
    (root / "clar.txt").write_text(PROMPT_A, encoding="utf-8")
    rows = [{"id": f"r{i}", "text": f"text {i}"} for i in range(3)]
    (root / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    samples = {"mode": None, "n": 2} if mode == "samples" else {"mode": mode, "max_tokens": 1}
    return StudyFiles.in_folder(root).write_config(
        base_url,
        criteria=[{"name": "clar", "prompt": "clar.txt", "scale": [1, 5], "fields": ["text"]}],
        data={"id": None, "group": None, "condition": None},
        sampling={"mode": None, "n": None, "temperature": None, "max_tokens": None, **samples},
        limits={
            "concurrency": 1,
            "retries": 1,
            "timeout": 5,
            "backoff": 0.01,
            "max_backoff": 0.02,
            "max_wait": 1e9,
        },
        output={"prefix": None},
        stats=None,
    )


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    replies=st.lists(_reply, min_size=1, max_size=6),
    stop_at=st.integers(1, 8),
    mode=st.sampled_from(["samples", "logprobs"]),
)
def test_any_server_leaves_no_traceback_no_failed_answer_and_every_wait_stoppable(
    replies: list[dict[str, Any]], stop_at: int, mode: str
) -> None:
    with tempfile.TemporaryDirectory() as folder, ScriptedJudge(replies, stop_at) as judge:
        config = load_config(_study(Path(folder), judge.base_url, mode))
        study = prepare_study(config)

        async def main() -> None:
            judge.stop, judge.client_loop = asyncio.Event(), asyncio.get_running_loop()
            # If the stop_at-th request never comes (the run waits, or is done), a stop set
            # from a timer, wherever the run is: within a wait, or between two sends.
            judge.client_loop.call_later(1.0, judge._set_stop, False)
            with JudgeCache(config.cache_path) as cache:
                try:
                    # Generous: the stop comes within 1 s; a wait it cannot end is up to 1e9 s.
                    async with asyncio.timeout(60):
                        await run_study(study, cache, api_key="sk-test", stop=judge.stop)
                except GevalError:
                    pass  # one line at the CLI edge: ours, never a traceback

        asyncio.run(main())
        if judge.received_at_stop is not None:
            # Concurrency 1: a stop while a request is at the server sends nothing more; one
            # from the timer may find a request on its way there, never a second.
            extra = 0 if judge.stopped_at_server else 1
            assert judge.received <= judge.received_at_stop + extra, "a request after the stop"
        with JudgeCache(config.cache_path) as cache:
            for key in list(cache.keys()):
                entry = cache.get(key)
                if entry is not None and entry.ok:
                    assert entry.body.encode() in judge.answered, "stored from a failed request"
        _ratings_are_readings(config)


def _ratings_are_readings(config: Any) -> None:
    """Every rating of a samples-mode answer is a number its text says."""
    try:
        results = load_results(config)
    except GevalError:
        return
    samples = results.samples
    for text, rating in zip(samples["text"], samples["rating"], strict=True):
        if (
            isinstance(rating, float)
            and not math.isnan(rating)
            and config.sampling.mode == "samples"
        ):
            assert f"{rating:g}" in str(text), (text, rating)
