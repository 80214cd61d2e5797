"""The simulated OpenAI-compatible judge server, standing in for the remote API.

Tests, benchmarks and the demo talk HTTP to it exactly as to OpenAI or Azure OpenAI
(``POST /v1/chat/completions``, ``POST /openai/deployments/{name}/chat/completions``).
It answers deterministically from a hash of the request: every prompt has a hidden "true
score" on the scale named in the prompt, and each choice is that score plus deterministic
noise, written the ways real judges write ratings; with ``logprobs`` the first token carries
a distribution over the ratings centred on the true score. On request it injects the faults a
remote API shows (429s with retry-after, quota exhaustion, 5xx, resets, stalls, truncated
bodies) and counts everything it received, so a test can assert what a client sent.

``GET /sim/stats``, ``POST /sim/settings`` and ``POST /sim/reset`` let another process
(a benchmark driving the CLI) watch and steer it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import json
import math
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from geval_async.sim_limits import (
    QUOTA_MESSAGE,
    SERVER_ERRORS,
    RateLimiter,
    draw_fault,
    draw_latency,
    error,
    message_text,
    prompt_tokens,
    reset_connection,
    too_many,
    validate,
)

MODEL = "sim-judge"
FINGERPRINT = "geval-async-simulated"
INVALID_ANSWER = "I cannot rate this text."
STYLES = ("{r}", " {r}", "{r}.", "Score: {r}", "{r}/{top}", "Final score: {r}.", "Rating: {r}")
NOISE_SD = 0.7
LOGPROB_WIDTH = 0.6
# Matches "(1-5)", "1-3", "1 to 5", "scale of 1 to 10"; the rating line comes last in a prompt.
SCALE = re.compile(r"(?<![\d.])1\s*(?:-|–|to)\s*(\d{1,3})\b")


@dataclass
class SimSettings:
    """What the simulated judge does; attributes may be changed while it runs."""

    latency_ms: float = 0.0
    latency_sigma: float = 0.0
    rpm: int | None = None
    tpm: int | None = None
    bucket_seconds: float = 60.0
    error_500: float = 0.0
    error_503: float = 0.0
    reset: float = 0.0
    stall: float = 0.0
    stall_seconds: float = 3600.0
    truncated: float = 0.0
    spurious_429: float = 0.0
    retry_after_ms: int = 200
    quota_after: int | None = None
    invalid_answers: float = 0.0
    ignore_n: bool = False
    max_n: int | None = None         # llama-server-style: n above this -> 400 "Field 'n': ..."
    api_key: str | None = None
    context_window: int = 128_000
    content_filter_marker: str = "[[FILTER]]"
    seed: int = 0


@dataclass
class SimStats:
    """What the simulated judge received and answered.

    ``by_status`` counts resets under 0 and requests whose client went away under -1.
    ``answered`` counts complete 200 answers (not truncated ones) by sha256 of the raw body.
    ``events`` holds (arrival, response time, status) per request, on ``time.monotonic()``,
    with the same 0 / -1 statuses as ``by_status``.
    """

    received: int = 0
    by_status: collections.Counter[int] = field(default_factory=collections.Counter)
    in_flight: int = 0
    peak_in_flight: int = 0
    answered: collections.Counter[str] = field(default_factory=collections.Counter)
    arrivals: list[tuple[float, str]] = field(default_factory=list)
    events: list[tuple[float, float, int]] = field(default_factory=list)
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    rate_limited: int = 0

    def reset(self) -> None:
        """Zero every counter in place (the server keeps its reference)."""
        self.received = self.rate_limited = 0
        self.peak_in_flight = self.in_flight  # requests still running count on
        for counter in (self.by_status, self.answered, self.faults):
            counter.clear()
        self.arrivals.clear()
        self.events.clear()

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able summary; counter keys are strings so it survives a JSON round trip."""
        return {
            "received": self.received,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "answered": dict(self.answered),
            "faults": dict(self.faults),
            "rate_limited": self.rate_limited,
        }


# -- judging: pure functions of the request ------------------------------------------------


YES_NO_STYLES = ("{w}", " {w}", "{w}.", "Answer: {w}", "{w}, it does.")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _units(*parts: Any) -> list[float]:
    """Four uniform numbers in [0, 1) drawn from a sha256 of ``parts``."""
    digest = hashlib.sha256(canonical(parts).encode()).digest()
    return [(int.from_bytes(digest[i : i + 8], "big") >> 11) / 2**53 for i in range(0, 32, 8)]


YES_NO = re.compile(r"\byes\s*(?:or|/)\s*no\b", re.IGNORECASE)


def asks_yes_no(text: str) -> bool:
    """Whether the prompt's closing lines ask for a yes/no answer (a rubric question)."""
    return bool(YES_NO.search(text[-400:]))


def _yes_no(token: str) -> str:
    """Rating 2 -> "Yes", 1 -> "No", keeping the token's surrounding whitespace."""
    core = token.strip()
    if core in ("1", "2"):
        return token.replace(core, "Yes" if core == "2" else "No")
    return token


def rating_scale(text: str) -> int:
    """The top of the rating scale the prompt asks for (the last "1-N" in it), default 5."""
    tops = [int(m) for m in SCALE.findall(text) if 2 <= int(m) <= 100]
    return tops[-1] if tops else 5


def true_score(messages: list[dict[str, Any]], top: int, seed: int) -> float:
    """The hidden score of a prompt, uniform over [1, top)."""
    return 1 + _units(seed, "item", canonical(messages))[0] * (top - 1)


def _token(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def first_token_probs(t: float, top: int, invalid: bool) -> list[tuple[str, float]]:
    """The first-token distribution: ratings centred on ``t`` plus tokenizer variants.

    Bare ratings never get all the mass (a spaced " 4", a newline, "The", "Score" take
    some, and some stays unlisted), as with real models.
    """
    weights = [math.exp(-((r - t) ** 2) / (2 * LOGPROB_WIDTH**2)) for r in range(1, top + 1)]
    total = sum(weights)
    probs = [(str(r), 0.88 * w / total) for r, w in enumerate(weights, 1)]
    probs += [(f" {r}", 0.06 * w / total) for r, w in enumerate(weights, 1)]
    probs += [("\n", 0.025), ("The", 0.015), ("Score", 0.01)]
    if invalid:  # the model starts a refusal instead
        probs = [("I", 0.9)] + [(tok, p * 0.09) for tok, p in probs]
    return sorted(probs, key=lambda tp: (-tp[1], tp[0]))


def _logprob_choice(
    t: float, top: int, invalid: bool, k: int, max_tokens: int | None
) -> tuple[str, dict[str, Any], bool]:
    probs = first_token_probs(t, top, invalid)
    # Greedy, as judges asking for logprobs sample once at temperature 0.
    best, p_best = probs[0]
    first = _token(best, math.log(p_best))
    first["top_logprobs"] = [_token(tok, math.log(p)) for tok, p in probs[:k]]
    tokens = [first]
    if invalid:
        for word in (" cannot", " rate", " this", " text", "."):
            tokens.append({**_token(word, -0.05), "top_logprobs": [_token(word, -0.05)][:k]})
    cut = max_tokens is not None and len(tokens) > max_tokens
    tokens = tokens[:max_tokens] if cut else tokens
    text = "".join(token["token"] for token in tokens)
    return text, {"content": tokens, "refusal": None}, cut


def judge(
    body: dict[str, Any], settings: SimSettings, repeat: int
) -> tuple[list[dict[str, Any]], int, int]:
    """The choices for a validated request, their completion tokens and how many refuse.

    Args:
        body: the parsed request.
        settings: the server settings (seed, invalid_answers, ignore_n).
        repeat: how often this exact body was answered before; mixed into the draws only
            in ``ignore_n`` mode, where a real server would sample anew on every call.
    """
    messages = body["messages"]
    prompt = "\n".join(message_text(m) for m in messages)
    yes_no = asks_yes_no(prompt)
    # A yes/no question is a two-point scale: 2 = "Yes", 1 = "No".
    top = 2 if yes_no else rating_scale(prompt)
    t = true_score(messages, top, settings.seed)
    draw_key = canonical({k: v for k, v in body.items() if k != "n"})
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    n = 1 if settings.ignore_n else body.get("n") or 1
    choices: list[dict[str, Any]] = []
    used = refusals = 0
    for i in range(n):
        u1, u2, u3, u4 = _units(settings.seed, draw_key, i, repeat if settings.ignore_n else 0)
        invalid = u3 < settings.invalid_answers
        refusals += invalid
        if body.get("logprobs"):
            k = body.get("top_logprobs") or 0
            text, logprobs, cut = _logprob_choice(t, top, invalid, k, max_tokens)
            if yes_no:
                for token in logprobs["content"][:1]:
                    token["token"] = _yes_no(token["token"])
                    for alternative in token["top_logprobs"]:
                        alternative["token"] = _yes_no(alternative["token"])
                text = "".join(token["token"] for token in logprobs["content"])
            used += len(logprobs["content"])
        else:
            noise = math.sqrt(-2 * math.log(1 - u1)) * math.cos(2 * math.pi * u2) * NOISE_SD
            rating = min(top, max(1, math.floor(t + noise + 0.5)))
            if yes_no:
                word = "Yes" if rating == 2 else "No"
                full = INVALID_ANSWER if invalid else YES_NO_STYLES[int(u4 * len(YES_NO_STYLES))]
                full = full.format(w=word)
            else:
                full = INVALID_ANSWER if invalid else STYLES[int(u4 * len(STYLES))]
                full = full.format(r=rating, top=top)
            text = full[: None if max_tokens is None else max_tokens * 4]
            cut, logprobs = len(text) < len(full), None
            used += max(1, math.ceil(len(text) / 4))
        choices.append(
            {
                "index": i,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": logprobs,
                "finish_reason": "length" if cut else "stop",
            }
        )
    return choices, used, refusals


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

    async def completions(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        digest = hashlib.sha256(raw).hexdigest()
        stats = self.stats
        stats.received += 1
        arrived = time.monotonic()
        stats.arrivals.append((arrived, digest))
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        try:
            response = await self._answer(request, raw, digest)
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

    async def _answer(self, request: web.Request, raw: bytes, digest: str) -> web.Response | None:
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
        problem = validate(body, s.context_window, s.content_filter_marker)
        if problem is not None:
            message, code = problem
            return error(400, message, "invalid_request_error", code)
        if s.max_n is not None and (body.get("n") or 1) > s.max_n:
            # The words llama.cpp's llama-server uses when n exceeds its slots.
            message = (f"Field 'n': Value must be between 1 <= value <= {s.max_n}, "
                       f"but got {body.get('n')} (sim)")
            return error(400, message, "invalid_request_error", None)
        prompt = prompt_tokens(body["messages"])

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
            return self._completion(body, model, digest, prompt, truncate=fault == "truncated")
        finally:
            self.granted -= 1

    def _completion(
        self, body: dict[str, Any], model: str, digest: str, prompt: int, truncate: bool
    ) -> web.Response:
        repeat = self.stats.answered[digest]
        choices, used, refusals = judge(body, self.settings, repeat)
        if refusals:
            self.stats.faults["invalid_answer"] += refusals
        answer = {
            "id": f"chatcmpl-sim-{hashlib.sha256(f'{digest}:{repeat}'.encode()).hexdigest()[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": FINGERPRINT,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": used,
                "total_tokens": prompt + used,
            },
        }
        text = json.dumps(answer)
        if truncate:
            text = text[: len(text) // 2]
        else:
            self.stats.answered[digest] += 1
        return web.Response(text=text, content_type="application/json")

    async def models(self, request: web.Request) -> web.Response:
        model = {"id": MODEL, "object": "model", "created": 0, "owned_by": "geval-async"}
        return web.json_response({"object": "list", "data": [model]})

    async def stats_view(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats.as_dict())

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
    judge = _Judge(settings, stats if stats is not None else SimStats())
    app = web.Application(middlewares=[_house_style], client_max_size=64 * 1024**2)
    app.add_routes(
        [
            web.post("/v1/chat/completions", judge.completions),
            web.post("/openai/deployments/{deployment}/chat/completions", judge.completions),
            web.get("/v1/models", judge.models),
            web.get("/sim/stats", judge.stats_view),
            web.post("/sim/settings", judge.update_settings),
            web.post("/sim/reset", judge.reset_stats),
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
