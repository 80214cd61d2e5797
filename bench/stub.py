"""An independent judge stub: a plain aiohttp.web app that answers every POST with one fixed body.

Not the project's simulated judge: nothing of ``geval_async`` is imported. It answers
``POST /v1/chat/completions`` at once with the same 10-choice body (about 2.4 kB), reads the
request body and nothing else. Options add what real servers do to the headers:

* ``--rpm R``: at most R/60 requests in any one second (a sliding window over the arrivals
  it admitted); the rest get 429 with ``retry-after-ms`` saying when one more would fit;
* ``--tpm T``: a bucket of T/60 tokens (one second's worth) refilling at T/60 a second, the
  way OpenAI describes its TPM limit; a request costs its prompt tokens (four characters a
  token, four more a message) plus ``max_tokens x n`` and is refused (not charged) when the
  bucket holds fewer; the body is parsed for this only;
* ``--work-us W``: spend W microseconds of CPU on every admitted request before answering
  (a busy loop), the way a real server spends CPU on each request before its model even
  starts; benchmark 2 uses it to show how the client's share of the machine decides the ratio;
* ``--headers full|remaining|none``: ``x-ratelimit-limit/remaining/reset-*`` (full),
  ``x-ratelimit-remaining-requests`` alone (remaining), or no rate headers (none, the default).

``GET /stats`` returns the counts, every 429's arrival time and the last admitted arrival,
``{"received", "by_status", "limited_at", "last_at"}`` (seconds since the first request), and
``timeline``, the run on the server's ``time.monotonic()`` as the simulated judge gives it:
``first_arrival``, ``last_admitted`` and ``last_answered`` (the last 200's answer made).

    python bench/stub.py [--port 0] [--rpm 600] [--tpm 150000] [--headers full] [--work-us 250]
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import time
from collections import Counter, deque

from aiohttp import web

_CHOICE = {
    "index": 0,
    "message": {"role": "assistant", "content": "4"},
    "logprobs": None,
    "finish_reason": "stop",
}
BODY = json.dumps(
    {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "stub-judge",
        "choices": [{**_CHOICE, "index": i, "message": {**_CHOICE["message"]}} for i in range(10)],
        "usage": {"prompt_tokens": 600, "completion_tokens": 10, "total_tokens": 610},
        "system_fingerprint": "fp_stub_0123456789abcdef" * 40,
    }
).encode()


def tokens_of(body: bytes) -> int:
    """What a request costs the tokens limit: its prompt plus ``max_tokens x n``."""
    request = json.loads(body)
    prompt = sum(math.ceil(len(m["content"]) / 4) + 4 for m in request["messages"])
    return prompt + request.get("max_tokens", 16) * request.get("n", 1)


class TokenBucket:
    """``per_minute`` tokens a minute, holding one second's worth, full at the start."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self.rate = self.depth = self.level = per_minute / 60.0
        self.checked = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.depth, self.level + (now - self.checked) * self.rate)
        self.checked = now

    def headers(self) -> dict[str, str]:
        until_full = (self.depth - self.level) / self.rate
        return {
            "x-ratelimit-limit-tokens": str(self.per_minute),
            "x-ratelimit-remaining-tokens": str(math.floor(self.level)),
            "x-ratelimit-reset-tokens": f"{math.ceil(until_full * 1000)}ms",
        }


def spend(microseconds: float) -> None:
    """Burn ``microseconds`` of this thread's CPU (a stand-in for a server's own work)."""
    until = time.thread_time() + microseconds / 1e6
    while time.thread_time() < until:
        pass


def make_app(
    rpm: int | None, headers: str, tpm: int | None = None, work_us: float = 0.0
) -> web.Application:
    counts: Counter[int] = Counter()
    admitted: deque[float] = deque()  # arrival times of the last second's admitted requests
    started: list[float] = []
    limited_at: list[float] = []
    last_at = [0.0]
    answered_at = [0.0]  # time.monotonic() of the last 200 made
    per_second = None if rpm is None else max(1, rpm // 60)
    tokens = None if tpm is None else TokenBucket(tpm)

    async def complete(request: web.Request) -> web.Response:
        body = await request.read()
        now = time.monotonic()
        if not started:
            started.append(now)
        extra: dict[str, str] = {}
        waits = []  # seconds until each limit that refuses this request would take it
        if per_second is not None:
            while admitted and admitted[0] <= now - 1.0:
                admitted.popleft()
            left = per_second - len(admitted)
            # As OpenAI: reset = until the window is empty again, retry-after = until one fits.
            reset = f"{max(1, int((admitted[-1] + 1.0 - now) * 1000)) if admitted else 0}ms"
            if headers == "full":
                extra = {
                    "x-ratelimit-limit-requests": str(rpm),
                    "x-ratelimit-remaining-requests": str(max(0, left - 1)),
                    "x-ratelimit-reset-requests": reset,
                }
            elif headers == "remaining":
                extra = {"x-ratelimit-remaining-requests": str(max(0, left - 1))}
            if left <= 0:
                waits.append(max(0.001, admitted[0] + 1.0 - now))
        elif headers == "remaining":
            extra = {"x-ratelimit-remaining-requests": "9999"}
        cost = 0
        if tokens is not None:
            cost = tokens_of(body)
            tokens.refill(now)
            if tokens.level < cost:
                waits.append((cost - tokens.level) / tokens.rate)
        if waits:  # refused: neither limit is charged
            if tokens is not None and headers == "full":
                extra |= tokens.headers()
            return _limited(counts, limited_at, now - started[0], max(waits), extra)
        if per_second is not None:
            admitted.append(now)
        if tokens is not None:
            tokens.level -= cost
            if headers == "full":
                extra |= tokens.headers()
        counts[200] += 1
        last_at[0] = now - started[0]
        if work_us:
            spend(work_us)
        answered_at[0] = time.monotonic()
        return web.Response(body=BODY, content_type="application/json", headers=extra)

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "received": sum(counts.values()),
                "by_status": {str(k): v for k, v in counts.items()},
                "limited_at": limited_at,
                "last_at": last_at[0],
                "timeline": {
                    "first_arrival": started[0] if started else None,
                    "last_admitted": started[0] + last_at[0] if started else None,
                    "last_answered": answered_at[0] or None,
                },
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_get("/stats", stats)
    return app


def _limited(
    counts: Counter[int], limited_at: list[float], at: float, wait: float, extra: dict[str, str]
) -> web.Response:
    counts[429] += 1
    limited_at.append(at)
    extra["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
    return web.Response(status=429, body=b'{"error": {}}', headers=extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rpm", type=int)
    parser.add_argument("--tpm", type=int)
    parser.add_argument("--work-us", type=float, default=0.0, help="CPU per request")
    parser.add_argument("--headers", choices=("full", "remaining", "none"), default="none")
    args = parser.parse_args()

    sock = socket.socket()
    sock.bind(("127.0.0.1", args.port))
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    web.run_app(
        make_app(args.rpm, args.headers, args.tpm, args.work_us),
        sock=sock,
        print=None,
        access_log=None,
    )


if __name__ == "__main__":
    main()
