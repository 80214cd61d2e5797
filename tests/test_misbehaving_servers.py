"""Servers that misbehave.

Each test serves a real aiohttp.web stub on 127.0.0.1 made to misbehave one way (a 429 that
asks for days, a learned limit no account has, a wait that is no wait, a flood of a body, a
redirect, a model other than the one asked) and drives the real CLI in a subprocess against it.
"""

from __future__ import annotations

import csv
import gzip
import json
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import LoopbackApp, StudyFiles, run_cli, run_study, start_process

Respond = Callable[[dict[str, Any], int], web.StreamResponse]


def answer(body: dict[str, Any], content: str | None = "3", **extra: Any) -> dict[str, Any]:
    """An OpenAI-style answer to ``body`` with ``content`` in every choice."""
    choices = [
        {"index": i, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        for i in range(body.get("n", 1))
    ]
    return {"choices": choices, "usage": {"total_tokens": 10}, **extra}


def too_many(**headers: str) -> web.Response:
    return web.json_response(
        {"error": {"message": "Rate limit reached", "type": "requests"}},
        status=429,
        headers=headers,
    )


class Stub(LoopbackApp):
    """A judge on loopback that answers every POST with ``respond(body, arrival)``."""

    def __init__(self, respond: Respond) -> None:
        super().__init__()
        self.respond = respond
        self.received = 0
        self.posts_after_stop = 0
        self.stopped = False

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        self.received += 1
        if self.stopped:
            self.posts_after_stop += 1
        reply = self.respond(await request.json(), self.received)
        if isinstance(reply, web.Response):
            return reply
        await reply.prepare(request)  # a streamed (chunked) body: the stub writes it
        return reply

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/chat/completions", self._complete),
            web.post("/v2/chat/completions", self._complete),
        ]


@pytest.fixture
def serve() -> Iterator[Callable[[Respond], Stub]]:
    stubs: list[Stub] = []

    def start(respond: Respond) -> Stub:
        stub = Stub(respond).__enter__()
        stubs.append(stub)
        return stub

    yield start
    for stub in stubs:
        stub.__exit__()


def _configure(study: StudyFiles, stub: Stub, **limits: object) -> None:
    study.write_config(
        stub.base_url,
        limits={"concurrency": 2, "retries": 2, "timeout": 5, **limits},
    )


def _popen(study: StudyFiles, *extra: str) -> subprocess.Popen[str]:
    return start_process("run", str(study.config), "--quiet", *extra)


def _read_until(stream: Any, needle: str, process: subprocess.Popen[str]) -> str:
    """Lines of ``stream`` up to the first that holds ``needle`` (a generous deadline)."""
    seen: list[str] = []
    result: list[str] = []

    def reader() -> None:
        for line in stream:
            seen.append(line)
            if needle in line:
                result.append(line)
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    thread.join(60)
    assert result, f"no line with {needle!r} (exit {process.poll()}): {''.join(seen)}"
    return "".join(seen)


# --- harm 1: a long 429 pause has a ceiling, and a stop ends any wait -----------------------


@pytest.mark.parametrize(
    "headers, quoted",
    [
        ({"Retry-After": "999999"}, "wait 11.6 days (Retry-After: 999999)"),
        ({"Retry-After": "1e300"}, "wait forever (Retry-After: 1e300)"),
        (
            {"x-ratelimit-reset-requests": "999999"},
            "wait 11.6 days (x-ratelimit-reset-requests: 999999)",
        ),
    ],
)
def test_a_wait_above_max_wait_stops_the_run_saying_when_to_resume(
    serve: Callable[[Respond], Stub],
    study: StudyFiles,
    headers: dict[str, str],
    quoted: str,
) -> None:
    stub = serve(lambda body, arrival: too_many(**headers))
    _configure(study, stub)
    result = run_study(study)
    assert result.returncode == 1, result.stderr
    assert f"stopped: the server asks to {quoted}, more than [limits] max_wait (120 s)" in (
        result.stderr
    )
    if "days" in quoted:
        resume = datetime.now(UTC) + timedelta(seconds=999999)
        assert f"resume after {resume:%Y-%m-%d}" in result.stderr
    assert "resume with: geval-async run" in result.stderr
    assert stub.received <= 2  # the first wave only: nothing is sent after the stop
    assert "Traceback" not in result.stderr


def test_a_http_date_retry_after_is_honoured(
    serve: Callable[[Respond], Stub], study: StudyFiles
) -> None:
    when = datetime.now(UTC) + timedelta(days=3)
    stub = serve(lambda body, arrival: too_many(**{"Retry-After": format_datetime(when, True)}))
    _configure(study, stub, max_wait=3600)
    result = run_study(study)
    assert result.returncode == 1, result.stderr
    assert "the server asks to wait 3.0 days (Retry-After: " in result.stderr
    assert "more than [limits] max_wait (3600 s)" in result.stderr


def test_sigterm_ends_a_429_pause_at_once_and_says_how_long_it_waits(
    serve: Callable[[Respond], Stub], study: StudyFiles
) -> None:
    stub = serve(lambda body, arrival: too_many(**{"Retry-After": "90"}))
    _configure(study, stub)
    process = _popen(study)
    try:
        # The quiet run's retry line says what it waits for (every 5 s while retrying).
        said = _read_until(process.stderr, "waiting", process)
        assert "429, Retry-After 90" in said, said
        sent = stub.received
        stub.stopped = True
        process.send_signal(signal.SIGTERM)
        # Well inside the 90 s the server asked for: the stop ends the wait.
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert "interrupted: answers received so far are saved" in err
    assert stub.received == sent and stub.posts_after_stop == 0


# --- harm 2: a tiny learned limit does not stall the run ------------------------------------


@pytest.mark.parametrize("header", ["x-ratelimit-limit-requests", "x-ratelimit-limit-tokens"])
def test_a_learned_limit_no_account_has_is_ignored_with_one_warning(
    serve: Callable[[Respond], Stub], study: StudyFiles, header: str
) -> None:
    stub = serve(lambda body, arrival: web.json_response(answer(body), headers={header: "1e-9"}))
    _configure(study, stub, concurrency=1)
    result = run_study(study, "--limit", "3")
    assert result.returncode == 0, result.stderr
    assert stub.received == 6
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: ignored {header}: 1e-09: below "
        + ("one request" if header.endswith("requests") else "the tokens of one request")
        + " a minute, which no account has; pacing without it"
    ], result.stderr


def test_a_slow_learned_limit_says_so_at_once_and_sigterm_stops_its_wait(
    serve: Callable[[Respond], Stub], study: StudyFiles
) -> None:
    stub = serve(
        lambda body, arrival: web.json_response(
            answer(body), headers={"x-ratelimit-limit-requests": "1"}
        )
    )
    _configure(study, stub, concurrency=1, max_wait=30)
    process = _popen(study)
    try:
        said = _read_until(process.stderr, "warning:", process)
        assert (
            "the server's x-ratelimit-limit-requests: 1 paces one request every 60 s "
            "(more than [limits] max_wait, 30 s)" in said
        ), said
        stub.stopped = True
        sent = stub.received
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert stub.received == sent and stub.posts_after_stop == 0


# --- the smaller server-side items ----------------------------------------------------------


@pytest.mark.parametrize(
    "headers", [{"Retry-After": "-5"}, {"retry-after-ms": "NaN"}, {"Retry-After": "soon"}]
)
def test_a_wait_that_is_no_wait_backs_off_and_a_429_forever_is_bounded(
    serve: Callable[[Respond], Stub], study: StudyFiles, headers: dict[str, str]
) -> None:
    stub = serve(lambda body, arrival: too_many(**headers))
    _configure(study, stub, backoff=0.05, max_backoff=0.1)
    result = run_study(study)
    assert result.returncode == 1, result.stderr
    assert "stopped: the server answered 429 to the same request 9 times in a row" in (
        result.stderr
    )
    # max(retries, 8) 429s in a row, then the stop: never the 100 a request of before.
    assert stub.received <= 2 * 9, stub.received


def test_asked_waits_of_each_header_form() -> None:
    from geval_async.judging.wire.server_waits import asked_wait

    assert asked_wait({"Retry-After": "-5"}) is None
    assert asked_wait({"retry-after-ms": "NaN"}) is None
    assert asked_wait({"retry-after-ms": "-1", "Retry-After": "2"}) == (2.0, "Retry-After: 2")
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), True)
    assert asked_wait({"Retry-After": past}) is None
    future = format_datetime(datetime.now(UTC) + timedelta(hours=1), True)
    wait = asked_wait({"Retry-After": future})
    assert wait is not None and 3500 < wait[0] <= 3600
    assert asked_wait({"x-ratelimit-reset-tokens": "-3s"}) is None


def _flood(size: int, declared: bool | str) -> Respond:
    """Answers of about ``size`` bytes: with a Content-Length (True), chunked (False), or
    gzipped with the compressed length declared ("gzip": 3 MB of text is 3 kB so)."""

    def respond(body: dict[str, Any], arrival: int) -> web.StreamResponse:
        content = "3 " + "x" * size
        payload = web.json_response(answer(body, content)).body
        assert isinstance(payload, bytes)
        if declared == "gzip":
            return _gzipped(payload)
        if declared:
            return web.Response(body=payload, content_type="application/json")
        return _Chunked(payload)

    return respond


def _gzipped(payload: bytes) -> web.Response:
    """``payload`` gzipped, as a server that compresses its answers sends it (whether asked
    or not), its compressed length declared."""
    body, headers = gzip.compress(payload), {"Content-Encoding": "gzip"}
    return web.Response(body=body, content_type="application/json", headers=headers)


class _Chunked(web.StreamResponse):
    """A body sent in chunks with no Content-Length."""

    def __init__(self, payload: bytes) -> None:
        super().__init__(headers={"Content-Type": "application/json"})
        self.enable_chunked_encoding()
        self._payload = payload

    async def prepare(self, request: web.BaseRequest) -> Any:
        writer = await super().prepare(request)
        for start in range(0, len(self._payload), 65536):
            await self.write(self._payload[start : start + 65536])
        await self.write_eof()
        return writer


def _cache_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


@pytest.mark.parametrize(
    "declared", [True, False, "gzip"], ids=["content-length", "chunked", "gzip"]
)
def test_an_answer_over_max_answer_bytes_is_refused_and_never_stored(
    serve: Callable[[Respond], Stub], study: StudyFiles, declared: bool | str
) -> None:
    stub = serve(_flood(3_000_000, declared))
    _configure(study, stub)
    result = run_study(study, "--limit", "2")
    assert result.returncode == 1, result.stderr
    assert stub.received == 4  # refused at once: the same request would flood again
    assert "the answer body is larger than [limits] max_answer_bytes" in result.stdout
    assert _cache_bytes(study.cache) < 1_000_000  # 4 x 3 MB of before


def test_an_answer_under_a_raised_max_answer_bytes_is_kept(
    serve: Callable[[Respond], Stub], study: StudyFiles
) -> None:
    stub = serve(_flood(3_000, True))
    _configure(study, stub, max_answer_bytes=2_000)
    assert run_study(study, "--limit", "1").returncode == 1
    _configure(study, stub, max_answer_bytes=100_000)
    result = run_study(study, "--limit", "1", "--retry-failed")
    assert result.returncode == 0, result.stderr


def test_a_server_that_gzips_its_answers_is_read_and_scored(
    serve: Callable[[Respond], Stub], study: StudyFiles
) -> None:
    stub = serve(lambda body, arrival: _gzipped(json.dumps(answer(body)).encode()))
    _configure(study, stub)
    result = run_study(study)
    assert result.returncode == 0, result.stderr
    scored = run_cli("score", str(study.config))
    assert scored.returncode == 0, scored.stderr
    # Every rating read from the stored bodies (decompressed as received): "3" each time.
    with (study.output / "scores" / "t_long.csv").open() as table:
        rows = list(csv.DictReader(table))
    assert len(rows) == stub.received == 2 * study.n_records  # a row a record and criterion
    assert {(row["score"], row["status"]) for row in rows} == {("3.0", "scored")}


def test_a_redirect_stops_the_run_naming_where_it_points(
    serve: Callable[[Respond], Stub], study: StudyFiles
) -> None:
    holder: list[Stub] = []

    def respond(body: dict[str, Any], arrival: int) -> web.StreamResponse:
        target = f"http://127.0.0.1:{holder[0].port}/v2/chat/completions"
        return web.Response(status=302, headers={"Location": target})

    stub = serve(respond)
    holder.append(stub)
    _configure(study, stub)
    result = run_study(study)
    assert result.returncode == 1, result.stderr
    assert (
        f"stopped: the judge URL {stub.base_url}/chat/completions redirects (HTTP 302 to "
        f"http://127.0.0.1:{stub.port}/v2/chat/completions): set base_url" in result.stderr
    )
    assert stub.received <= 2  # the redirect was never followed (a GET, or a second POST)


def test_every_answer_invalid_is_said_by_run_and_score(
    serve: Callable[[Respond], Stub], study: StudyFiles
) -> None:
    stub = serve(lambda body, arrival: web.json_response(answer(body, None)))
    _configure(study, stub)
    result = run_study(study, "--limit", "2")
    scored = run_cli("score", str(study.config))
    assert "holds no answer" not in scored.stderr
    assert stub.received == 4
    # Complete by count (every item answered), and yet nothing to score: exit 1 with the line.
    assert result.returncode == 1, result.stderr
    assert "every answer of this run is invalid (12 x content null)" in result.stderr
    assert scored.returncode == 2
    assert f"every answer in the cache {study.cache} is invalid (12 x " in scored.stderr, (
        scored.stderr
    )


def test_a_model_other_than_the_one_asked_is_said_once_in_the_summary(
    serve: Callable[[Respond], Stub], study: StudyFiles
) -> None:
    def respond(body: dict[str, Any], arrival: int) -> web.StreamResponse:
        # Odd arrivals: another model; even ones: a dated snapshot of the one asked.
        served = "llama-3-8b-instruct" if arrival % 2 else f"{body['model']}-2024-07-18"
        return web.json_response(answer(body, model=served))

    stub = serve(respond)
    _configure(study, stub)
    result = run_study(study, "--limit", "2")
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stdout.splitlines() if "the server says" in line]
    assert notes == [
        "note: sim-judge was asked, but the server says it answered with "
        "llama-3-8b-instruct (2): the answers are stored as received (their bodies keep the "
        "name served)"
    ], result.stdout
    # The raw export keeps the name each item's answer was served under.
    scored = run_cli("score", str(study.config), "--limit", "2")
    assert scored.returncode == 0, scored.stderr
    raw = json.loads((study.output / "raw" / "t-limit-2_clar.json").read_text(encoding="utf-8"))
    assert raw["model"] == "sim-judge"
    served = [item["served_model"] for item in raw["items"]]
    assert len(served) == 2 and set(served) <= {"llama-3-8b-instruct", "sim-judge-2024-07-18"}


@pytest.mark.parametrize(
    "served, asked, same",
    [
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", True),
        ("gpt-4o-mini", "gpt-4o-mini", True),
        ("GPT-4o-mini", "gpt-4o-mini", True),
        ("gpt-4-0613", "gpt-4", True),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet", True),
        ("gpt-4o", "gpt-4o-mini", False),
        ("gpt-4o-mini", "gpt-4o", False),
        ("llama-3-8b-instruct", "gpt-4o-mini", False),
        ("meta-llama/llama-3-8b", "llama-3-8b", True),
    ],
)
def test_a_snapshot_of_the_model_asked_is_the_same_model(
    served: str, asked: str, same: bool
) -> None:
    from geval_async.judging.run.worker import same_model

    assert same_model(served, asked) is same


@pytest.mark.parametrize(
    "key, value", [("max_wait", 0), ("max_wait", "soon"), ("max_answer_bytes", 1.5)]
)
def test_a_bad_ceiling_is_one_line_naming_the_file_and_key(
    study: StudyFiles, key: str, value: object
) -> None:
    study.write_config("http://127.0.0.1:9/v1", limits={key: value})
    result = run_study(study)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert str(study.config) in line and f"'{key}' must be" in line, line
