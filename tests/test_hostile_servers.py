"""Servers that send back what they should not: the API key quoted in an error, a web page for
an answer, a head too large to read, a body in an encoding nobody asked for.

Each test serves a real aiohttp.web stub on 127.0.0.1 made to misbehave one way and drives the
real CLI against it, then looks where a user would: the lines printed, every file of the cache
folder, the archive a ``cache export`` writes for co-authors.
"""

from __future__ import annotations

import gzip
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from conftest import LoopbackApp, StudyFiles, run_cli, run_study

KEY = "sk-hostile-4f1c9a7e2b6d8053"
KEY_ENV = {"HOSTILE_JUDGE_KEY": KEY}

Respond = Callable[[web.Request], Awaitable[web.StreamResponse]]


class EchoJudge(LoopbackApp):
    """A judge on loopback that answers every POST with ``respond(request)``."""

    def __init__(self, respond: Respond) -> None:
        super().__init__()
        self.respond = respond
        self.received = 0

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        self.received += 1
        await request.read()
        return await self.respond(request)

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/chat/completions", self._complete)]


@pytest.fixture
def serve() -> Iterator[Callable[[Respond], EchoJudge]]:
    judges: list[EchoJudge] = []

    def start(respond: Respond) -> EchoJudge:
        judge = EchoJudge(respond).__enter__()
        judges.append(judge)
        return judge

    yield start
    for judge in judges:
        judge.__exit__()


def _configure(study: StudyFiles, judge: EchoJudge) -> None:
    study.write_config(
        judge.base_url,
        judge={"api_key_env": "HOSTILE_JUDGE_KEY"},
        limits={"concurrency": 2, "retries": 1, "timeout": 5, "backoff": 0.01},
    )


def _echo(status: int) -> Respond:
    """A server that quotes the request's Authorization header in its error body and in a
    header, as a debugging proxy does."""

    async def respond(request: web.Request) -> web.StreamResponse:
        sent = request.headers.get("Authorization", "")
        return web.json_response(
            {
                "error": {
                    "message": f"Invalid request; headers were Authorization: {sent}",
                    "type": "invalid_request_error",
                    "code": f"echo {sent}",
                }
            },
            status=status,
            headers={"X-Echo": sent},
        )

    return respond


def _files_holding(folder: Path, needle: bytes) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.parametrize("status", [400, 401, 500])
def test_an_api_key_a_server_echoes_is_never_printed_stored_or_exported(
    serve: Callable[[Respond], EchoJudge], study: StudyFiles, status: int, tmp_path: Path
) -> None:
    judge = serve(_echo(status))
    _configure(study, judge)
    result = run_study(study, env=KEY_ENV)
    assert judge.received > 0
    assert result.returncode != 0
    assert KEY not in result.stdout + result.stderr
    if status != 500:  # a refusal or a stop: the server's words are quoted, key taken out
        assert "[API key removed]" in result.stdout + result.stderr
    assert _files_holding(study.cache, KEY.encode()) == []
    answers = run_cli("answers", str(study.config), "--record", "u000-A", env=KEY_ENV)
    assert KEY not in answers.stdout + answers.stderr
    archive = tmp_path / "shared.jsonl.gz"
    exported = run_cli("cache", "export", str(study.config), str(archive), env=KEY_ENV)
    assert exported.returncode == 0, exported.stderr
    unpacked = gzip.decompress(archive.read_bytes())
    if status == 400:  # the refusals are stored, and exported
        assert b"[API key removed]" in unpacked
    assert KEY.encode() not in unpacked


@pytest.mark.parametrize("size", [40, 2_000_000])  # a page, and one over max_answer_bytes
def test_a_web_page_for_every_answer_stops_the_run_at_once(
    serve: Callable[[Respond], EchoJudge], study: StudyFiles, size: int
) -> None:
    async def page(request: web.Request) -> web.StreamResponse:
        text = "<!doctype html><html><body>" + "Welcome. " * (size // 9) + "</body></html>"
        return web.Response(text=text, content_type="text/html")

    judge = serve(page)
    _configure(study, judge)
    result = run_study(study, env=KEY_ENV)
    assert result.returncode == 1, result.stderr
    stops = [line for line in result.stderr.splitlines() if line.startswith("stopped:")]
    assert stops == [
        f"stopped: the judge URL {judge.base_url}/chat/completions answers with a web page "
        "(HTTP 200, text/html), not a chat-completions answer: check base_url (it should "
        "end in /v1 for most servers)"
    ]
    # The first wave only (concurrency 2): no request is sent again, none after the stop.
    assert judge.received <= 2
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "headers, said",
    [
        ({"X-Padding": "a" * 20_000}, "oversized response headers"),
        ({f"X-Padding-{i}": "a" for i in range(300)}, "oversized response headers"),
        ({"Content-Encoding": "br"}, "unreadable content encoding"),
        ({"Content-Encoding": "zstd"}, "unreadable content encoding"),
    ],
)
def test_an_unreadable_answer_head_or_encoding_is_named_as_what_it_is(
    serve: Callable[[Respond], EchoJudge],
    study: StudyFiles,
    headers: dict[str, str],
    said: str,
) -> None:
    async def unreadable(request: web.Request) -> web.StreamResponse:
        body = b'{"choices": []}'
        return web.Response(body=body, content_type="application/json", headers=headers)

    judge = serve(unreadable)
    _configure(study, judge)
    result = run_study(study, env=KEY_ENV)
    assert result.returncode == 1, result.stderr
    assert judge.received > 0
    assert said in result.stdout
    assert "connection reset" not in result.stdout + result.stderr


class EchoingBatchAPI(LoopbackApp):
    """A Batch API on loopback that refuses every upload, quoting the key it was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.uploads = 0

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        self.uploads += 1
        await request.read()
        return await _echo(400)(request)

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/files", self._upload)]


def test_an_api_key_the_batch_api_echoes_is_never_printed(study: StudyFiles) -> None:
    with EchoingBatchAPI() as provider:
        study.write_config(provider.base_url, judge={"api_key_env": "HOSTILE_JUDGE_KEY"})
        result = run_study(study, "--batch", "--poll", "0.05", env=KEY_ENV)
    assert provider.uploads == 1
    assert result.returncode == 1, result.stderr
    assert "uploading the batch input file: HTTP 400" in result.stderr
    assert "[API key removed]" in result.stderr
    assert KEY not in result.stdout + result.stderr
    assert _files_holding(study.cache, KEY.encode()) == []
