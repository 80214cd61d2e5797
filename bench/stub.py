"""An independent judge stub: a plain aiohttp.web app that answers every POST with one fixed body.

Not the project's simulated judge: nothing of ``geval_async`` is imported. It answers
``POST /v1/chat/completions`` at once with the same 10-choice body (about 2.4 kB), reads the
request body and nothing else. Options add what real servers do to the headers:

* ``--rpm R``: at most R/60 requests in any one second (a sliding window over the arrivals
  it admitted); the rest get 429 with ``retry-after-ms`` saying when one more would fit;
* ``--headers full|remaining|none``: ``x-ratelimit-limit/remaining/reset-requests`` (full),
  ``x-ratelimit-remaining-requests`` alone (remaining), or no rate headers (none, the default).

``GET /stats`` returns the counts and every 429's arrival time, ``{"received", "by_status",
"limited_at"}`` (seconds since the first request).

    python bench/stub.py [--port 0] [--rpm 600] [--headers full]
"""

from __future__ import annotations

import argparse
import json
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


def make_app(rpm: int | None, headers: str) -> web.Application:
    counts: Counter[int] = Counter()
    admitted: deque[float] = deque()  # arrival times of the last second's admitted requests
    started: list[float] = []
    limited_at: list[float] = []
    per_second = None if rpm is None else max(1, rpm // 60)

    async def complete(request: web.Request) -> web.Response:
        await request.read()
        now = time.monotonic()
        if not started:
            started.append(now)
        extra: dict[str, str] = {}
        if per_second is not None:
            while admitted and admitted[0] <= now - 1.0:
                admitted.popleft()
            left = per_second - len(admitted)
            # As OpenAI: reset = until the window is empty again, retry-after = until one fits.
            reset = f"{max(1, int((admitted[-1] + 1.0 - now) * 1000)) if admitted else 0}ms"
            retry = max(1, int((admitted[0] + 1.0 - now) * 1000)) if admitted else 1
            if headers == "full":
                extra = {
                    "x-ratelimit-limit-requests": str(rpm),
                    "x-ratelimit-remaining-requests": str(max(0, left - 1)),
                    "x-ratelimit-reset-requests": reset,
                }
            elif headers == "remaining":
                extra = {"x-ratelimit-remaining-requests": str(max(0, left - 1))}
            if left <= 0:
                counts[429] += 1
                limited_at.append(now - started[0])
                extra["retry-after-ms"] = str(retry)
                return web.Response(status=429, body=b'{"error": {}}', headers=extra)
            admitted.append(now)
        elif headers == "remaining":
            extra = {"x-ratelimit-remaining-requests": "9999"}
        counts[200] += 1
        return web.Response(body=BODY, content_type="application/json", headers=extra)

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "received": sum(counts.values()),
                "by_status": {str(k): v for k, v in counts.items()},
                "limited_at": limited_at,
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_get("/stats", stats)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rpm", type=int)
    parser.add_argument("--headers", choices=("full", "remaining", "none"), default="none")
    args = parser.parse_args()

    sock = socket.socket()
    sock.bind(("127.0.0.1", args.port))
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    web.run_app(make_app(args.rpm, args.headers), sock=sock, print=None, access_log=None)


if __name__ == "__main__":
    main()
