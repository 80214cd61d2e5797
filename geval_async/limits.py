"""Client-side rate limits and the shared 429 cool-down.

Two leaky buckets (aiolimiter) hold the run under the configured requests per minute and tokens
per minute; a request costs one request and its estimated tokens (prompt estimate plus
``max_tokens x n``, the way providers count it). A cache hit never reaches this module.

A 429 pauses every worker, not just the one that got it: all of them wait on one shared
:class:`CoolDown` until the time the server asked for (``retry-after-ms``, ``retry-after`` or
``x-ratelimit-reset-*``). Without that, N workers would each discover the limit on their own and
hit the server again together (a thundering herd).

Limiters must be created inside the running event loop (aiolimiter binds to one loop).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping

from aiolimiter import AsyncLimiter

from .errors import ConfigError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float | None:
    """Seconds in an OpenAI reset header ("1s", "6m0s", "120ms", "1m30.5s"), or None."""
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text:
        return None
    return sum(float(amount) * _UNIT_SECONDS[unit] for amount, unit in parts)


def retry_after(headers: Mapping[str, str], kind: str | None = None) -> float | None:
    """Seconds the server asks us to wait after a 429, or None when it does not say.

    Reads, in order, ``retry-after-ms``, ``retry-after`` (seconds), then the
    ``x-ratelimit-reset-*`` header of the limit that was hit (``kind`` "requests"/"tokens").
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass  # an HTTP date: rare for APIs; fall through to the reset headers
    names = [f"x-ratelimit-reset-{kind}"] if kind in ("requests", "tokens") else []
    names += ["x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"]
    for name in names:
        if name in lowered:
            seconds = parse_duration(lowered[name])
            if seconds is not None:
                return seconds
    return None


class CoolDown:
    """A pause shared by every worker: nobody sends until the latest requested time."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._until = 0.0

    @property
    def remaining(self) -> float:
        """Seconds left in the current pause (0 when none)."""
        return max(0.0, self._until - self._loop.time())

    def pause(self, seconds: float) -> None:
        """Pause every worker for ``seconds`` from now (an earlier, longer pause stands)."""
        self._until = max(self._until, self._loop.time() + seconds)

    async def wait(self) -> None:
        """Return once no pause is in force."""
        # A plain sleep, not an Event: the deadline can move later while we sleep, and the
        # loop re-checks it on waking.
        while (left := self._until - self._loop.time()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(left)


class RateLimits:
    """The RPM and TPM buckets plus the cool-down; one per run, made inside the loop."""

    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self.rpm, self.tpm = rpm, tpm
        self._requests = AsyncLimiter(rpm, 60.0) if rpm else None
        self._tokens = AsyncLimiter(tpm, 60.0) if tpm else None
        self.cooldown = CoolDown()

    def check_request(self, tokens: int) -> None:
        """Raise ConfigError for a request that the TPM limit can never let through."""
        if self.tpm and tokens > self.tpm:
            raise ConfigError(
                f"one request is estimated at {tokens} tokens, more than the tpm limit "
                f"({self.tpm:g}): raise --tpm or lower max_tokens / n"
            )

    async def acquire(self, tokens: int) -> None:
        """Wait for the cool-down, then for room in both buckets."""
        await self.cooldown.wait()
        if self._requests is not None:
            await self._requests.acquire()
        if self._tokens is not None:
            await self._tokens.acquire(min(tokens, self._tokens.max_rate))
        # A 429 may have arrived while this worker waited for the buckets.
        await self.cooldown.wait()
