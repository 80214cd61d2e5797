"""The client's rate limits and the 429 cool-down, on a fake clock: no test here sleeps.

Each test runs in an event loop whose time is virtual (``loop.time`` patched, as aiolimiter's
own tests do with ``MockLoopTime``): when every task waits for a timer, the clock jumps to the
next timer instead of the loop sleeping. So the times recorded below are exact and the same
on every machine, and a test of a minute of pacing takes milliseconds.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from geval_async.errors import ConfigError
from geval_async.judging.limits import (
    BURST_SECONDS,
    LEARNED_SHARE,
    CoolDown,
    PacedBucket,
    RateLimits,
)

T = TypeVar("T")


class _VirtualSelector(selectors.DefaultSelector):
    """A selector that never blocks: it moves the clock to the next timer instead."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        if not ready:
            if timeout is None:
                raise RuntimeError("every task waits and no timer is set: a deadlock")
            # At least a microsecond a turn of the loop, as on a real clock: aiolimiter polls
            # again at once when a rounding error leaves it short of capacity, and would
            # poll forever on a clock that does not move.
            self.now += max(timeout, 1e-6)
        return ready


def run_virtual(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``main()`` in a fresh event loop on virtual time that starts at 0."""
    selector = _VirtualSelector()
    loop = asyncio.SelectorEventLoop(selector)
    loop.time = lambda: selector.now  # type: ignore[method-assign]
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def now() -> float:
    return asyncio.get_running_loop().time()


def _most_in_any_second(times: list[float]) -> int:
    return max(sum(1 for t in times if start <= t < start + 1.0) for start in times)


def test_a_bucket_paces_requests_at_its_rate() -> None:
    async def main() -> list[float]:
        bucket = PacedBucket(per_minute=600)  # 10 a second
        times = []
        for _ in range(50):
            await bucket.acquire(1)
            times.append(now())
        return times

    times = run_virtual(main)
    credit = 10 * BURST_SECONDS
    # Never more than the rate plus the small burst credit in any second...
    assert _most_in_any_second(times) <= 10 + credit
    # ... and no slower than the rate: a bucket starts without credit (a burst at the start
    # is what a server counting over one second refuses), so 50 requests need 50 / 10 s.
    assert times[-1] == pytest.approx(50 / 10, abs=0.11)


def test_a_cost_larger_than_the_credit_waits_as_long_as_its_size() -> None:
    async def main() -> list[float]:
        tokens = PacedBucket(per_minute=6_000)  # 100 tokens a second, 25 of credit
        times = []
        for _ in range(4):
            await tokens.acquire(250)  # ten times the credit: one long prompt
            times.append(now())
        return times

    times = run_virtual(main)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps == pytest.approx([2.5, 2.5, 2.5], abs=0.05)


def test_a_cool_down_is_shared_and_a_longer_pause_stands() -> None:
    async def main() -> list[float]:
        cooldown = CoolDown()
        cooldown.pause(5.0)
        cooldown.pause(2.0)  # a shorter pause asked later does not cut the first one short
        seen = [cooldown.remaining]
        await asyncio.sleep(4.0)
        seen.append(cooldown.remaining)
        await asyncio.sleep(2.0)
        seen.append(cooldown.remaining)
        return seen

    assert run_virtual(main) == pytest.approx([5.0, 1.0, 0.0], abs=1e-3)


def test_every_worker_waits_out_a_429_then_leaves_at_the_paced_rate() -> None:
    async def main() -> tuple[list[float], float]:
        limits = RateLimits(rpm=600, tpm=None)  # 10 a second
        limits.replied()  # the first reply is in: the run has opened up (it begins small)
        sent: list[float] = []

        async def worker() -> None:
            for _ in range(4):
                await limits.acquire(100)
                sent.append(now())

        async def server_says_429() -> float:
            await asyncio.sleep(1.0)
            limits.cooldown.pause(3.0)
            return now()

        async with asyncio.TaskGroup() as group:
            for _ in range(16):
                group.create_task(worker())
            paused = group.create_task(server_says_429())
        return sent, paused.result()

    sent, paused_at = run_virtual(main)
    assert len(sent) == 64
    # Nothing went out during the pause ...
    assert not [t for t in sent if paused_at < t < paused_at + 3.0]
    # ... and after it the workers left paced, not as a herd of 16.
    after = [t for t in sent if t >= paused_at + 3.0]
    assert len(after) > 16
    assert _most_in_any_second(after) <= 10 + 10 * BURST_SECONDS


def test_limits_learned_from_headers_pace_what_follows() -> None:
    async def main() -> list[float]:
        limits = RateLimits(rpm=None, tpm=None)
        limits.observe({"x-ratelimit-limit-requests": "120", "x-ratelimit-limit-tokens": "1e9"})
        start = now()
        for _ in range(21):
            await limits.acquire(10)
        return [now() - start, limits.learned["requests"]]

    virtual_seconds, learned = run_virtual(main)  # the fake clock's seconds, not a timing
    assert learned == 120 * LEARNED_SHARE
    # 120 a minute, paced a little below (LEARNED_SHARE), is about 2 a second: 21 requests,
    # the bucket starting without credit, take ~10.8 s.
    assert virtual_seconds == pytest.approx(21 / (2 * LEARNED_SHARE), abs=0.3)


def test_a_configured_limit_below_the_servers_holds() -> None:
    async def main() -> float:
        limits = RateLimits(rpm=60, tpm=None)
        limits.observe({"x-ratelimit-limit-requests": "6000"})
        start = now()
        for _ in range(6):
            await limits.acquire(10)
        return now() - start

    # One a second, not 100: six requests take six seconds (the bucket starts without credit).
    assert run_virtual(main) == pytest.approx(6, abs=0.05)


def test_a_shallow_server_bucket_shrinks_the_burst() -> None:
    async def main() -> list[float]:
        limits = RateLimits(rpm=None, tpm=None)
        # 600 a minute, but the server's bucket holds one request and refills in 100 ms:
        # sending in bursts would meet 429s, so requests go one at a time.
        limits.observe(
            {
                "x-ratelimit-limit-requests": "600",
                "x-ratelimit-remaining-requests": "1",
                "x-ratelimit-reset-requests": "100ms",
            }
        )
        times = []
        for _ in range(6):
            await limits.acquire(1)
            times.append(now())
        return times

    times = run_virtual(main)
    assert len(set(times)) == len(times), "no two requests leave at the same instant"


def test_a_request_the_tpm_limit_can_never_pass_is_a_config_error() -> None:
    async def main() -> None:
        RateLimits(rpm=None, tpm=1000).check_request(1001)

    with pytest.raises(ConfigError, match="more than the tpm limit"):
        run_virtual(main)
