"""Which judge is at the endpoint: the one GET a run asks before it reads the cache.

Every server here is real, on 127.0.0.1: the simulated judge, an aiohttp.web app that is not
it, a socket that speaks no HTTP, one that never answers, and a port nothing listens on. What
a user would notice is the run reading another server's answers as its own (or the reverse),
so the probe must say True, False or "cannot tell" (None) and never fail the run.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web
from conftest import LoopbackApp, PlainJudge

from geval_async.judging.wire.probe import server_is_simulated
from geval_async.options import Provider
from geval_async.sim.server import SimServer
from geval_async.study.settings import JudgeConfig


def _judge(base_url: str) -> JudgeConfig:
    return JudgeConfig(model="m", base_url=base_url)


class MarkedJudge(LoopbackApp):
    """A server that marks its answers as the simulated judge does, in another case of the
    header's name, on Azure OpenAI's deployment URL; it records what it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, str, str]] = []

    async def _get(self, request: web.Request) -> web.Response:
        self.asked.append((request.method, request.path_qs, request.headers.get("Host", "")))
        return web.Response(status=405, headers={"X-Geval-Simulated": "true"})

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/openai/deployments/d/chat/completions", self._get)]


@asynccontextmanager
async def _raw_server(
    handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        await server.wait_closed()


async def test_the_simulated_judge_is_told_apart_from_another_server() -> None:
    with SimServer() as sim:
        assert await server_is_simulated(_judge(sim.base_url)) is True
    with PlainJudge() as plain:  # answers the GET with 405 and no mark
        assert await server_is_simulated(_judge(plain.base_url)) is False
    assert plain.received == 0, "the probe is a GET: nothing is judged"


async def test_the_mark_is_read_whatever_its_case_at_the_url_as_configured() -> None:
    with MarkedJudge() as marked:
        endpoint = marked.base_url.removesuffix("/v1")
        judge = JudgeConfig(
            model="m",
            provider=Provider.AZURE,
            azure_endpoint=endpoint,
            deployment="d",
            api_version="2024-10-21",
        )
        assert await server_is_simulated(judge) is True
    # The path and query as configured (the api-version), and no key: a bare GET.
    assert marked.asked == [
        ("GET", "/openai/deployments/d/chat/completions?api-version=2024-10-21", endpoint[7:])
    ]


async def test_no_answer_a_stranger_or_nobody_cannot_tell() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{free.getsockname()[1]}/v1"
    assert await server_is_simulated(_judge(dead)) is None  # nothing listens there

    async def not_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        await writer.drain()
        writer.close()

    async def hangs_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    answered = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answered.wait()  # never, until the test is over
        writer.close()

    async with _raw_server(not_http) as url:
        assert await server_is_simulated(_judge(url)) is None
    async with _raw_server(hangs_up) as url:
        assert await server_is_simulated(_judge(url)) is None
    async with _raw_server(silent) as url:
        # Within the seconds given, not the run's whole timeout: the run goes on without it.
        assert await server_is_simulated(_judge(url), seconds=0.2) is None
        answered.set()
