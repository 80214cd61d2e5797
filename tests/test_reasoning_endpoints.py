"""The shipped UEQ study against an endpoint that answers as OpenAI documents for gpt-5 models.

The stub below (real HTTP on 127.0.0.1, an aiohttp.web app in a thread) refuses ``max_tokens``
(400 ``unsupported_parameter``), a temperature other than 1 (400 ``unsupported_value``) and
logprobs (403), with OpenAI's bodies as its users report them; it spends reasoning tokens out
of ``max_completion_tokens`` and reports them in ``usage.completion_tokens_details``, and
answers empty with ``finish_reason: "length"`` when the budget is spent on reasoning. Each
test drives ``geval-async run`` (a subprocess, as a user runs it) and reads what a user
reads: the run's last line, ``status``, the scores, and the stub's counts.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import UEQ, LoopbackApp, run_cli, summary_row, ueq_flags

from geval_async.judging.wire.failures import Action, History, decide, response_fact
from geval_async.scoring.scores.results import load_results
from geval_async.study.pricing import usd

MODEL = "gpt-5-mini"
REASONING = 200  # reasoning tokens each choice spends before it answers
KEY = {"OPENAI_API_KEY": "sk-test-reasoning"}


def _error(status: int, message: str, param: str | None, code: str | None) -> web.Response:
    body = {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    }
    return web.json_response(body, status=status)


class ReasoningJudge(LoopbackApp):
    """An OpenAI-compatible gpt-5 endpoint: its documented refusals and its reasoning budget."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[dict[str, Any]] = []
        self.statuses: Counter[int] = Counter()
        self.ratings: Counter[tuple[float, ...]] = Counter()  # the ratings of each answer
        self.legacy = False  # True: it takes max_tokens only, as older chat models did

    def answer(self, body: dict[str, Any]) -> web.Response:
        if body.get("temperature", 1) != 1:
            return _error(
                400,
                f"Unsupported value: 'temperature' does not support {body['temperature']} with "
                "this model. Only the default (1) value is supported.",
                "temperature",
                "unsupported_value",
            )
        if self.legacy and "max_completion_tokens" in body:
            return _error(
                400,
                "Unsupported parameter: 'max_completion_tokens' is not supported with this "
                "model. Use 'max_tokens' instead.",
                "max_completion_tokens",
                "unsupported_parameter",
            )
        if "max_tokens" in body and not self.legacy:
            return _error(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            )
        if body.get("logprobs"):
            return _error(
                403, "You are not allowed to request logprobs from this model", None, None
            )
        budget = body.get("max_completion_tokens", body.get("max_tokens", 1 << 20))
        choices, reasoning, completion = [], 0, 0
        prompt = json.dumps(body["messages"], sort_keys=True)
        given = []
        for index in range(body.get("n", 1)):
            if budget <= REASONING:  # the whole budget goes on reasoning: no answer
                content, finish = "", "length"
                reasoning += budget
                completion += budget
            else:
                digest = hashlib.sha256(f"{prompt}|{index}".encode()).digest()
                rating = 1 + digest[0] % 3  # within every UEQ criterion's scale
                given.append(float(rating))
                content, finish = str(rating), "stop"
                reasoning += REASONING
                completion += REASONING + 1
            message = {"role": "assistant", "content": content}
            choices.append({"index": index, "message": message, "finish_reason": finish})
        if given:
            self.ratings[tuple(given)] += 1
        usage = {
            "prompt_tokens": 100,
            "completion_tokens": completion,
            "total_tokens": 100 + completion,
            "prompt_tokens_details": {"cached_tokens": 50},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }
        return web.json_response(
            {"id": "chatcmpl-1", "model": MODEL, "choices": choices, "usage": usage}
        )

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        response = self.answer(body)
        self.statuses[response.status] += 1
        return response

    async def _probe(self, request: web.Request) -> web.Response:
        return web.Response(status=405)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/chat/completions", self._complete),
            web.get("/v1/chat/completions", self._probe),
        ]

    @property
    def failed(self) -> int:
        return sum(count for status, count in self.statuses.items() if status != 200)


@pytest.fixture
def judge() -> Any:
    with ReasoningJudge() as server:
        yield server


def _flags(judge: ReasoningJudge, tmp_path: Path, *extra: str) -> list[str]:
    return ueq_flags(judge.base_url, tmp_path, MODEL, *extra)


def _run(judge: ReasoningJudge, tmp_path: Path, *extra: str) -> Any:
    return run_cli("run", *_flags(judge, tmp_path, *extra), "--quiet", env=KEY)


def _status(judge: ReasoningJudge, tmp_path: Path, *extra: str) -> Any:
    return run_cli("status", *_flags(judge, tmp_path, *extra), env=KEY)


def test_a_budget_spent_on_reasoning_stops_the_first_wave(
    judge: ReasoningJudge, tmp_path: Path
) -> None:
    # The shipped config's max_tokens = 5: a reasoning model thinks it all away.
    done = _run(judge, tmp_path, "--concurrency", "4")
    assert done.returncode == 1, done.stderr
    assert (
        "stopped: the judge spent all of max_tokens (5) on reasoning and gave no rating: raise "
        "[sampling] max_tokens (for example to 2000) or lower reasoning_effort"
    ) in done.stderr
    answered = [b for b in judge.bodies if "max_completion_tokens" in b]
    # The first wave (4 in flight) and no more: the plan has 16 requests.
    assert 1 <= len(answered) <= 4, len(answered)
    assert all(b["max_completion_tokens"] == 5 for b in answered)
    # Nothing was stored as an answer or a refusal: every item is still to ask.
    row = summary_row(_status(judge, tmp_path, "--concurrency", "4").stdout)
    assert (row["answered"], row["refused"], row["missing"]) == (0, 0, 16)


def test_a_large_budget_answers_every_item_under_max_completion_tokens(
    judge: ReasoningJudge, tmp_path: Path
) -> None:
    done = _run(judge, tmp_path, "--max-tokens", "2000")
    assert done.returncode == 0, done.stderr
    # max_tokens was refused by the first wave only, each resent at once under the other name.
    refused = [b for b in judge.bodies if "max_tokens" in b]
    assert judge.failed == len(refused) <= 16
    sent = [b for b in judge.bodies if "max_completion_tokens" in b]
    assert len(sent) == 16 and all(b["max_completion_tokens"] == 2000 for b in sent)
    assert all("max_tokens" not in b for b in sent)
    # The scores are exactly the ratings the server gave (the key is the logical request).
    results = load_results(
        UEQ, model=MODEL, limit=4, max_tokens=2000, cache=tmp_path / "cache", output=tmp_path / "o"
    )
    scored = Counter(score.ratings for score in results.scores)
    assert scored == judge.ratings and sum(scored.values()) == 16
    # What the endpoint accepts and what the answers billed, as the run's summary says.
    assert f"endpoint: {MODEL} at 127.0.0.1:{judge.port}: max_completion_tokens, n up to 10" in (
        done.stdout
    )
    per_request = (50 * 0.25 + 50 * 0.025 + 10 * (REASONING + 1) * 2.00) / 1e6
    assert f"billed: {usd(16 * per_request)}" in done.stdout
    status = _status(judge, tmp_path, "--max-tokens", "2000")
    assert f"spent so far: {usd(16 * per_request)}" in status.stdout
    assert f"endpoint: {MODEL} at 127.0.0.1:{judge.port}: max_completion_tokens" in status.stdout

    # A second run against the same endpoint (four more records) starts right: no failure.
    failed, before = judge.failed, len(judge.bodies)
    again = _run(judge, tmp_path, "--max-tokens", "2000", "--limit", "8")
    assert again.returncode == 0, again.stderr
    assert judge.failed == failed
    assert len(judge.bodies) - before == 16
    assert all("max_completion_tokens" in b for b in judge.bodies[before:])


@pytest.mark.parametrize(
    ("extra", "line", "in_flight"),
    [
        (
            ("--temperature", "0.7"),
            "stopped: [sampling] temperature = 0.7 is refused by gpt-5-mini (unsupported_value: "
            "only the default (1) value is supported): set temperature = 1",
            2,  # the requests in flight, each refused at once
        ),
        (
            ("--mode", "logprobs"),
            'stopped: [sampling] mode = "logprobs" is refused by gpt-5-mini (HTTP 403: You are '
            'not allowed to request logprobs from this model): set mode = "samples"',
            4,  # in flight: each a max_tokens refusal, then logprobs'
        ),
    ],
    ids=["temperature", "logprobs"],
)
def test_a_refused_setting_stops_at_once_and_stores_nothing(
    judge: ReasoningJudge, tmp_path: Path, extra: tuple[str, ...], line: str, in_flight: int
) -> None:
    flags = ("--max-tokens", "2000", *extra, "--concurrency", "2")
    done = _run(judge, tmp_path, *flags)
    assert done.returncode == 1
    assert line in done.stderr
    # Every request sent was refused: the ones in flight, not the 16 of the plan.
    assert judge.failed == len(judge.bodies) <= in_flight
    row = summary_row(_status(judge, tmp_path, *flags).stdout)
    assert (row["answered"], row["refused"], row["missing"]) == (0, 0, 16)


def test_reasoning_effort_is_sent_and_keyed_only_when_set(
    judge: ReasoningJudge, tmp_path: Path
) -> None:
    done = _run(judge, tmp_path, "--max-tokens", "2000", "--reasoning-effort", "low")
    assert done.returncode == 0, done.stderr
    assert {b.get("reasoning_effort") for b in judge.bodies} == {"low"}
    # Another effort is another request: nothing of the first run is reused for it.
    row = summary_row(_status(judge, tmp_path, "--max-tokens", "2000").stdout)
    assert row["answered"] == 0
    row = summary_row(
        _status(judge, tmp_path, "--max-tokens", "2000", "--reasoning-effort", "low").stdout
    )
    assert row["answered"] == 16


def test_a_stale_token_parameter_costs_one_failed_request(
    judge: ReasoningJudge, tmp_path: Path
) -> None:
    assert _run(judge, tmp_path, "--max-tokens", "2000").returncode == 0
    judge.legacy = True  # the same URL and model now want max_tokens again
    failed, before = judge.failed, len(judge.bodies)
    again = _run(judge, tmp_path, "--max-tokens", "2000", "--limit", "8", "--concurrency", "1")
    assert again.returncode == 0, again.stderr
    assert judge.failed == failed + 1
    assert len(judge.bodies) - before == 17  # 16 answered, one refused and resent at once
    assert all("max_tokens" in b for b in judge.bodies[before + 1 :])
    assert f"endpoint: {MODEL} at 127.0.0.1:{judge.port}: max_tokens" in again.stdout


# --- the decision on bodies OpenAI documents (pure: no server) ------------------------------

SENT = {"model": MODEL, "temperature": 1.0, "max_completion_tokens": 2000, "n": 10}


def _decide(status: int, error: dict[str, Any], **sent: Any) -> Any:
    fact = response_fact(status, json.dumps({"error": error}).encode(), {})
    return decide(
        fact, History("http://127.0.0.1:9/v1/chat/completions", "K"), n=10, sent={**SENT, **sent}
    )


@pytest.mark.parametrize(
    ("status", "error", "sent", "action", "opening", "naming"),
    [
        pytest.param(
            400,
            {
                "message": "Unsupported value: 'reasoning_effort' does not support 'minimal' "
                "with this model. Supported values are: 'low', 'medium', and 'high'.",
                "type": "invalid_request_error",
                "param": "reasoning_effort",
                "code": "unsupported_value",
            },
            {"reasoning_effort": "minimal"},
            Action.STOP,
            '[sampling] reasoning_effort = "minimal" is refused by gpt-5-mini (unsupported_value: '
            "supported values are: 'low', 'medium', and 'high'): set reasoning_effort to a value",
            "",
            id="a-refused-reasoning-effort-names-its-key",
        ),
        pytest.param(
            404,
            {
                "message": "This model is only supported in v1/responses and not in "
                "v1/chat/completions.",
                "type": "invalid_request_error",
                "param": "model",
                "code": None,
            },
            {},
            Action.RESPONSES_API,
            "HTTP 404",
            "only supported in v1/responses",
            id="a-model-served-on-responses-only-switches-to-the-responses-api",
        ),
        pytest.param(
            400,
            {
                "message": "This model's maximum context length is 128000 tokens.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            },
            {},
            Action.REFUSE,
            "",
            "",
            id="a-failure-of-one-request-is-still-a-refusal",
        ),
    ],
)
def test_a_documented_error_body_is_decided_by_what_it_names(
    status: int,
    error: dict[str, Any],
    sent: dict[str, Any],
    action: Action,
    opening: str,
    naming: str,
) -> None:
    """What the run does with each error body OpenAI documents: ``action``, and a message that
    starts with ``opening`` and names ``naming`` (where given)."""
    decision = _decide(status, error, **sent)
    assert decision.action is action
    assert decision.message.startswith(opening)
    assert naming in decision.message
