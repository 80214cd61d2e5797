"""The simulated OpenAI-compatible judge server, standing in for the remote API.

Tests, benchmarks and the demo talk HTTP to it exactly as to OpenAI or Azure OpenAI
(``POST /v1/chat/completions``, ``POST /openai/deployments/{name}/chat/completions``, and
the Responses API: ``POST /v1/responses``, ``POST /openai/v1/responses``, :mod:`.responses`).
It answers deterministically from a hash of the request: every prompt has a hidden "true
score" on the scale named in the prompt, and each choice is that score plus deterministic
noise, written the ways real judges write ratings; with ``logprobs`` the first token carries
a distribution over the ratings centred on the true score. On request it injects the faults a
remote API shows (429s with retry-after, quota exhaustion, 5xx, resets, stalls, truncated
bodies) and counts everything it received, so a test can assert what a client sent.

With ``prompt_cache`` it models OpenAI's prompt cache (:mod:`geval_async.sim.prompt_cache`):
``cached_tokens`` in the usage of a request whose start an answered one carried.
Model profiles (:mod:`geval_async.sim.profiles`: ``openai-reasoning``, ``deepseek-reasoner``,
``think-tags``, ``anthropic-compat``) make it refuse and answer as those endpoints do; a prompt
ending in "Evaluation Steps:" gets G-Eval's evaluation steps (:mod:`geval_async.sim.steps`).
It speaks the Batch API too (``/v1/files``, ``/v1/batches``: :mod:`geval_async.sim.batch`),
with OpenAI's enqueued-token limit (:mod:`geval_async.sim.batch_queue`).
``GET /sim/stats``, ``POST /sim/settings`` and ``POST /sim/reset`` let another process
(a benchmark driving the CLI) watch and steer it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import json
import random
import threading
import time
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from .answers import MODEL, answer_forms, completion
from .batch import BatchService
from .certainty import check_certainty, item_digest
from .limits import (
    QUOTA_MESSAGE,
    SERVER_ERRORS,
    RateLimiter,
    draw_fault,
    draw_latency,
    error,
    prompt_tokens,
    reset_connection,
    too_many,
    validate,
)
from .profiles import (
    ANTHROPIC_COMPAT,
    OPENAI_REASONING,
    OPENAI_RESPONSES,
    check_profile,
    fresh_samples,
    refusal,
)
from .prompt_cache import PromptCache
from .responses import chat_refusal, chat_request, response_object
from .settings import SimSettings, SimStats

# -- HTTP ---------------------------------------------------------------------------------


@web.middleware
async def _house_style(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer routing errors in OpenAI's form too, and mark every answer as simulated."""
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = error(exc.status, exc.reason, "invalid_request_error", str(exc.status))
    response.headers["x-geval-simulated"] = "true"
    return response


class _Judge:
    """The request handlers, sharing settings, stats, limiter and fault RNG."""

    def __init__(self, settings: SimSettings, stats: SimStats) -> None:
        self.settings, self.stats = settings, stats
        self.limiter = RateLimiter()
        self.rng, self.rng_seed = random.Random(settings.seed), settings.seed
        self.granted = 0  # 200s promised but not yet sent, so quota_after holds under load
        self.calls: collections.Counter[str] = collections.Counter()  # ignore_n: per body, not n
        self.batches: BatchService | None = None
        self.cache = PromptCache()

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, responses=False)

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, responses=True)

    async def _handle(self, request: web.Request, *, responses: bool) -> web.StreamResponse:
        raw = await request.read()
        digest = hashlib.sha256(raw).hexdigest()
        stats = self.stats
        stats.received += 1
        arrived = time.monotonic()
        stats.arrivals.append((arrived, digest))
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        try:
            response = await self._answer(request, raw, digest, responses)
        except asyncio.CancelledError:
            stats.by_status[-1] += 1
            stats.events.append((arrived, time.monotonic(), -1))
            raise
        finally:
            stats.in_flight -= 1
        if response is None:
            stats.by_status[0] += 1
            stats.events.append((arrived, time.monotonic(), 0))
            return web.Response()  # never sent: the transport is gone
        stats.by_status[response.status] += 1
        stats.events.append((arrived, time.monotonic(), response.status))
        s = self.settings
        response.headers.update(self.limiter.headers(s.rpm, s.tpm, s.bucket_seconds))
        return response

    async def _answer(
        self, request: web.Request, raw: bytes, digest: str, responses: bool = False
    ) -> web.Response | None:
        s = self.settings
        if "deployment" in request.match_info and "api-version" not in request.query:
            return error(404, "Resource not found", "invalid_request_error", "404")
        if s.api_key is not None and (
            request.headers.get("api-key") != s.api_key
            and request.headers.get("Authorization") != f"Bearer {s.api_key}"
        ):
            message = "Incorrect API key provided. (sim)"
            return error(401, message, "invalid_request_error", "invalid_api_key")
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        asked: dict[str, Any] | None = None  # a Responses request, as it came
        if responses:
            # Checked as OpenAI checks it, then judged as the chat completion of its one choice.
            chat, refused_request = chat_request(body, s)
            if chat is None:
                status, payload = refused_request
                return web.json_response(payload, status=status)
            asked, body = body, chat
        else:
            refused_chat = chat_refusal(body, s)
            if refused_chat is not None:
                return web.json_response(refused_chat[1], status=refused_chat[0])
        problem = validate(body, s.context_window, s.content_filter_marker)
        if problem is not None:
            message, code = problem
            return error(400, message, "invalid_request_error", code)
        if s.max_n is not None and (body.get("n") or 1) > s.max_n:
            # The words llama.cpp's llama-server uses when n exceeds its slots.
            message = (
                f"Field 'n': Value must be between 1 <= value <= {s.max_n}, "
                f"but got {body.get('n')} (sim)"
            )
            return error(400, message, "invalid_request_error", None)
        refused = None if responses else refusal(body, s)
        if refused is not None:
            status, payload = refused
            return web.json_response(payload, status=status)
        prompt = prompt_tokens(body["messages"])
        # What the prompt cache holds as the request arrives: a start being computed for a
        # request still in flight is not there yet.
        cached: int | None = None
        starts: list[bytes] = []
        if s.prompt_cache:
            # Routed by the key the request carried (a Responses request's, not its chat form's).
            routed = (
                body
                if asked is None
                else {**body, "prompt_cache_key": asked.get("prompt_cache_key")}
            )
            cached, starts = self.cache.read(
                routed, prompt, time.monotonic(), s.cache_retention_minutes * 60
            )

        if self.rng_seed != s.seed:
            self.rng, self.rng_seed = random.Random(s.seed), s.seed
        if s.quota_after is not None and self.stats.by_status[200] + self.granted >= s.quota_after:
            self.stats.faults["quota"] += 1
            return error(429, QUOTA_MESSAGE, "insufficient_quota", "insufficient_quota")
        fault = draw_fault(s, self.rng)
        if fault is not None:
            self.stats.faults[fault] += 1
        if fault in SERVER_ERRORS:
            return error(int(fault), SERVER_ERRORS[fault], "server_error", None)
        if fault == "reset":
            reset_connection(request)
            return None
        if fault == "429":
            return too_many("requests", s.retry_after_ms / 1000, "Rate limit reached. (simulated)")
        if fault == "stall":
            await asyncio.sleep(s.stall_seconds)

        # Without max_tokens OpenAI still charges some completion; 16 is its old default.
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens")) or 16
        cost = prompt + max_tokens * (body.get("n") or 1)
        verdict = self.limiter.admit(s.rpm, s.tpm, s.bucket_seconds, cost)
        if verdict.refused is not None:
            self.stats.rate_limited += 1
            return too_many(verdict.refused, verdict.retry_after, verdict.message)

        self.granted += 1
        try:
            delay = draw_latency(s.latency_ms, s.latency_sigma, self.rng)
            if delay > 0:
                await asyncio.sleep(delay)
            model = body.get("model") or request.match_info.get("deployment") or MODEL
            response = self._completion(body, model, digest, fault == "truncated", asked, cached)
            if s.prompt_cache:
                self.cache.keep(starts, time.monotonic(), s.cache_retention_minutes * 60)
            return response
        finally:
            self.granted -= 1

    def _completion(
        self,
        body: dict[str, Any],
        model: str,
        digest: str,
        truncate: bool,
        asked: dict[str, Any] | None = None,
        cached: int | None = None,
    ) -> web.Response:
        """The answer to ``body`` (``asked``: the Responses request it judges, answered as a
        ``response`` object; ``cached``: its prompt tokens read from the prompt cache, None
        when the cache is not modelled)."""
        repeat = self.stats.answered[digest]
        # llama.cpp samples anew on every call, also when only n differs between calls;
        # an endpoint that ignores the seed does when only the seed differs.
        unseeded = ("n", "seed") if self.settings.profile == ANTHROPIC_COMPAT else ("n",)
        call = json.dumps({k: v for k, v in body.items() if k not in unseeded}, sort_keys=True)
        # The Responses API takes one request a draw: each call is a fresh sample.
        fresh = asked is not None
        if fresh_samples(self.settings) or fresh:
            repeat = self.calls[call]
        answer_id = f"chatcmpl-sim-{hashlib.sha256(f'{digest}:{repeat}'.encode()).hexdigest()[:24]}"
        settings = self.settings
        if settings.profile == OPENAI_RESPONSES:
            settings = dataclasses.replace(settings, profile=OPENAI_REASONING)
        answer, judged = completion(
            body, settings, model, answer_id, repeat, fresh or None, cached=cached
        )
        samples = len(answer["choices"])
        prompt = answer["usage"]["prompt_tokens"]
        if asked is not None:
            answer = response_object(answer, asked, judged.thoughts)
        if judged.refusals:
            self.stats.faults["invalid_answer"] += judged.refusals
        text = json.dumps(answer)
        if truncate:
            text = text[: len(text) // 2]
        else:
            self.stats.answered[digest] += 1
            self.stats.samples += samples
            self.stats.item_draws[item_digest(body["messages"])] += samples
            self.stats.ratings.setdefault(digest, []).extend(judged.ratings)
            if judged.intended is not None:
                self.stats.intended[digest] = judged.intended
            self.stats.steps += judged.steps
            if judged.pair is not None:
                self.stats.verdicts.append((*judged.pair, judged.verdicts))
            self.stats.prompt_tokens += prompt
            self.stats.cached_tokens += cached or 0
            self.stats.cache_hits += bool(cached)
            self.stats.cache_keys[str((asked or body).get("prompt_cache_key") or "")] += 1
            self.calls[call] += 1
        return web.Response(text=text, content_type="application/json")

    async def models(self, request: web.Request) -> web.Response:
        model = {"id": MODEL, "object": "model", "created": 0, "owned_by": "geval-async"}
        return web.json_response({"object": "list", "data": [model]})

    async def stats_view(self, request: web.Request) -> web.Response:
        if self.batches is not None:
            self.batches.refresh()  # the queued tokens as of now
        ratings = request.query.get("ratings", "") not in ("", "0")
        return web.json_response(self.stats.as_dict(ratings=ratings))

    async def reset_stats(self, request: web.Request) -> web.Response:
        self.stats.reset()
        return web.json_response(self.stats.as_dict())

    async def update_settings(self, request: web.Request) -> web.Response:
        """Apply a partial JSON update of SimSettings; unknown fields or wrong types are 400."""
        try:
            update = await request.json()
        except ValueError:
            update = None
        if not isinstance(update, dict):
            return error(400, "Expected a JSON object of settings.", "invalid_request_error", None)
        types = {f.name: str(f.type) for f in dataclasses.fields(SimSettings)}
        for name, value in update.items():
            if name not in types or not _fits(value, types[name]):
                message = f"Invalid setting {name}={value!r}."
                return error(400, message, "invalid_request_error", None)
        try:
            updated = dataclasses.replace(self.settings, **update)
            check_profile(updated)
            check_certainty(updated)
        except ValueError as exc:
            return error(400, f"Invalid setting: {exc}.", "invalid_request_error", None)
        for name, value in update.items():
            setattr(self.settings, name, value)
        return web.json_response(dataclasses.asdict(self.settings))


def _fits(value: Any, annotation: str) -> bool:
    """Whether a JSON value suits a SimSettings annotation such as "int | None"."""
    kinds = {"float": (int, float), "int": (int,), "bool": (bool,), "str": (str,)}
    allowed = {k for part in annotation.split(" | ") for k in kinds.get(part, (type(None),))}
    # bool is an int to isinstance, but True is no rate limit
    return type(value) in allowed


def make_app(settings: SimSettings, stats: SimStats | None = None) -> web.Application:
    """The simulated judge as an aiohttp application.

    Args:
        settings: read on every request, so changing an attribute takes effect at once.
        stats: where to count; a fresh SimStats when omitted.
    """
    answer_forms(settings.answer_styles)  # an unknown style fails here, not on every request
    check_profile(settings)  # and so does an unknown profile
    check_certainty(settings)  # and an unknown certainty
    judge = _Judge(settings, stats if stats is not None else SimStats())
    batches = BatchService(settings, judge.stats)
    judge.batches = batches
    # Batch input files may be 200 MB.
    app = web.Application(middlewares=[_house_style], client_max_size=256 * 1024**2)
    app.add_routes(
        [
            web.post("/v1/chat/completions", judge.completions),
            web.post("/openai/deployments/{deployment}/chat/completions", judge.completions),
            web.post("/v1/responses", judge.responses),
            web.post("/openai/v1/responses", judge.responses),
            web.get("/v1/models", judge.models),
            web.get("/sim/stats", judge.stats_view),
            web.post("/sim/settings", judge.update_settings),
            web.post("/sim/reset", judge.reset_stats),
            *batches.routes(),
        ]
    )
    return app


# Stalled handlers are cancelled when their client leaves; at shutdown, wait this long.
_SHUTDOWN_SECONDS = 0.5


def _runner(app: web.Application) -> web.AppRunner:
    return web.AppRunner(
        app, handler_cancellation=True, shutdown_timeout=_SHUTDOWN_SECONDS, access_log=None
    )


class SimServer:
    """Runs the app on 127.0.0.1 in a background thread with its own event loop.

    Like httpx's tests/conftest.py serving uvicorn in a thread: synchronous tests and the
    openai SDK can use it, and async tests are not slowed by the server sharing their loop.
    """

    def __init__(
        self, settings: SimSettings | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.settings = settings if settings is not None else SimSettings()
        self.stats = SimStats()
        self.host, self.port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def start(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="sim-judge", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), loop).result(timeout=30)

    async def _start(self) -> None:
        self._runner = _runner(make_app(self.settings, self.stats))
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._loop = self._thread = None

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        # Handlers of dropped connections may still be unwinding; let them finish quietly.
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def __enter__(self) -> SimServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


async def serve(settings: SimSettings, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve until cancelled.

    Prints ``simulated judge listening on http://HOST:PORT/v1`` (flushed) once bound, with
    the real port when ``port`` is 0, for the CLI and for launchers that parse it.
    """
    runner = _runner(make_app(settings))
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        bound = runner.addresses[0][1]
        shown = f"[{host}]" if ":" in host else host
        print(f"simulated judge listening on http://{shown}:{bound}/v1", flush=True)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
