"""The simulated judge's Batch API enforces an enqueued-token limit per model, as OpenAI does,
and counts what it queued, so a client's tests can assert it stayed under the limit and sent
no request twice."""

from __future__ import annotations

import hashlib
import io
import json
import urllib.request
from collections.abc import Iterator

import aiohttp
import openai
import pytest

from geval_async.sim import SimServer, SimSettings, ratings
from geval_async.sim.limits import prompt_tokens


def batch_file(first: int, count: int, model: str = "gpt-4o-mini") -> bytes:
    lines = []
    for i in range(first, first + count):
        body = {
            "model": model,
            "messages": [{"role": "user", "content": f"Text {i:04d}. Rate it (1-5):"}],
            "max_tokens": 5,
        }
        line = {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions"}
        lines.append(json.dumps({**line, "body": body}))
    return ("\n".join(lines) + "\n").encode()


def tokens_of(count: int) -> int:
    """What the sim counts for a batch of ``count`` lines of batch_file (all the same size)."""
    return count * prompt_tokens([{"role": "user", "content": "Text 0000. Rate it (1-5):"}])


@pytest.fixture
def srv() -> Iterator[SimServer]:
    with SimServer(SimSettings(batch_polls=2)) as server:
        yield server


@pytest.fixture
def sdk(srv: SimServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0) as client:
        yield client


def submit(sdk: openai.OpenAI, content: bytes) -> str:
    uploaded = sdk.files.create(file=("in.jsonl", io.BytesIO(content)), purpose="batch")
    created = sdk.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    return created.id


def test_a_batch_over_the_queue_limit_fails_as_openais_does(
    srv: SimServer, sdk: openai.OpenAI
) -> None:
    limit = tokens_of(15)
    srv.settings.batch_queue_tokens = limit
    first = submit(sdk, batch_file(0, 10))
    assert srv.stats.batch_queued_tokens == {"gpt-4o-mini": tokens_of(10)}
    second = submit(sdk, batch_file(10, 10))  # 20 lines' tokens would be over 15 lines'
    refused = sdk.batches.retrieve(second)
    assert refused.status == "failed"
    assert refused.errors is not None and refused.errors.data is not None
    error = refused.errors.data[0]
    assert error.code == "token_limit_exceeded"
    assert error.message == (
        f"Enqueued token limit reached for gpt-4o-mini in organization org-sim. "
        f"Limit: {limit:,} enqueued tokens. Please try again once some in_progress batches "
        "have been completed."
    )
    # Another model has a queue of its own.
    assert sdk.batches.retrieve(submit(sdk, batch_file(30, 10, model="gpt-5-mini"))).status in (
        "in_progress",
        "validating",
    )
    # The first finishes after batch_polls retrievals and frees the queue: the second fits now.
    assert sdk.batches.retrieve(first).status == "in_progress"
    assert sdk.batches.retrieve(first).status == "completed"
    assert "gpt-4o-mini" not in srv.stats.batch_queued_tokens  # nothing queued for it
    again = submit(sdk, batch_file(10, 10))
    for _ in range(2):
        done = sdk.batches.retrieve(again)
    assert done.status == "completed" and done.request_counts is not None
    assert done.request_counts.completed == 10
    # Queued, never over the limit; every request that entered the queue entered it once.
    assert srv.stats.batch_peak_queued_tokens["gpt-4o-mini"] == tokens_of(10) <= limit
    assert len(srv.stats.batch_requests) == 30
    assert set(srv.stats.batch_requests.values()) == {1}


def test_a_batch_larger_than_the_whole_limit_never_fits(srv: SimServer, sdk: openai.OpenAI) -> None:
    srv.settings.batch_queue_tokens = tokens_of(5)
    refused = sdk.batches.retrieve(submit(sdk, batch_file(0, 6)))
    assert refused.status == "failed"
    assert srv.stats.batch_requests == {} and srv.stats.batch_queued_tokens == {}


def test_stats_endpoint_shows_the_queue(srv: SimServer, sdk: openai.OpenAI) -> None:
    submit(sdk, batch_file(0, 4))
    with urllib.request.urlopen(f"{srv.root_url}/sim/stats") as response:
        shown = json.load(response)
    assert shown["batch_queued_tokens"] == {"gpt-4o-mini": tokens_of(4)}
    assert sorted(shown["batch_requests"].values()) == [1, 1, 1, 1]


async def test_a_batch_line_and_the_same_request_online_share_a_digest(
    srv: SimServer, sdk: openai.OpenAI
) -> None:
    content = batch_file(0, 1)
    body = json.loads(content)["body"]
    raw = json.dumps(body, separators=(",", ":")).encode()
    digest = hashlib.sha256(raw).hexdigest()
    batch = submit(sdk, content)
    for _ in range(2):
        sdk.batches.retrieve(batch)
    assert srv.stats.batch_requests == {digest: 1}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{srv.base_url}/chat/completions", data=raw) as resp,
    ):
        assert resp.status == 200
    # The rating the batch gave and the one the online answer gave, under one digest.
    assert srv.stats.ratings[digest] == ratings(body, srv.settings) * 2
