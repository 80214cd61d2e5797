"""Claims on requests in flight, on a fake clock: who may send a request, and for how long.

Two ``Claims`` on one cache folder stand for two runs (each claim names its run); a third
one plays the process that comes along later. Time moves by setting the clock, never by
sleeping. A real subprocess plays a run that was killed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson
from aiohttp import web
from conftest import ROOT, PlainJudge, StudyFiles, cached_answer, run_cli

from geval_async.judging.store.cache import JudgeCache
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


class _TakenOverJudge(PlainJudge):
    """A judge that, while its first request is in flight, plays a second process: it stores
    that request's answer in the cache and takes its claim over, then answers 500, so the run
    that sent it retries a request another process has answered meanwhile."""

    def __init__(self, cache: Path, keys: dict[str, str]) -> None:
        super().__init__()
        self.cache, self.keys = cache, keys  # the messages of a request (JSON) -> its key
        self.by_key: dict[str, int] = {}

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        key = self.keys[orjson.dumps(body["messages"]).decode()]
        self.by_key[key] = self.by_key.get(key, 0) + 1
        if len(self.by_key) > 1 or self.by_key[key] > 1:
            return await super()._complete(request)
        choices = [{"index": i, "message": {"role": "assistant", "content": "3"}} for i in range(3)]
        answer = cached_answer(
            key, orjson.dumps({"choices": choices}).decode(), n=3, received=3, simulated=False
        )
        far = time.time() + 10**6  # the stalled run's claim has lapsed, for the second process
        with JudgeCache(self.cache) as cache, Claims(self.cache, TTL, clock=lambda: far) as other:
            assert other.claim(key), "the second process takes the claim over"
            cache.put(answer)
        return web.json_response({"error": {"message": "busy"}}, status=500)


def test_a_retry_looks_in_the_cache_and_at_its_claim_before_sending_again(
    study: StudyFiles,
) -> None:
    from geval_async.study.config import load_config
    from geval_async.study.plan import first_request, plan_items
    from geval_async.study.prepare import prepare_study

    study.write_config("http://127.0.0.1:9/v1", limits={"backoff": 0.01, "concurrency": 1})
    plan = prepare_study(load_config(study.config))
    keys = {
        orjson.dumps(first_request(item, plan.config).body["messages"]).decode(): first_request(
            item, plan.config
        ).key
        for item in plan_items(plan)
    }
    with _TakenOverJudge(study.cache, keys) as judge:
        study.write_config(judge.base_url, limits={"backoff": 0.01, "concurrency": 1})
        result = run_cli("run", str(study.config), "--limit", "1", "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert judge.by_key and set(judge.by_key.values()) == {1}, "no request was sent twice"
