"""Claims on requests in flight, on a fake clock: who may send a request, and for how long.

Two ``Claims`` on one cache folder stand for two runs (each claim names its run); a third
one plays the process that comes along later. Time moves by setting the clock, never by
sleeping. A real subprocess plays a run that was killed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT

from geval_async.judging.store.claims import Claims

TTL = 10.0
KEY = "g1-request"


class Clock:
    """Seconds since the epoch, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _runs(folder: Path, clock: Clock, count: int) -> list[Claims]:
    return [Claims(folder, TTL, clock=clock) for _ in range(count)]


def test_a_live_claim_holds_until_its_time_to_live_lapses(tmp_path: Path) -> None:
    clock = Clock()
    first, second = _runs(tmp_path, clock, 2)
    assert first.claim(KEY)
    assert not first.claim(KEY), "an identical request of the same run waits for the first"
    clock.now += TTL - 1
    assert not second.claim(KEY)
    clock.now += 2  # the first run stalled past its time-to-live
    assert second.claim(KEY)
    first.close()
    second.close()


def test_renewing_extends_the_claim_and_releasing_frees_it(tmp_path: Path) -> None:
    clock = Clock()
    first, second = _runs(tmp_path, clock, 2)
    assert first.claim(KEY)
    clock.now += TTL - 2
    assert first.renew(KEY)  # another attempt: the claim now lasts until TTL - 2 + TTL
    clock.now += 4
    assert not second.claim(KEY)
    first.release(KEY)
    assert second.claim(KEY)
    first.close()
    second.close()


def test_an_old_holder_cannot_release_or_renew_a_claim_taken_over(tmp_path: Path) -> None:
    clock = Clock()
    stalled, taker, latecomer = _runs(tmp_path, clock, 3)
    assert stalled.claim(KEY)
    clock.now += TTL + 1
    assert taker.claim(KEY)  # the stalled run's claim lapsed: the taker sends the request
    # The stalled run wakes up. Its renew and release must leave the taker's claim alone:
    assert not stalled.renew(KEY)
    stalled.release(KEY)
    # ... so a third run still waits for the taker instead of sending the request again,
    assert not latecomer.claim(KEY)
    # ... and the stalled run's renew did not extend the taker's claim either.
    clock.now += TTL - 0.5
    assert not latecomer.claim(KEY)
    clock.now += 1
    assert latecomer.claim(KEY)
    for claims in (stalled, taker, latecomer):
        claims.close()


def test_closing_releases_only_what_is_still_held(tmp_path: Path) -> None:
    clock = Clock()
    first, second = _runs(tmp_path, clock, 2)
    assert first.claim(KEY) and first.claim("g1-other")
    clock.now += TTL + 1
    assert second.claim(KEY)
    first.close()  # releases g1-other, leaves KEY to its new holder
    third = Claims(tmp_path, TTL, clock=clock)
    assert third.claim("g1-other")
    assert not third.claim(KEY)
    second.close()
    third.close()


def test_the_claim_of_a_killed_run_is_taken_over_at_once(tmp_path: Path) -> None:
    # A real process claims and dies without releasing (as kill -9 would leave it).
    code = (
        "import os, sys\n"
        "from geval_async.judging.store.claims import Claims\n"
        f"claims = Claims(sys.argv[1], 3600.0)\n"
        f"assert claims.claim({KEY!r})\n"
        "os._exit(0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    with Claims(tmp_path, TTL) as claims:
        assert claims.claim(KEY), "a dead process on this host holds nothing"


async def test_a_claim_taken_for_a_waiter_cancelled_meanwhile_is_let_go(tmp_path: Path) -> None:
    """A worker (or the producer) cancelled while its claims were being taken (Ctrl-C, the
    task group failing) must not keep them: another run would wait on them until they lapse."""
    import asyncio
    import contextlib

    from geval_async.judging.run.writer import Writer
    from geval_async.judging.store.cache import JudgeCache

    clock = Clock()
    with JudgeCache(tmp_path / "cache") as cache:
        first, second = _runs(cache.directory, clock, 2)
        writer = Writer(cache, first)
        waiter = asyncio.ensure_future(writer.claim_many([KEY]))
        await asyncio.sleep(0)  # handed over: the claim is taken in the thread's next turn
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
        # The claim, taken for nobody, is let go when its turn is settled (here at the latest).
        writer.close()
        assert waiter.cancelled()
        assert second.claim(KEY), "the cancelled waiter's claim is let go"
        first.close()
        second.close()
