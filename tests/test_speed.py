"""What the client's speed work must not change, and what it must do: real servers, no timings.

Write-behind (answers committed in batches) still leaves every answer on disk and no claim
held when ``run_study`` returns; a ``remaining`` header without a ``limit`` header does not
throttle the client; the plan is sent record by record, every criterion of a record together.
(That the run begins small is shown on the fake clock, in test_limits.py.)
"""

from __future__ import annotations

import asyncio
import hashlib

import diskcache
import orjson
from aiohttp import web
from conftest import LoopbackApp, StudyFiles

from geval_async.judging.run.runner import run_study
from geval_async.judging.store.cache import JudgeCache
from geval_async.judging.store.claims import Claims
from geval_async.sim import SimServer
from geval_async.study.config import load_config
from geval_async.study.plan import first_request, plan_items, planned_requests
from geval_async.study.prepare import prepare_study


def _judge(study: StudyFiles) -> tuple[object, int]:
    """Run the study in this process with the library call; (result, plan size)."""
    prepared = prepare_study(load_config(study.config))
    with JudgeCache(prepared.config.cache_path) as cache:
        result = asyncio.run(run_study(prepared, cache, api_key=None))
    return result, prepared.item_count


def test_batched_writes_are_all_on_disk_and_no_claim_is_held_when_run_study_returns(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url, limits={"concurrency": 16})
    result, items = _judge(study)
    assert result.complete  # type: ignore[attr-defined]
    prepared = prepare_study(load_config(study.config))
    keys = [first_request(item, prepared.config).key for item in plan_items(prepared)]
    # A fresh connection, as another process would open it: everything is committed.
    with diskcache.Cache(str(study.cache)) as stored:
        assert all(key in stored for key in keys)
    with Claims(study.cache, 60.0) as claims:
        assert len(claims) == 0, "every claim is let go once its answer is stored"
    assert sim.stats.received == items == len(keys)


def test_a_remaining_header_without_a_limit_does_not_throttle_the_client(
    study: StudyFiles,
) -> None:
    with _RemainingOnly() as server:
        study.write_config(server.base_url, limits={"concurrency": 8})
        result, items = _judge(study)
    assert result.complete  # type: ignore[attr-defined]
    assert server.received == items
    assert server.peak_in_flight == 8, "every worker had a request out at once"


def test_items_are_sent_record_by_record_with_criteria_interleaved(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url, limits={"concurrency": 1})
    result, items = _judge(study)
    assert result.complete  # type: ignore[attr-defined]
    prepared = prepare_study(load_config(study.config))
    criterion_of = {
        hashlib.sha256(orjson.dumps(first_request(item, prepared.config).body)).hexdigest(): (
            item.criterion.name
        )
        for item in plan_items(prepared)
    }
    arrived = [criterion_of[digest] for _, digest in sorted(sim.stats.arrivals)]
    assert len(arrived) == items
    assert arrived[:6] == ["clar", "fit"] * 3
    sent = planned_requests(prepared, send=True)
    assert [r.item.criterion.name for r in sent] == arrived
    # Scoring still reads the plan criterion by criterion.
    assert [i.criterion.name for i in plan_items(prepared)][: items // 2] == ["clar"] * (items // 2)


class _RemainingOnly(LoopbackApp):
    """A plain aiohttp.web judge that sends ``x-ratelimit-remaining-requests`` and no limit."""

    def __init__(self) -> None:
        super().__init__()
        self.received = self.in_flight = self.peak_in_flight = 0

    async def _complete(self, request: web.Request) -> web.Response:
        await request.read()
        self.received += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            # Long enough that eight workers unthrottled overlap on a loaded machine.
            await asyncio.sleep(0.2)
        finally:
            self.in_flight -= 1
        body = {
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": "3"}} for i in range(3)
            ]
        }
        remaining = {"x-ratelimit-remaining-requests": "5"}
        return web.json_response(body, headers=remaining)

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/chat/completions", self._complete)]
