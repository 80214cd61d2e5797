"""The simulated judge server speaks OpenAI's protocol, answers deterministically and
injects the faults and limits it is asked for."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from multidict import CIMultiDict

from geval_async.sim import SimServer, SimSettings
from geval_async.sim.answers import first_token_probs, rating_scale
from geval_async.sim.limits import RateLimiter, draw_latency, format_duration, prompt_tokens

PROMPT = "Evaluate coherence.\nText: {text}\nRate the coherence (1-5). Score:"


def messages(text: str = "The cat sat on the mat.", scale: str = "(1-5)") -> list[Any]:
    return [{"role": "user", "content": PROMPT.format(text=text).replace("(1-5)", scale)}]


def request(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt-test", "messages": messages(), "max_tokens": 8, **fields}


@pytest.fixture
def srv() -> Iterator[SimServer]:
    with SimServer(SimSettings()) as server:
        yield server


@pytest.fixture
def client(srv: SimServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0) as sdk:
        yield sdk


async def post(
    url: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, CIMultiDict[str], bytes]:
    """One POST on a fresh connection: status, headers, raw body."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **(headers or {})}
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=raw, headers=headers) as resp,
    ):
        return resp.status, resp.headers.copy(), await resp.read()


def contents(body: bytes) -> list[str]:
    return [c["message"]["content"] for c in json.loads(body)["choices"]]


def rating_in(text: str | None) -> int:
    found = re.search(r"\d+", text or "")
    assert found is not None, text
    return int(found.group())


# -- protocol ----------------------------------------------------------------------------


def test_sdk_parses_an_answer(client: openai.OpenAI, srv: SimServer) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-test", messages=messages(), n=3, max_tokens=8
    )
    completion = raw.parse()
    assert raw.headers["x-geval-simulated"] == "true"
    assert completion.id.startswith("chatcmpl-sim-")
    assert completion.model == "gpt-test"
    assert completion.system_fingerprint == "geval-async-simulated"
    assert [c.index for c in completion.choices] == [0, 1, 2]
    for choice in completion.choices:
        assert 1 <= rating_in(choice.message.content) <= 5
        assert choice.finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == prompt_tokens(messages())
    assert completion.usage.total_tokens == (
        prompt_tokens(messages()) + completion.usage.completion_tokens
    )
    assert srv.stats.by_status[200] == 1


def test_models_lists_the_judge(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["sim-judge"]


async def test_same_body_gets_the_same_answer(srv: SimServer) -> None:
    url = f"{srv.base_url}/chat/completions"
    body = request(n=20)
    first, second = await post(url, body), await post(url, body)
    assert first[0] == second[0] == 200
    assert contents(first[2]) == contents(second[2])
    reseeded = await post(url, {**body, "seed": 7})
    assert contents(reseeded[2]) != contents(first[2])
    digest = hashlib.sha256(json.dumps(body).encode()).hexdigest()
    assert srv.stats.answered[digest] == 2
    assert [d for _, d in srv.stats.arrivals] == [digest, digest, srv.stats.arrivals[2][1]]


async def test_n_is_honoured_unless_ignore_n(srv: SimServer) -> None:
    url = f"{srv.base_url}/chat/completions"
    assert len(contents((await post(url, request(n=4)))[2])) == 4
    srv.settings.ignore_n = True
    answers = [contents((await post(url, request(n=4)))[2]) for _ in range(8)]
    assert all(len(a) == 1 for a in answers)
    # Like llama.cpp, every call is a fresh sample even for the same body.
    assert len({a[0] for a in answers}) > 1


def test_rating_scale_takes_the_last_range() -> None:
    assert rating_scale("Rate it (1-5).") == 5
    assert rating_scale("on a scale of 1 to 10") == 10
    assert rating_scale("Criteria 1-3 ... Rating (1 - 4):") == 4
    assert rating_scale("in 2021-11 nothing") == 5
    assert rating_scale("no scale here") == 5


async def test_ratings_stay_on_the_prompts_scale(srv: SimServer) -> None:
    url = f"{srv.base_url}/chat/completions"
    seen: set[int] = set()
    for i in range(6):
        body = request(messages=messages(f"text {i}", "on a scale of 1 to 10"), n=32)
        for text in contents((await post(url, body))[2]):
            seen.add(rating_in(text))
    assert min(seen) >= 1 and max(seen) <= 10
    assert max(seen) > 5  # the scale really is 10, not the default 5


async def test_max_tokens_cuts_the_answer(srv: SimServer) -> None:
    srv.settings.invalid_answers = 1.0
    status, _, body = await post(f"{srv.base_url}/chat/completions", request(max_tokens=1, n=2))
    assert status == 200
    answer = json.loads(body)
    assert [c["message"]["content"] for c in answer["choices"]] == ["I ca", "I ca"]
    assert {c["finish_reason"] for c in answer["choices"]} == {"length"}
    assert srv.stats.faults["invalid_answer"] == 2


def test_logprobs_look_like_openais(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="gpt-test",
        messages=messages(scale="scale of 1 to 10"),
        max_tokens=1,
        logprobs=True,
        top_logprobs=20,
    )
    choice = completion.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    first = choice.logprobs.content[0]
    assert choice.message.content == first.token
    assert first.token.isdigit() and 1 <= int(first.token) <= 10
    alternatives = first.top_logprobs
    assert len(alternatives) == 20
    assert alternatives[0].token == first.token and alternatives[0].logprob == first.logprob
    assert [a.logprob for a in alternatives] == sorted(
        (a.logprob for a in alternatives), reverse=True
    )
    assert all(a.bytes == list(a.token.encode()) for a in alternatives)
    ratings = {str(r) for r in range(1, 11)}
    best = int(first.token)
    near = {str(r) for r in (best - 1, best, best + 1) if 1 <= r <= 10}
    assert near <= {a.token for a in alternatives}
    assert " " + first.token in {a.token for a in alternatives}
    assert sum(math.exp(a.logprob) for a in alternatives if a.token in ratings) < 1


def test_rated_scores_set_the_judged_texts_score(
    srv: SimServer, client: openai.OpenAI, tmp_path: Path
) -> None:
    """A study that hands the judge its scores gets them for the text judged, not for a text of
    the file that its context holds (an extractive summary's sentence in the article)."""
    lead = "The council met on Monday and agreed the budget."
    summary = "Council agrees budget."
    table = tmp_path / "rated.json"
    table.write_text(json.dumps({lead: 5.0, summary: 1.2}), encoding="utf-8")

    def expected_rating(text: str, article: str = f"{lead} Rain is due.") -> float:
        prompt = f"Article: {article}\nSummary: {text}\nRate the coherence (1-5):"
        completion = client.chat.completions.create(
            model="gpt-test",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=1,
            logprobs=True,
            top_logprobs=20,
        )
        assert completion.choices[0].logprobs is not None
        first = (completion.choices[0].logprobs.content or [])[0]
        mass = {int(a.token): math.exp(a.logprob) for a in first.top_logprobs if a.token.isdigit()}
        return sum(r * p for r, p in mass.items()) / sum(mass.values())

    elsewhere = "Markets fell as rain came."
    drawn = expected_rating("Markets fell.", elsewhere)
    srv.settings.rated_scores = str(table)
    assert expected_rating(summary) < 1.7  # its own 1.2, though the article holds the 5
    assert expected_rating(lead) > 4.3  # the lead judged as the summary: 5
    # A prompt holding none of the file's texts keeps the score drawn from it.
    assert expected_rating("Markets fell.", elsewhere) == drawn


def test_logprob_mass_never_exceeds_one() -> None:
    for top in (3, 5, 10):
        for step in range(0, 41):
            t = 1 + (top - 1) * step / 40
            for invalid in (False, True):
                probs = first_token_probs(t, top, invalid)
                assert sum(p for _, p in probs) <= 1
                assert sum(p for tok, p in probs if tok.isdigit()) < 1
                assert probs == sorted(probs, key=lambda tp: -tp[1])


# -- rate limits ---------------------------------------------------------------------------


async def test_rpm_limit_answers_429_with_retry_after(srv: SimServer) -> None:
    srv.settings.rpm = 2
    url = f"{srv.base_url}/chat/completions"
    answers = [await post(url, request(messages=messages(f"t{i}"))) for i in range(3)]
    assert [status for status, _, _ in answers] == [200, 200, 429]
    _, first_headers, _ = answers[0]
    assert first_headers["x-ratelimit-limit-requests"] == "2"
    assert first_headers["x-ratelimit-remaining-requests"] == "1"
    assert re.fullmatch(r"\d+(\.\d+)?s", first_headers["x-ratelimit-reset-requests"])
    assert "x-ratelimit-limit-tokens" not in first_headers
    _, headers, body = answers[2]
    error = json.loads(body)["error"]
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "requests"
    assert error["param"] is None and "Rate limit reached for requests" in error["message"]
    # Refilling one request at 2/min takes 30 s, a little less as time passes.
    assert 29_000 < int(headers["retry-after-ms"]) <= 30_000
    assert headers["retry-after"] == "30"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert srv.stats.rate_limited == 1 and srv.stats.by_status == {200: 2, 429: 1}


async def test_the_timeline_ends_the_pace_at_the_last_admitted_arrival(srv: SimServer) -> None:
    """What a benchmark reads from /sim/stats to split a run: a refused arrival is not part
    of the pace, and the last answer left at least its latency after the last admitted one."""
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{srv.root_url}/sim/stats") as resp:
            empty = (await resp.json())["timeline"]
        assert empty == {"first_arrival": None, "last_admitted": None, "last_answered": None}
        srv.settings.rpm, srv.settings.latency_ms = 2, 50
        url = f"{srv.base_url}/chat/completions"
        answers = [await post(url, request(messages=messages(f"t{i}"))) for i in range(3)]
        assert [status for status, _, _ in answers] == [200, 200, 429]
        async with session.get(f"{srv.root_url}/sim/stats") as resp:
            timeline = (await resp.json())["timeline"]
    (first, _), (second, _), (refused, _) = srv.stats.arrivals
    assert timeline["first_arrival"] == first
    assert timeline["last_admitted"] == second < refused
    # asyncio may wake a timer a clock tick early, never more
    assert timeline["last_answered"] - second >= 0.05 - 1e-3


def test_tpm_limit_counts_prompt_and_max_tokens(srv: SimServer, client: openai.OpenAI) -> None:
    cost = prompt_tokens(messages()) + 8 * 2
    srv.settings.tpm = 2 * cost
    for _ in range(2):
        client.chat.completions.create(model="m", messages=messages(), max_tokens=8, n=2)
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(model="m", messages=messages(), max_tokens=8, n=2)
    assert refused.value.code == "rate_limit_exceeded"
    assert refused.value.type == "tokens"
    assert "retry-after-ms" in refused.value.response.headers
    # A request larger than the whole bucket can never pass: no retry-after.
    with pytest.raises(openai.RateLimitError) as too_large:
        client.chat.completions.create(model="m", messages=messages(), max_tokens=4000)
    assert "Request too large" in too_large.value.message
    assert "retry-after" not in too_large.value.response.headers


def test_limiter_refills_continuously_and_follows_settings() -> None:
    now = [100.0]
    limiter = RateLimiter(clock=lambda: now[0])
    assert limiter.admit(60, None, 2.0, 10).refused is None  # capacity 2, 1 per second
    assert limiter.admit(60, None, 2.0, 10).refused is None
    verdict = limiter.admit(60, None, 2.0, 10)
    assert verdict.refused == "requests" and verdict.retry_after == pytest.approx(1.0)
    assert limiter.headers(60, None, 2.0)["x-ratelimit-reset-requests"] == "2s"
    now[0] += 0.5
    assert limiter.admit(60, None, 2.0, 10).retry_after == pytest.approx(0.5)
    now[0] += 0.5
    assert limiter.admit(60, None, 2.0, 10).refused is None
    # Raising the limit at runtime keeps the level but refills faster.
    assert limiter.admit(600, None, 2.0, 10).retry_after == pytest.approx(0.1)
    # Tokens are checked too, and a refused request is not charged.
    assert limiter.admit(None, 100, 60.0, 80).refused is None
    assert limiter.admit(None, 100, 60.0, 30).refused == "tokens"
    assert limiter.headers(None, 100, 60.0)["x-ratelimit-remaining-tokens"] == "20"


def test_durations_are_spelled_like_openai() -> None:
    assert format_duration(0.12) == "120ms"
    assert format_duration(1) == "1s"
    assert format_duration(360) == "6m0s"
    assert format_duration(90.5) == "1m30.5s"
    assert format_duration(3600) == "1h0m0s"
    assert format_duration(0) == "0s"


def test_latency_is_lognormal_around_the_median() -> None:
    rng = random.Random(0)
    assert draw_latency(0, 1.0, rng) == 0
    assert draw_latency(250, 0, rng) == 0.25
    draws = sorted(draw_latency(100, 1.0, rng) for _ in range(2001))
    assert 0.09 < draws[1000] < 0.11
    assert draws[-1] > 1.0  # the long tail


# -- faults --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "status", "kind"),
    [("error_500", 500, "server_error"), ("error_503", 503, "server_error")],
)
async def test_server_errors(srv: SimServer, fault: str, status: int, kind: str) -> None:
    setattr(srv.settings, fault, 1.0)
    got, headers, body = await post(f"{srv.base_url}/chat/completions", request())
    assert got == status and json.loads(body)["error"]["type"] == kind
    assert headers["x-geval-simulated"] == "true"
    assert srv.stats.faults[str(status)] == 1 and srv.stats.by_status[status] == 1


async def test_faults_are_random_not_tied_to_the_body(srv: SimServer) -> None:
    srv.settings.error_500 = 0.5
    statuses = [(await post(f"{srv.base_url}/chat/completions", request()))[0] for _ in range(20)]
    assert set(statuses) == {200, 500}  # so a retried request can succeed


async def test_reset_drops_the_connection(srv: SimServer, client: openai.OpenAI) -> None:
    srv.settings.reset = 1.0
    with pytest.raises(aiohttp.ClientError):
        await post(f"{srv.base_url}/chat/completions", request())
    with pytest.raises(openai.APIConnectionError):
        await asyncio.to_thread(client.chat.completions.create, model="m", messages=messages())
    assert srv.stats.faults["reset"] == 2 and srv.stats.by_status[0] == 2


async def test_stall_outlasts_the_client(srv: SimServer) -> None:
    srv.settings.stall, srv.settings.stall_seconds = 1.0, 60.0
    with pytest.raises(asyncio.TimeoutError):
        async with asyncio.timeout(0.2):
            await post(f"{srv.base_url}/chat/completions", request())
    # The count is made on the server's thread when it notices the client left; poll it.
    async with asyncio.timeout(5):
        while srv.stats.by_status[-1] != 1:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    assert srv.stats.faults["stall"] == 1 and srv.stats.in_flight == 0


async def test_short_stall_then_answers(srv: SimServer) -> None:
    srv.settings.stall, srv.settings.stall_seconds = 1.0, 0.01
    status, _, _ = await post(f"{srv.base_url}/chat/completions", request())
    assert status == 200 and srv.stats.faults["stall"] == 1


async def test_truncated_body_is_not_json(srv: SimServer) -> None:
    srv.settings.truncated = 1.0
    status, _, body = await post(f"{srv.base_url}/chat/completions", request())
    assert status == 200 and body.startswith(b'{"id": "chatcmpl-sim-')
    with pytest.raises(ValueError):
        json.loads(body)
    assert srv.stats.faults["truncated"] == 1 and not srv.stats.answered


async def test_spurious_429_asks_for_a_short_wait(srv: SimServer) -> None:
    srv.settings.spurious_429, srv.settings.retry_after_ms = 1.0, 350
    status, headers, body = await post(f"{srv.base_url}/chat/completions", request())
    assert status == 429 and json.loads(body)["error"]["code"] == "rate_limit_exceeded"
    assert headers["retry-after-ms"] == "350" and headers["retry-after"] == "1"
    assert srv.stats.faults["429"] == 1 and srv.stats.rate_limited == 0


def test_quota_runs_out(srv: SimServer, client: openai.OpenAI) -> None:
    srv.settings.quota_after = 2
    for i in range(2):
        client.chat.completions.create(model="m", messages=messages(f"t{i}"))
    for _ in range(2):
        with pytest.raises(openai.RateLimitError) as refused:
            client.chat.completions.create(model="m", messages=messages())
        assert refused.value.code == "insufficient_quota"
        assert refused.value.type == "insufficient_quota"
        assert "retry-after" not in refused.value.response.headers
    assert srv.stats.faults["quota"] == 2 and srv.stats.by_status[200] == 2


# -- refusals ------------------------------------------------------------------------------


def test_api_key_is_required_when_set(srv: SimServer) -> None:
    srv.settings.api_key = "secret"
    with (
        openai.OpenAI(base_url=srv.base_url, api_key="wrong", max_retries=0) as wrong,
        openai.OpenAI(base_url=srv.base_url, api_key="secret", max_retries=0) as right,
    ):
        with pytest.raises(openai.AuthenticationError) as refused:
            wrong.chat.completions.create(model="m", messages=messages())
        assert refused.value.code == "invalid_api_key"
        assert right.chat.completions.create(model="m", messages=messages()).choices
    assert srv.stats.by_status == {401: 1, 200: 1}


async def test_azure_path_and_api_key_header(srv: SimServer) -> None:
    srv.settings.api_key = "azure-key"
    with openai.AzureOpenAI(
        azure_endpoint=srv.root_url,
        azure_deployment="judge",
        api_version="2024-06-01",
        api_key="azure-key",
        max_retries=0,
    ) as azure:
        completion = await asyncio.to_thread(
            azure.chat.completions.create, model="judge", messages=messages()
        )
    assert completion.model == "judge" and completion.choices
    url = f"{srv.root_url}/openai/deployments/judge/chat/completions"
    status, _, body = await post(url, request(), {"api-key": "azure-key"})
    assert status == 404 and json.loads(body)["error"]["code"] == "404"
    # Azure requests need not name a model: the deployment is the model.
    no_model = {k: v for k, v in request().items() if k != "model"}
    status, _, body = await post(
        f"{url}?api-version=2024-06-01", no_model, {"api-key": "azure-key"}
    )
    assert status == 200 and json.loads(body)["model"] == "judge"


def test_content_filter_and_context_window(srv: SimServer, client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as filtered:
        client.chat.completions.create(model="m", messages=messages("bad [[FILTER]] words"))
    assert filtered.value.code == "content_filter"
    srv.settings.context_window = 10
    with pytest.raises(openai.BadRequestError) as too_long:
        client.chat.completions.create(model="m", messages=messages())
    assert too_long.value.code == "context_length_exceeded"


@pytest.mark.parametrize(
    "body",
    [b"{not json", {"model": "m"}, {"messages": []}, request(n=0), request(n=129), [1, 2]],
)
async def test_invalid_requests_get_400(srv: SimServer, body: Any) -> None:
    status, _, raw = await post(f"{srv.base_url}/chat/completions", body)
    assert status == 400
    assert json.loads(raw) == {
        "error": {
            "message": json.loads(raw)["error"]["message"],
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    assert srv.stats.received == 1 and srv.stats.by_status == {400: 1}


async def test_unknown_path_answers_in_openai_form(srv: SimServer) -> None:
    async with aiohttp.ClientSession() as session, session.get(f"{srv.root_url}/nope") as resp:
        assert resp.status == 404 and resp.headers["x-geval-simulated"] == "true"
        assert (await resp.json())["error"]["code"] == "404"


# -- control endpoints and concurrency ------------------------------------------------------


async def test_stats_settings_and_reset_endpoints(srv: SimServer) -> None:
    await post(f"{srv.base_url}/chat/completions", request())
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{srv.root_url}/sim/stats") as resp:
            stats = await resp.json()
        assert stats["received"] == 1 and stats["by_status"] == {"200": 1}
        assert stats == json.loads(json.dumps(srv.stats.as_dict()))
        async with session.post(f"{srv.root_url}/sim/settings", json={"error_503": 1.0}) as resp:
            assert resp.status == 200 and (await resp.json())["error_503"] == 1.0
        assert srv.settings.error_503 == 1.0
        for bad in ({"nonsense": 1}, {"rpm": "fast"}, {"rpm": True}, [1]):
            async with session.post(f"{srv.root_url}/sim/settings", json=bad) as resp:
                assert resp.status == 400
        assert srv.settings.rpm is None
        assert (await post(f"{srv.base_url}/chat/completions", request()))[0] == 503
        async with session.post(f"{srv.root_url}/sim/reset") as resp:
            assert (await resp.json())["received"] == 0
    assert srv.stats.received == 0 and not srv.stats.arrivals and not srv.stats.faults


async def test_peak_in_flight_shows_concurrency(srv: SimServer) -> None:
    srv.settings.latency_ms = 100
    url = f"{srv.base_url}/chat/completions"
    answers = await asyncio.gather(*(post(url, request(n=i + 1)) for i in range(8)))
    assert [status for status, _, _ in answers] == [200] * 8
    assert srv.stats.peak_in_flight == 8 and srv.stats.in_flight == 0


async def test_serve_prints_where_it_listens() -> None:
    # A launcher reads the line from a pipe, where only the flush makes it arrive.
    code = "import asyncio, geval_async.sim as s; asyncio.run(s.serve(s.SimSettings(), port=0))"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
    )
    try:
        async with asyncio.timeout(20):
            line = (await proc.stdout.readline()).decode()  # type: ignore[union-attr]
        match = re.fullmatch(r"simulated judge listening on (http://127\.0\.0\.1:\d+/v1)\n", line)
        assert match is not None, line
        status, _, _ = await post(f"{match.group(1)}/chat/completions", request())
        assert status == 200
    finally:
        proc.terminate()
        await proc.communicate()
