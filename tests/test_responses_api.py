"""A study judged by a model that lives on OpenAI's Responses API only.

Two servers on 127.0.0.1: a plain aiohttp.web stub written here with OpenAI's bodies as its
reference gives them (chat completions answer 404 "This model is only supported in
v1/responses ..."; ``POST /v1/responses`` answers ``response`` objects with a ``reasoning``
item, a ``message`` item's ``output_text``, ``status: "incomplete"`` when ``max_output_tokens``
ran out, the usage under ``input_tokens`` / ``output_tokens`` and their details; it refuses an
unknown parameter such as ``n``, ``temperature`` and ``top_logprobs`` as a reasoning model
does, and a budget under 16), and the project's simulated judge (its ``responses_only`` model
names, its ``openai-responses`` profile, its Batch API). Each test drives the command line and
reads what a user reads: the run's lines, ``status``, the scores, ``answers --record``, and
what each server received.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import (
    POLL,
    UEQ,
    LoopbackApp,
    StudyFiles,
    run_cli,
    summary_row,
    ueq_flags,
)
from hypothesis import given
from hypothesis import strategies as st

from geval_async.scoring.scores.results import load_results
from geval_async.sim import SimServer, SimSettings
from geval_async.study.pricing import usd

MODEL = "gpt-5-codex"  # priced as gpt-5: 1.25 / 0.125 cached / 10.00 USD per 1M tokens
REASONING = 200  # reasoning tokens each answer spends before it rates
PROMPT, CACHED = 100, 40  # the input tokens each answer bills, and of them cached
KEY = {"OPENAI_API_KEY": "sk-test-responses"}
SUMMARY = "Is it a 5 out of 5? No: 2 slips in 3 sentences. Maybe a 4... I settle on my rating."
LOGPROBS = "message.output_text.logprobs"
# The rating token's logprobs as the Responses API gives them: 60 % on "2", 40 % on "3".
TOKENS = [
    {
        "token": "2",
        "logprob": math.log(0.6),
        "bytes": [50],
        "top_logprobs": [
            {"token": "2", "logprob": math.log(0.6), "bytes": [50]},
            {"token": "3", "logprob": math.log(0.4), "bytes": [51]},
        ],
    }
]
# What a create-response body may hold, as OpenAI's reference lists it.
PARAMETERS = {
    "model", "input", "instructions", "max_output_tokens", "temperature", "top_p",
    "top_logprobs", "include", "reasoning", "store", "prompt_cache_key", "metadata", "text",
    "truncation", "service_tier", "user", "stream", "tools", "tool_choice",
}  # fmt: skip


def _error(status: int, message: str, param: str | None, code: str | None) -> web.Response:
    body = {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    }
    return web.json_response(body, status=status)


class ResponsesOnlyJudge(LoopbackApp):
    """A reasoning model of the codex kind, on OpenAI's Responses API alone."""

    def __init__(self) -> None:
        super().__init__()
        self.chat = 0  # chat-completions requests (each refused with the 404)
        self.bodies: list[dict[str, Any]] = []  # Responses requests, as received
        self.statuses: Counter[int] = Counter()
        self.calls: Counter[str] = Counter()  # Responses requests per input
        self.ratings: dict[str, list[float]] = {}  # each input's ratings, in call order
        self.authorizations: Counter[str] = Counter()  # the Authorization headers received
        # False: a model of the gpt-4.1 kind on the same API (no reasoning; takes
        # temperature and top_logprobs, and gives logprobs where include names them).
        self.reasoning = True

    async def _chat(self, request: web.Request) -> web.Response:
        self.chat += 1
        return _error(
            404,
            "This model is only supported in v1/responses and not in v1/chat/completions.",
            "model",
            None,
        )

    async def _responses(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        self.authorizations[request.headers.get("Authorization", "")] += 1
        response = self.answer(body)
        self.statuses[response.status] += 1
        return response

    def answer(self, body: dict[str, Any]) -> web.Response:
        for name in body:
            if name not in PARAMETERS:
                return _error(400, f"Unknown parameter: '{name}'.", name, "unknown_parameter")
        for name in ("temperature", "top_p", "top_logprobs"):
            if name in body and self.reasoning:
                return _error(
                    400,
                    f"Unsupported parameter: '{name}' is not supported with this model.",
                    name,
                    "unsupported_parameter",
                )
        budget = body.get("max_output_tokens", 1 << 20)
        if budget < 16:
            return _error(
                400,
                "Invalid 'max_output_tokens': integer below minimum value. Expected a value "
                f">= 16, but got {budget} instead.",
                "max_output_tokens",
                "integer_below_min_value",
            )
        given = json.dumps(body["input"], sort_keys=True)
        call = self.calls[given]
        self.calls[given] += 1
        ident = hashlib.sha256(f"{given}|{call}".encode()).hexdigest()
        summary = []
        if (body.get("reasoning") or {}).get("summary"):
            summary = [{"type": "summary_text", "text": SUMMARY}]
        output: list[dict[str, Any]] = [
            {"id": f"rs_{ident[:32]}", "type": "reasoning", "summary": summary}
        ]
        if not self.reasoning:
            output, status, incomplete, spent = [], "completed", None, 1
            logprobs = TOKENS if LOGPROBS in body.get("include", ()) else []
            text = {"type": "output_text", "annotations": [], "logprobs": logprobs, "text": "2"}
            output.append(
                {
                    "id": f"msg_{ident[:32]}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [text],
                }
            )
        elif budget <= REASONING:  # the whole budget goes on reasoning: no message at all
            status, incomplete, spent = "incomplete", {"reason": "max_output_tokens"}, budget
        else:
            rating = 1 + int(ident[:8], 16) % 3  # within every UEQ criterion's scale
            self.ratings.setdefault(given, []).append(float(rating))
            status, incomplete, spent = "completed", None, REASONING + 1
            text = {"type": "output_text", "annotations": [], "logprobs": [], "text": str(rating)}
            output.append(
                {
                    "id": f"msg_{ident[:32]}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [text],
                }
            )
        return web.json_response(
            {
                "id": f"resp_{ident[:32]}",
                "object": "response",
                "created_at": 1764806400,
                "status": status,
                "error": None,
                "incomplete_details": incomplete,
                "instructions": None,
                "max_output_tokens": body.get("max_output_tokens"),
                "model": f"{MODEL}-2025-09-15",
                "output": output,
                "parallel_tool_calls": True,
                "previous_response_id": None,
                "reasoning": {"effort": "medium", "summary": None},
                "store": body.get("store", True),
                "temperature": 1.0,
                "text": {"format": {"type": "text"}},
                "tool_choice": "auto",
                "tools": [],
                "top_p": 1.0,
                "truncation": "disabled",
                "usage": {
                    "input_tokens": PROMPT,
                    "input_tokens_details": {"cached_tokens": CACHED},
                    "output_tokens": spent,
                    "output_tokens_details": {"reasoning_tokens": min(spent, REASONING)},
                    "total_tokens": PROMPT + spent,
                },
                "user": None,
                "metadata": {},
            }
        )

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/chat/completions", self._chat),
            web.post("/v1/responses", self._responses),
        ]


@pytest.fixture
def judge() -> Any:
    with ResponsesOnlyJudge() as server:
        yield server


def _flags(judge: ResponsesOnlyJudge, tmp_path: Path, *extra: str) -> list[str]:
    return ueq_flags(judge.base_url, tmp_path, MODEL, *extra)


def _run(judge: ResponsesOnlyJudge, tmp_path: Path, *extra: str) -> Any:
    return run_cli("run", *_flags(judge, tmp_path, *extra), "--quiet", env=KEY)


def _status(judge: ResponsesOnlyJudge, tmp_path: Path, *extra: str) -> Any:
    return run_cli("status", *_flags(judge, tmp_path, *extra), env=KEY)


ANSWERING = ("--max-tokens", "2000", "--reasoning-effort", "low")


def test_the_404_switches_to_the_responses_api_and_no_answer_is_lost(
    judge: ResponsesOnlyJudge, tmp_path: Path
) -> None:
    done = _run(judge, tmp_path, *ANSWERING)
    assert done.returncode == 0, done.stderr
    # The first wave was refused on chat completions (not billed) and resent at once there;
    # nothing else went to chat completions.
    assert 1 <= judge.chat <= 16
    # Every item's 10 draws, one request each, none sent twice: 16 items x 10.
    assert len(judge.bodies) == 160 and judge.statuses == Counter({200: 160})
    assert sorted(judge.calls.values()) == [10] * 16
    for body in judge.bodies:
        assert "n" not in body and "messages" not in body
        assert body["store"] is False
        assert body["max_output_tokens"] == 2000
        assert body["reasoning"] == {"effort": "low", "summary": "auto"}
        assert [item["role"] for item in body["input"]] == ["user"]
    # The ratings are exactly the server's: each item's draws are the answers it gave that
    # item's prompt (the draws of one item go out together, so they arrive in any order).
    results = load_results(
        UEQ, model=MODEL, limit=4, max_tokens=2000, reasoning_effort="low",
        cache=tmp_path / "cache", output=tmp_path / "o",
    )  # fmt: skip
    scored = Counter(tuple(sorted(score.ratings)) for score in results.scores)
    assert scored == Counter(tuple(sorted(r)) for r in judge.ratings.values())
    assert sum(scored.values()) == 16
    # The switch is said, remembered, and the spend read from the Responses usage.
    assert "served on the Responses API only" in done.stderr + done.stdout
    line = f"endpoint: {MODEL} at 127.0.0.1:{judge.port}: Responses API only (learned"
    assert line in done.stdout
    per_answer = ((PROMPT - CACHED) * 1.25 + CACHED * 0.125 + (REASONING + 1) * 10.00) / 1e6
    assert f"billed: {usd(160 * per_answer)}" in done.stdout
    status = _status(judge, tmp_path, *ANSWERING)
    assert line in status.stdout
    assert summary_row(status.stdout)["answered"] == 16

    # A second run sends nothing at all; a larger one goes to the Responses API from the start.
    chat, sent = judge.chat, len(judge.bodies)
    again = _run(judge, tmp_path, *ANSWERING)
    assert again.returncode == 0, again.stderr
    assert (judge.chat, len(judge.bodies)) == (chat, sent)
    more = _run(judge, tmp_path, *ANSWERING, "--limit", "8")
    assert more.returncode == 0, more.stderr
    assert (judge.chat, len(judge.bodies)) == (chat, sent + 160)

    # The reasoning summary is stored and shown, never read as the rating.
    story = run_cli(
        "answers", *_flags(judge, tmp_path, *ANSWERING), "--record", "u01-mLLM",
        "--criterion", "flu", env=KEY,
    )  # fmt: skip
    assert story.returncode == 0, story.stderr
    assert "reasoning (" in story.stdout and "I settle on my rating." in story.stdout
    assert "invalid" not in story.stdout.split("reasoning (")[1].split("\n")[0]
    # And in the HTML report's drill-down, collapsed above the answer it was read from.
    reported = run_cli("report", *_flags(judge, tmp_path, *ANSWERING), "--html", env=KEY)
    assert reported.returncode == 0, reported.stderr
    (page,) = (tmp_path / "out").glob("ueq*_report.html")
    html = page.read_text(encoding="utf-8")
    assert "I settle on my rating." in html
    # The API key went in each request's header only: no file and no line holds it.
    secret = KEY["OPENAI_API_KEY"]
    assert set(judge.authorizations) == {f"Bearer {secret}"}
    for shown in (done, again, more, story, reported, status):
        assert secret not in shown.stdout + shown.stderr
    held = [p for p in tmp_path.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert held == []


def test_a_budget_spent_on_reasoning_stops_with_the_line_to_raise_it(
    judge: ResponsesOnlyJudge, tmp_path: Path
) -> None:
    done = _run(judge, tmp_path, "--api", "responses", "--max-tokens", "100")
    assert done.returncode == 1
    assert (
        "stopped: the judge spent all of max_tokens (100) on reasoning and gave no rating: "
        "raise [sampling] max_tokens"
    ) in done.stderr
    assert judge.chat == 0  # the config chose the Responses API: chat completions never asked
    assert all(body["max_output_tokens"] == 100 for body in judge.bodies)
    row = summary_row(_status(judge, tmp_path, "--api", "responses", "--max-tokens", "100").stdout)
    assert (row["answered"], row["refused"], row["missing"]) == (0, 0, 16)


def test_a_tpm_limit_counts_a_request_as_the_one_answer_it_asks(
    judge: ResponsesOnlyJudge, tmp_path: Path
) -> None:
    """A request on the Responses API asks one answer's max_output_tokens, however many draws
    the item has: a tpm limit below n x max_tokens but above one answer's lets the study run."""
    done = _run(judge, tmp_path, "--api", "responses", *ANSWERING)
    assert done.returncode == 0, done.stderr
    sent = len(judge.bodies)
    # 10 x 2000 tokens would be over 15,000; a request asks 2000 and its prompt.
    again = _run(judge, tmp_path, "--api", "responses", *ANSWERING, "--tpm", "15000")
    assert again.returncode == 0, again.stderr
    assert len(judge.bodies) == sent
    dry = run_cli("run", *_flags(judge, tmp_path, "--api", "responses", *ANSWERING),
                  "--dry-run", "--limit", "8", "--tpm", "15000", env=KEY)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "requests to send: 160\n" in dry.stdout  # a request a draw: the count is exact
    # A limit below one answer's budget can still never let a request through.
    refused = _run(judge, tmp_path, "--api", "responses", *ANSWERING, "--tpm", "2000")
    assert refused.returncode == 2
    assert "more than the tpm limit (2000): raise --tpm or lower max_tokens" in refused.stderr
    assert len(judge.bodies) == sent


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (
            ("--temperature", "0.7"),
            "stopped: [sampling] temperature = 0.7 is refused by gpt-5-codex "
            "(unsupported_parameter: Unsupported parameter: 'temperature' is not supported with "
            "this model.): remove temperature (the default)",
        ),
        (
            ("--mode", "logprobs"),
            'stopped: [sampling] mode = "logprobs" is refused by gpt-5-codex '
            "(unsupported_parameter: Unsupported parameter: 'top_logprobs' is not supported with "
            'this model.): set mode = "samples"',
        ),
        (
            ("--max-tokens", "5"),
            "stopped: [sampling] max_tokens = 5 is refused by gpt-5-codex (integer_below_min_value",
        ),
    ],
    ids=["temperature", "logprobs", "budget-under-16"],
)
def test_a_refused_setting_stops_at_once_and_stores_nothing(
    judge: ResponsesOnlyJudge, tmp_path: Path, extra: tuple[str, ...], line: str
) -> None:
    flags = ("--api", "responses", "--max-tokens", "2000", *extra, "--concurrency", "2")
    done = _run(judge, tmp_path, *flags)
    assert done.returncode == 1
    assert line in done.stderr
    assert judge.statuses[200] == 0 and len(judge.bodies) <= 2  # the requests in flight
    row = summary_row(_status(judge, tmp_path, *flags).stdout)
    assert (row["answered"], row["refused"], row["missing"]) == (0, 0, 16)


def test_logprobs_mode_reads_the_output_texts_logprobs(
    judge: ResponsesOnlyJudge, tmp_path: Path
) -> None:
    judge.reasoning = False
    flags = ("--api", "responses", "--mode", "logprobs", "--max-tokens", "16")
    done = _run(judge, tmp_path, *flags)
    assert done.returncode == 0, done.stderr
    assert len(judge.bodies) == 16  # logprobs mode: one answer an item
    for body in judge.bodies:
        assert body["top_logprobs"] == 20 and body["include"] == [LOGPROBS]
    results = load_results(
        UEQ, model=MODEL, limit=4, max_tokens=16, mode="logprobs",
        cache=tmp_path / "cache", output=tmp_path / "o",
    )  # fmt: skip
    assert [s.weighted_score for s in results.scores] == [pytest.approx(2.4)] * 16


def test_logprobs_the_endpoint_leaves_empty_stop_the_run(
    judge: ResponsesOnlyJudge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge.reasoning = False
    monkeypatch.setattr(judge, "answer", _without_include(judge.answer))
    flags = ("--api", "responses", "--mode", "logprobs", "--max-tokens", "16")
    done = _run(judge, tmp_path, *flags, "--concurrency", "1")
    assert done.returncode == 1
    assert f'[sampling] mode = "logprobs": {MODEL} answered without logprobs' in done.stderr
    assert len(judge.bodies) == 1
    row = summary_row(_status(judge, tmp_path, *flags).stdout)
    assert row["answered"] == 0


def _without_include(answer: Any) -> Any:
    """The endpoint as one that takes top_logprobs but drops ``include`` (OpenAI's answer to
    top_logprobs alone: an empty list)."""

    def dropped(body: dict[str, Any]) -> web.Response:
        return answer({k: v for k, v in body.items() if k != "include"})

    return dropped


# --- the simulated judge's Responses API ------------------------------------------------------


def _server_ratings(sim: SimServer) -> Counter[tuple[float, ...]]:
    """Each item's ratings as the server gave them (an item's draws go out together, so they
    arrive in any order: compared as sorted)."""
    return Counter(tuple(sorted(float(r) for r in given)) for given in sim.stats.ratings.values())


def _scored(scores: Any) -> Counter[tuple[float, ...]]:
    return Counter(tuple(sorted(s.ratings)) for s in scores)


def test_the_sims_responses_only_model_is_judged_draw_by_draw(study: StudyFiles) -> None:
    with SimServer(SimSettings(profile="openai-responses")) as sim:
        study.write_config(
            sim.base_url,
            sampling={"n": 10, "max_tokens": 2000, "reasoning_effort": "low"},
        )
        done = run_cli("run", str(study.config), "--quiet")
        assert done.returncode == 0, done.stderr
        items = 2 * study.n_records
        refused_on_chat = sim.stats.by_status[404]
        assert 1 <= refused_on_chat <= 4  # the first wave (concurrency 4)
        assert sim.stats.by_status[200] == 10 * items  # one request a draw, none twice
        results = load_results(study.config)
        assert len(results.scores) == items
        assert all(len(s.ratings) == 10 for s in results.scores)
        assert _scored(results.scores) == _server_ratings(sim)
        # A second run sends nothing at all: not even the chat request the switch was learned
        # from.
        received = sim.stats.received
        again = run_cli("run", str(study.config), "--quiet")
        assert again.returncode == 0, again.stderr
        assert sim.stats.received == received
        # The dry run of the same study says the API and sends nothing.
        dry = run_cli("run", str(study.config), "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "is judged on the Responses API" in dry.stdout
        assert sim.stats.received == received


def test_logprobs_on_the_responses_api_score_as_on_chat_completions(
    study: StudyFiles, sim: SimServer
) -> None:
    sampling = {"mode": "logprobs", "max_tokens": 16}
    study.write_config(sim.base_url, sampling=sampling, judge={"api": "responses"})
    done = run_cli("run", str(study.config), "--quiet")
    assert done.returncode == 0, done.stderr
    assert sim.stats.by_status == Counter({200: 2 * study.n_records})
    over_responses = {
        (s.record_id, s.criterion): s.weighted_score for s in load_results(study.config).scores
    }
    # The same study is the same requests whichever API carried them: a chat run sends nothing.
    study.write_config(sim.base_url, sampling=sampling)
    again = run_cli("run", str(study.config), "--quiet")
    assert again.returncode == 0, again.stderr
    assert sim.stats.received == 2 * study.n_records
    # And chat completions' own answers, into another cache, give the same weighted scores.
    study.write_config(sim.base_url, sampling=sampling, cache={"path": "chat-cache"})
    assert run_cli("run", str(study.config), "--quiet").returncode == 0
    over_chat = {
        (s.record_id, s.criterion): s.weighted_score for s in load_results(study.config).scores
    }
    assert over_chat == over_responses and len(over_chat) == 2 * study.n_records
    assert all(score is not None for score in over_chat.values())


def test_the_batch_api_takes_responses_lines(study: StudyFiles) -> None:
    with SimServer(SimSettings(responses_only="sim-judge")) as sim:
        study.write_config(sim.base_url, sampling={"n": 3, "max_tokens": 16})
        done = run_cli("run", str(study.config), "--batch", "--quiet", *POLL)
        assert done.returncode == 0, done.stdout + done.stderr
        items = 2 * study.n_records
        results = load_results(study.config)
        assert len(results.scores) == items
        assert all(len(s.ratings) == 3 for s in results.scores)
        assert _scored(results.scores) == _server_ratings(sim)
        # The first batch's chat lines were refused (404, nothing stored, nothing billed); then
        # each draw a line of its own on /v1/responses, none sent twice.
        assert sim.stats.samples == 3 * items
        assert sim.stats.batch_lines == items + 3 * items
        assert sorted(Counter(sim.stats.batch_requests.values()).items()) == [
            (1, items),
            (3, items),
        ]
        status = run_cli("status", str(study.config))
        assert "Responses API only (learned" in status.stdout


def test_evaluation_steps_and_a_panel_judge_go_to_the_responses_api(study: StudyFiles) -> None:
    with (
        SimServer(SimSettings(responses_only="sim-gpt")) as gpt,
        SimServer(SimSettings()) as local,
    ):
        criterion = {
            "name": "clar",
            "display_name": "Clarity",
            "task": "You will be given a short text.\n\nYour task is to rate it on one metric.",
            "definition": "how easy the text is to follow, sentence after sentence.",
            "steps": "generate",
            "scale": [1, 5],
            "fields": ["text"],
        }
        judges = {
            "gpt": {"model": "sim-gpt", "base_url": gpt.base_url},
            "local": {"model": "sim-local", "base_url": local.base_url},
        }
        study.write_config("", criteria=[criterion], judges=judges, sampling={"max_tokens": 16})
        done = run_cli("run", str(study.config), "--quiet")
        assert done.returncode == 0, done.stdout + done.stderr
        # The responses-only judge: its steps, then every item's 3 draws one request each, on
        # the Responses API; chat completions refused only until the switch was learned.
        assert 1 <= gpt.stats.by_status[404] <= 4
        assert gpt.stats.by_status[200] == 1 + 3 * study.n_records
        assert local.stats.by_status == Counter({200: 1 + study.n_records})
        listed = run_cli("steps", str(study.config), "--judge", "gpt")
        assert listed.returncode == 0, listed.stderr
        assert "generated by sim-gpt" in listed.stdout and "  1. " in listed.stdout
        status = run_cli("status", str(study.config))
        assert status.returncode == 0, status.stderr
        assert "sim-gpt at 127.0.0.1" in status.stdout and "Responses API only" in status.stdout
        # --api names one judge's endpoint: on a panel, only with the judge it is for.
        refused = run_cli("run", str(study.config), "--api", "responses")
        assert refused.returncode == 2
        assert "--api on a panel config" in refused.stderr and "--judge NAME" in refused.stderr


def test_store_and_api_are_read_like_every_judge_key(study: StudyFiles, sim: SimServer) -> None:
    from geval_async.study.config import load_config

    study.write_config(sim.base_url, judge={"api": "responses", "store": True})
    judge = load_config(study.config).judge
    assert (judge.api, judge.store) == ("responses", True)
    assert judge.responses_url == f"{sim.base_url}/responses"
    for bad, line in [
        ({"api": "completions"}, "'api' must be one of chat, responses, not 'completions'"),
        ({"store": "no"}, "'store' must be"),
    ]:
        study.write_config(sim.base_url, judge=bad)
        done = run_cli("run", str(study.config))
        assert done.returncode == 2
        assert line in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert sim.stats.received == 0


def test_store_true_is_sent_as_written_and_keys_the_same_study(
    judge: ResponsesOnlyJudge, study: StudyFiles
) -> None:
    """``store = true`` lets OpenAI keep the answers; it cannot change them, so the study is
    the same study: the answers it stored serve a run that sends ``store: false``."""
    keys = {"model": MODEL, "base_url": judge.base_url, "api": "responses"}
    sampling = {"n": 2, "max_tokens": 2000, "reasoning_effort": "low"}
    study.write_config(judge.base_url, judge={**keys, "store": True}, sampling=sampling)
    done = run_cli("run", str(study.config), "--quiet", env=KEY)
    assert done.returncode == 0, done.stderr
    assert len(judge.bodies) == 2 * 2 * study.n_records
    assert all(body["store"] is True for body in judge.bodies)
    study.write_config(judge.base_url, judge=keys, sampling=sampling)
    again = run_cli("run", str(study.config), "--quiet", env=KEY)
    assert again.returncode == 0, again.stderr
    assert len(judge.bodies) == 2 * 2 * study.n_records


def test_azure_serves_the_responses_api_on_its_v1_surface(
    study: StudyFiles, sim: SimServer
) -> None:
    azure = {
        "provider": "azure",
        "base_url": None,
        "model": None,
        "azure_endpoint": sim.root_url,
        "deployment": "sim-judge",
        "api_version": "2024-06-01",
        "api": "responses",
    }
    study.write_config(sim.base_url, judge=azure, sampling={"max_tokens": 16})
    done = run_cli("run", str(study.config), "--quiet", env={"AZURE_OPENAI_API_KEY": "k"})
    assert done.returncode == 0, done.stderr
    # No 404 on the way: every request went to /openai/v1/responses, one a draw.
    assert sim.stats.by_status == Counter({200: 3 * 2 * study.n_records})
    assert _scored(load_results(study.config).scores) == _server_ratings(sim)


# --- the one reader of an answer body (pure) -------------------------------------------------

_text = st.text(alphabet="0123456789 abc.:/[]*", max_size=30)


@given(
    summaries=st.lists(_text, max_size=3),
    parts=st.lists(_text, min_size=1, max_size=3),
    cut=st.booleans(),
)
def test_a_responses_body_reads_as_its_output_text_never_its_reasoning(
    summaries: list[str], parts: list[str], cut: bool
) -> None:
    """Whatever numbers a reasoning summary holds, the answer is the message's output text;
    the summary is kept beside it as the reasoning, and a cut-off response reads as one."""
    from geval_async.study.responses_api import answer_choices

    body = {
        "object": "response",
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "output": [
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": t} for t in summaries],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": t, "logprobs": []} for t in parts],
            },
        ],
    }
    (choice,) = answer_choices(json.loads(json.dumps(body)))
    assert choice["message"]["content"] == "".join(parts)
    assert choice["message"].get("reasoning") == ("\n\n".join(summaries) if summaries else None)
    assert choice["finish_reason"] == ("length" if cut else "stop")
    assert "logprobs" not in choice  # none were given: the run says so in logprobs mode


def test_a_refused_reasoning_summary_is_dropped_not_a_stop(study: StudyFiles) -> None:
    settings = SimSettings(profile="openai-responses", refuse_summary=True)
    with SimServer(settings) as sim:
        study.write_config(
            sim.base_url,
            sampling={"n": 2, "max_tokens": 2000, "reasoning_effort": "low"},
            judge={"api": "responses"},
        )
        done = run_cli("run", str(study.config), "--quiet")
        assert done.returncode == 0, done.stderr
        assert "refuses reasoning.summary" in done.stderr
        # The first wave's 400s (not billed), then every draw once, without the summary.
        assert 1 <= sim.stats.by_status[400] <= 4
        assert sim.stats.by_status[200] == 2 * 2 * study.n_records
        status = run_cli("status", str(study.config))
        assert "no reasoning.summary" in status.stdout
        # Learned for later runs: a larger study asks no summary from its first request.
        refused = sim.stats.by_status[400]
        study.write_config(
            sim.base_url,
            sampling={"n": 3, "max_tokens": 2000, "reasoning_effort": "low"},
            judge={"api": "responses"},
        )
        assert run_cli("run", str(study.config), "--quiet").returncode == 0
        assert sim.stats.by_status[400] == refused


def test_batch_files_carry_responses_lines_and_openais_output_bodies(tmp_path: Path) -> None:
    """``batch export`` writes a /v1/responses line a draw; the output file an engine returns
    for them, each body as OpenAI writes it, is stored by ``batch import`` and scored."""
    judge = ResponsesOnlyJudge()  # its answers only: no server needed to write an output file
    flags = ueq_flags("http://127.0.0.1:9/v1", tmp_path, MODEL, "--api", "responses", *ANSWERING)
    exported = run_cli("batch", "export", *flags, str(tmp_path / "in.jsonl"), env=KEY)
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in (tmp_path / "in.jsonl").read_text().splitlines()]
    assert len(lines) == 160  # 16 items x 10 draws, one line each
    assert {line["url"] for line in lines} == {"/v1/responses"}
    assert all("n" not in line["body"] and line["body"]["store"] is False for line in lines)
    outputs = []
    for line in lines:
        response = judge.answer(line["body"])
        assert response.status == 200
        outputs.append(
            {
                "id": f"batch_req_{line['custom_id'][-12:]}",
                "custom_id": line["custom_id"],
                "response": {
                    "status_code": 200,
                    "request_id": "req_1",
                    "body": json.loads(response.body),  # type: ignore[arg-type]
                },
                "error": None,
            }
        )
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(o) + "\n" for o in outputs))
    imported = run_cli("batch", "import", *flags, str(tmp_path / "out.jsonl"), env=KEY)
    assert imported.returncode == 0, imported.stderr
    results = load_results(
        UEQ, model=MODEL, limit=4, max_tokens=2000, reasoning_effort="low",
        cache=tmp_path / "cache", output=tmp_path / "o",
    )  # fmt: skip
    assert Counter(s.ratings for s in results.scores) == Counter(
        tuple(r) for r in judge.ratings.values()
    )
    assert all(len(s.ratings) == 10 for s in results.scores) and len(results.scores) == 16
