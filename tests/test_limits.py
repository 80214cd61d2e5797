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
from multidict import CIMultiDict, CIMultiDictProxy

from geval_async.errors import ConfigError
from geval_async.judging.wire.limits import (
    CATCH_UP_SECONDS,
    CONFIGURED_SHARE,
    LEARNED_SHARE,
    START_IN_FLIGHT,
    CoolDown,
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
            # At least a microsecond a turn of the loop, as on a real clock: a wait that a
            # rounding error leaves a hair short polls again at once, and would poll forever
            # on a clock that does not move.
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


def stall(seconds: float) -> None:
    """Hold the event loop for ``seconds`` of the fake clock: a loaded machine's hiccup.

    Every timer due meanwhile fires late, as when the process did not get a core.
    """
    asyncio.get_running_loop()._selector.now += seconds  # type: ignore[attr-defined]


def _most_in_any_second(times: list[float]) -> int:
    return max(sum(1 for t in times if start <= t < start + 1.0) for start in times)


def _send_times(
    limits: RateLimits, workers: int, sends: int, tokens: Callable[[int], int] = lambda i: 10
) -> Coroutine[Any, Any, list[float]]:
    """``workers`` workers taking ``sends`` requests through ``limits``; when each left."""

    async def main() -> list[float]:
        sent: list[float] = []
        queue = iter(range(sends))

        async def worker() -> None:
            for i in queue:
                await limits.acquire(tokens(i))
                sent.append(now())

        async with asyncio.TaskGroup() as group:
            for _ in range(workers):
                group.create_task(worker())
        return sent

    return main()


def test_a_configured_limit_is_a_steady_rate_never_more_in_any_second() -> None:
    async def main() -> list[float]:
        limits = RateLimits(rpm=600, tpm=None)  # 10 a second, as the stub enforces it
        limits.replied()  # the first reply is in: the run has opened up (it begins small)
        return await _send_times(limits, workers=64, sends=300)

    times = run_virtual(main)
    # 64 workers asking at once, from the first instant: never an 11th send in a second ...
    assert _most_in_any_second(times) == 10
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 0.1 / CONFIGURED_SHARE - CATCH_UP_SECONDS
    # ... and the whole run within 2 % of what the limit allows (300 at 10 a second: 30 s).
    assert times[-1] - times[0] <= 1.02 * 30


def test_no_burst_after_a_stall_and_a_late_send_is_not_caught_up_on_the_next() -> None:
    async def main() -> list[float]:
        limits = RateLimits(rpm=600, tpm=None)
        limits.replied()

        async def hiccups() -> None:
            # The process loses the core now and then, for 3 to 250 ms.
            for pause in (0.003, 0.02, 0.25, 0.004, 0.06, 0.011) * 5:
                await asyncio.sleep(0.37)
                stall(pause)

        async with asyncio.TaskGroup() as group:
            group.create_task(hiccups())
            sent = group.create_task(_send_times(limits, workers=16, sends=200))
        return sent.result()

    times = run_virtual(main)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    # A send that left late pushes the next one back: sends never bunch to make up for it ...
    assert min(gaps) >= 0.1 / CONFIGURED_SHARE - CATCH_UP_SECONDS
    assert _most_in_any_second(times) == 10
    # ... (and the hiccups were felt: some sends did leave late).
    assert max(gaps) > 0.2


def test_a_long_idle_stretch_saves_no_credit_for_a_burst() -> None:
    async def main() -> list[float]:
        limits = RateLimits(rpm=600, tpm=None)
        limits.replied()
        first = await _send_times(limits, workers=4, sends=20)
        await asyncio.sleep(30.0)  # nothing to send for half a minute (a slow plan stage)
        return first + await _send_times(limits, workers=64, sends=30)

    times = run_virtual(main)
    after = times[20:]
    assert _most_in_any_second(after) == 10
    assert after[1] - after[0] >= 0.1 / CONFIGURED_SHARE - CATCH_UP_SECONDS


def test_tokens_bind_with_mixed_prompt_sizes_uses_the_whole_tpm() -> None:
    # 120 tokens and 3 requests a second; the criteria alternate a short prompt (30 tokens)
    # with a long one (90): 60 tokens a request on average, so tokens bind (2 a second). A
    # short prompt's tokens would let the next request go after 0.25 s, the requests limit
    # holds it to 0.33 s: the tokens it leaves go to the long prompt after it.
    sizes = (30, 90)

    async def main() -> list[float]:
        limits = RateLimits(rpm=180, tpm=7_200)
        return await _send_times(limits, 32, 200, tokens=lambda i: sizes[i % 2])

    times = run_virtual(main)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 1 / (3 * CONFIGURED_SHARE) - CATCH_UP_SECONDS
    # The tokens spent in any second: the rate, plus the largest request and the catch-up (the
    # carry is room for the long prompt after a short one, never a burst beyond that).
    spent = sorted(zip(times, (sizes[i % 2] for i in range(200)), strict=True))
    most = max(sum(c for t, c in spent if start <= t < start + 1.0) for start, _ in spent)
    assert most <= 120 * (1 + CATCH_UP_SECONDS) + max(sizes)
    # Done within 2 % of the tokens' bound: 200 x 60 tokens at 120 a second, 100 s. (Paced
    # request by request, the larger of the two limits' gaps each time, it would take 109 s.)
    assert times[-1] - times[0] <= 1.02 * 100


def test_a_cost_larger_than_a_seconds_worth_waits_as_long_as_its_size() -> None:
    async def main() -> list[float]:
        limits = RateLimits(rpm=None, tpm=6_000)  # 100 tokens a second
        limits.replied()
        return await _send_times(limits, workers=4, sends=4, tokens=lambda i: 250)

    times = run_virtual(main)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps == pytest.approx([2.5 / CONFIGURED_SHARE] * 3, abs=CATCH_UP_SECONDS + 1e-4)


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
    assert _most_in_any_second(after) <= 10


def test_after_a_refused_request_the_retry_waits_for_the_pause_and_what_follows_is_paced() -> None:
    async def main() -> list[float]:
        limits = RateLimits(rpm=600, tpm=None)
        limits.replied()
        await limits.acquire(10)  # sent at 0 ...
        limits.refused(10, 0.5)  # ... and refused: retry in half a second
        sent = []
        for _ in range(4):
            await limits.acquire(10)
            sent.append(now())
        return sent

    sent = run_virtual(main)
    gaps = [b - a for a, b in zip(sent, sent[1:], strict=False)]
    # The retry goes when the server asked, not before, and the sends after it are paced
    # from there: the pause saved no credit for a burst.
    assert sent[0] == pytest.approx(0.5, abs=1e-3)
    assert min(gaps) >= 0.1 / CONFIGURED_SHARE - CATCH_UP_SECONDS - 1e-9
    assert sent[-1] - sent[0] == pytest.approx(3 * 0.1 / CONFIGURED_SHARE, abs=CATCH_UP_SECONDS)


def test_limits_learned_from_headers_pace_what_follows() -> None:
    async def main() -> list[float]:
        limits = RateLimits(rpm=None, tpm=None)
        limits.observe({"x-ratelimit-limit-requests": "120", "x-ratelimit-limit-tokens": "1e9"})
        start = now()
        for _ in range(21):
            await limits.acquire(10)
        return [now() - start, limits.learned["requests"]]

    virtual_seconds, learned = run_virtual(main)  # the fake clock's seconds, not a timing
    assert learned == 120
    # 120 a minute, paced a little below (LEARNED_SHARE), is about 2 a second: 21 requests,
    # the first at once, take ~10.3 s.
    assert virtual_seconds == pytest.approx(20 / (2 * LEARNED_SHARE), abs=CATCH_UP_SECONDS * 20)


@pytest.mark.parametrize(
    "headers",
    [
        # As aiohttp hands them over: looked up without regard to case, the last one counts.
        CIMultiDictProxy(
            CIMultiDict(
                [
                    ("Content-Type", "application/json"),
                    ("X-RateLimit-Limit-Requests", "6000"),
                    ("X-RateLimit-Limit-Requests", "120"),
                    ("x-ratelimit-limit-TOKENS", "1e9"),
                ]
            )
        ),
        {"Content-Type": "application/json", "X-RateLimit-Limit-Requests": "120"},
    ],
    ids=["aiohttp", "dict"],
)
def test_limits_are_learned_from_headers_spelt_in_any_case(headers: Any) -> None:
    async def main() -> tuple[float, dict[str, float]]:
        limits = RateLimits(rpm=None, tpm=None)
        limits.observe(headers)
        start = now()
        for _ in range(11):
            await limits.acquire(10)
        return now() - start, limits.learned

    virtual_seconds, learned = run_virtual(main)
    assert learned["requests"] == 120
    assert virtual_seconds == pytest.approx(10 / (2 * LEARNED_SHARE), abs=CATCH_UP_SECONDS * 10)


def test_a_configured_limit_below_the_servers_holds() -> None:
    async def main() -> float:
        limits = RateLimits(rpm=60, tpm=None)
        limits.observe({"x-ratelimit-limit-requests": "6000"})
        start = now()
        for _ in range(6):
            await limits.acquire(10)
        return now() - start

    # One a second (a little below), not 100: six requests take five seconds and a little.
    assert run_virtual(main) == pytest.approx(5 / CONFIGURED_SHARE, abs=CATCH_UP_SECONDS * 5)


def test_a_server_that_says_its_limit_is_lower_than_configured_wins() -> None:
    async def main() -> list[float]:
        limits = RateLimits(rpm=1_200, tpm=None)  # the config says 20 a second ...
        limits.replied()
        limits.observe({"x-ratelimit-limit-requests": "600"})  # ... the server enforces 10
        return await _send_times(limits, workers=16, sends=100)

    times = run_virtual(main)
    assert _most_in_any_second(times) == 10
    assert times[-1] - times[0] == pytest.approx(99 / (10 * CONFIGURED_SHARE), abs=0.01)


def _sim_headers(remaining: int) -> dict[str, str]:
    return {
        "x-ratelimit-limit-requests": "600",
        "x-ratelimit-remaining-requests": str(remaining),
        "x-ratelimit-reset-requests": "100ms",
    }


def test_the_margin_goes_while_the_server_has_room_and_comes_back_at_a_429() -> None:
    async def main() -> tuple[list[float], list[float], list[float]]:
        limits = RateLimits(rpm=600, tpm=None)
        limits.replied()
        # A stub-like server at its limit: nothing to spare, the margin holds.
        limits.observe(_sim_headers(remaining=0))
        tight = await _send_times(limits, workers=8, sends=21)
        # A token bucket with 2 s of room (the simulated judge's): the full limit.
        limits.observe(_sim_headers(remaining=20))
        roomy = await _send_times(limits, workers=8, sends=21)
        limits.cooldown.pause(0.5)  # a 429: the margin is back for good, room or not
        limits.observe(_sim_headers(remaining=20))
        refused = await _send_times(limits, workers=8, sends=21)
        return tight, roomy, refused

    tight, roomy, refused = run_virtual(main)
    # 19 gaps of a tenth of a second (the first send of each stretch may catch up 2 ms) ...
    assert roomy[-1] - roomy[1] == pytest.approx(1.9, abs=1e-4)
    # ... each a little wider with the margin.
    assert tight[-1] - tight[1] == pytest.approx(1.9 / CONFIGURED_SHARE, abs=1e-4)
    assert refused[-1] - refused[1] == pytest.approx(1.9 / CONFIGURED_SHARE, abs=1e-4)


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


def test_the_requests_sent_before_a_learned_limit_are_paid_for_first() -> None:
    async def main() -> float:
        limits = RateLimits(rpm=None, tpm=None)
        for _ in range(4):  # the probes: out before any reply, unpaced
            await limits.acquire(10)
        start = now()
        limits.observe({"x-ratelimit-limit-requests": "120"})  # 2 a second
        await limits.acquire(10)
        return now() - start

    # The fifth request goes after the four probes' share of the rate, not at once.
    assert run_virtual(main) == pytest.approx(4 / (2 * LEARNED_SHARE), abs=CATCH_UP_SECONDS)


def test_the_run_begins_small_until_the_first_reply_then_paces_by_its_headers() -> None:
    """32 workers, no limits configured: before the first reply only a few requests go out (a
    full pool would meet a one-second window's 429s at once); after it, the learned limit paces
    the rest, the early ones paid for first."""

    async def main() -> tuple[int, list[float]]:
        limits = RateLimits(rpm=None, tpm=None)
        sent: list[float] = []

        async def worker() -> None:
            await limits.acquire(10)
            sent.append(now())

        async with asyncio.TaskGroup() as group:
            for _ in range(32):
                group.create_task(worker())
            await asyncio.sleep(1.0)  # the first answer takes a second
            before = len(sent)
            limits.observe({"x-ratelimit-limit-requests": "600"})
        return before, sent

    before, sent = run_virtual(main)
    assert before == START_IN_FLIGHT
    assert len(sent) == 32
    assert _most_in_any_second(sent) <= 10  # the probes count against the learned limit
    assert sent[START_IN_FLIGHT] >= 1.0 + START_IN_FLIGHT / (10 * LEARNED_SHARE) - CATCH_UP_SECONDS


def test_a_learned_limit_that_changes_mid_run_paces_from_the_last_send_at_the_new_rate() -> None:
    """A server that lowers its limit, then raises it: the next send is spaced from the last
    one at the new rate (no burst at the change, and no wait at the old rate either)."""

    async def main() -> list[list[float]]:
        limits = RateLimits(rpm=None, tpm=None)
        stretches = []
        for advertised in ("600", "300", "1200"):
            limits.observe({"x-ratelimit-limit-requests": advertised})
            stretches.append(await _send_times(limits, workers=8, sends=10))
        return stretches

    ten, five, twenty = run_virtual(main)
    for before, after, per_second in ((ten, five, 5), (five, twenty, 20)):
        gap = 1 / (per_second * LEARNED_SHARE)
        spaced = [b - a for a, b in zip([before[-1], *after], after, strict=False)]
        assert spaced == pytest.approx([gap] * len(after), abs=CATCH_UP_SECONDS)


def test_a_request_the_tpm_limit_can_never_pass_is_a_config_error() -> None:
    async def main() -> None:
        RateLimits(rpm=None, tpm=1000).check_request(1001)

    with pytest.raises(ConfigError, match="more than the tpm limit"):
        run_virtual(main)


# --- a stop ends every wait; a limit no account has is ignored -------------------------------


@pytest.mark.parametrize("wait", ["cool-down", "bucket", "cool-down, no bucket", "first reply"])
def test_a_stop_ends_each_limiter_wait_at_the_moment_it_is_set(wait: str) -> None:
    """On the fake clock: whatever the wait (a 429's day-long pause, a 1-a-minute pace, the
    wait for the first reply), the stop set at t = 5 ends it at t = 5 and charges nothing."""

    async def main() -> tuple[float, float]:
        stop = asyncio.Event()
        unpaced = "no bucket" in wait or wait == "first reply"
        limits = RateLimits(rpm=None if unpaced else 1, tpm=None, stop=stop)
        if wait == "first reply":
            for _ in range(4):  # the start's probes: the fifth waits for a reply
                await limits.acquire(10)
        else:
            limits.replied()
            await limits.acquire(10)  # the one send of the minute
        if wait.startswith("cool-down"):
            limits.refused(10, 999999.0)
        asyncio.get_running_loop().call_later(5.0, stop.set)
        await limits.acquire(10)
        ended = now()
        if wait == "bucket":
            stop.clear()  # the same limits asked again: the stopped request took no slot
            await limits.acquire(10)
        return ended, now()

    ended, next_send = run_virtual(main)
    assert ended == pytest.approx(5.0, abs=1e-3)
    if wait == "bucket":
        # The minute's next slot, after the one send (not a slot further on).
        assert next_send == pytest.approx(60 / CONFIGURED_SHARE, abs=CATCH_UP_SECONDS)


@pytest.mark.parametrize(
    "headers, ignored",
    [
        ({"x-ratelimit-limit-requests": "1e-9"}, True),
        ({"x-ratelimit-limit-requests": "0.5"}, True),
        ({"x-ratelimit-limit-requests": "1"}, False),
        ({"x-ratelimit-limit-tokens": "50"}, True),  # below one 100-token request
        ({"x-ratelimit-limit-tokens": "100"}, False),
    ],
)
def test_a_learned_limit_no_account_has_is_ignored_with_one_warning(
    headers: dict[str, str], ignored: bool
) -> None:
    async def main() -> tuple[dict[str, float], list[str]]:
        said: list[str] = []
        limits = RateLimits(rpm=None, tpm=None, warn=said.append, max_wait=1e9)
        await limits.acquire(100)
        for _ in range(3):  # every answer carries the header: still one line
            limits.observe(headers)
        return limits.learned, said

    learned, said = run_virtual(main)
    assert (learned == {}) is ignored
    assert len(said) == (1 if ignored else 0), said
    if ignored:
        assert said[0].startswith("ignored x-ratelimit-limit-") and "no account has" in said[0]
