"""The simulated judge's model profiles answer as the endpoints they stand for, over real HTTP.

``openai-reasoning`` refuses what OpenAI's gpt-5 / o-series refuse, in OpenAI's words, and
spends hidden reasoning tokens out of ``max_completion_tokens``; ``deepseek-reasoner`` and
``think-tags`` put reasoning with misleading numbers before the rating; ``anthropic-compat``
takes only ``n = 1`` and ignores logprobs and seed. It also writes evaluation steps when asked.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import aiohttp
import openai
import pytest
from conftest import sim_command

from geval_async.sim import SimServer, SimSettings, ratings

PROMPT = "Evaluate coherence.\nText: {text}\nRate the coherence (1-5). Score:"


def reasoning_request(**fields: Any) -> dict[str, Any]:
    return {
        "model": "gpt-5-mini",
        "messages": [{"role": "user", "content": PROMPT.format(text="The cat sat on the mat.")}],
        **fields,
    }


@pytest.fixture
def srv() -> Iterator[SimServer]:
    with SimServer(SimSettings()) as server:
        yield server


async def post(url: str, body: Any) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=body) as resp,
    ):
        return resp.status, json.loads(await resp.read())


def first_number(text: str) -> int:
    """The rating in an answer written in the default styles ("4", "Score: 4", "4/5")."""
    numbers = re.findall(r"\d+", text)
    assert numbers, text
    return int(numbers[0])


def disagrees(reasoning: str, rating: int | None) -> bool:
    """Whether the reasoning's first number is another rating, and the rating appears in it
    only as the scale's top ("out of 5", "1 to 5")."""
    numbers = [int(n) for n in re.findall(r"\d+", reasoning)]
    return bool(numbers) and numbers[0] != rating and (rating == 5 or rating not in numbers)


# -- openai-reasoning ----------------------------------------------------------------------


async def test_openai_reasoning_refuses_max_tokens_in_openais_words(srv: SimServer) -> None:
    srv.settings.profile = "openai-reasoning"
    status, body = await post(f"{srv.base_url}/chat/completions", reasoning_request(max_tokens=5))
    assert status == 400
    assert body == {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    }
    assert srv.stats.by_status[400] == 1 and not srv.stats.answered


@pytest.mark.parametrize(
    ("name", "value", "shown"), [("temperature", 0.7, "0.7"), ("top_p", 0, "0")]
)
async def test_openai_reasoning_takes_only_the_default_sampling(
    srv: SimServer, name: str, value: float, shown: str
) -> None:
    srv.settings.profile = "openai-reasoning"
    fields = {name: value, "max_completion_tokens": 2000}
    status, body = await post(f"{srv.base_url}/chat/completions", reasoning_request(**fields))
    assert status == 400
    assert body["error"] == {
        "message": f"Unsupported value: '{name}' does not support {shown} with this model. "
        "Only the default (1) value is supported.",
        "type": "invalid_request_error",
        "param": name,
        "code": "unsupported_value",
    }
    fine = {name: 1, "max_completion_tokens": 2000}
    assert (await post(f"{srv.base_url}/chat/completions", reasoning_request(**fine)))[0] == 200


async def test_openai_reasoning_forbids_logprobs(srv: SimServer) -> None:
    srv.settings.profile = "openai-reasoning"
    fields = {"logprobs": True, "top_logprobs": 5, "max_completion_tokens": 2000}
    status, body = await post(f"{srv.base_url}/chat/completions", reasoning_request(**fields))
    assert status == 403
    assert body["error"]["message"] == "You are not allowed to request logprobs from this model"


async def test_openai_reasoning_accepts_the_documented_efforts_only(srv: SimServer) -> None:
    srv.settings.profile = "openai-reasoning"
    url = f"{srv.base_url}/chat/completions"
    for effort in ("none", "minimal", "low", "medium", "high", "xhigh"):
        fields = {"reasoning_effort": effort, "max_completion_tokens": 9000}
        assert (await post(url, reasoning_request(**fields)))[0] == 200, effort
    status, body = await post(url, reasoning_request(reasoning_effort="extreme"))
    assert status == 400
    assert (body["error"]["param"], body["error"]["code"]) == ("reasoning_effort", "invalid_value")


def test_openai_reasoning_spends_the_budget_on_reasoning_first(srv: SimServer) -> None:
    srv.settings.profile = "openai-reasoning"
    messages = reasoning_request()["messages"]
    with openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0) as sdk:
        starved = sdk.chat.completions.create(
            model="gpt-5-mini", messages=messages, max_completion_tokens=5, n=3
        )
        enough = sdk.chat.completions.create(
            model="gpt-5-mini",
            messages=messages,
            max_completion_tokens=2000,
            reasoning_effort="low",
            n=3,
        )
    # Too small a budget: every choice empty, cut off, and billed for the whole budget.
    assert [(c.message.content, c.finish_reason) for c in starved.choices] == [("", "length")] * 3
    assert starved.usage is not None and starved.usage.completion_tokens == 15
    details = starved.usage.completion_tokens_details
    assert details is not None and details.reasoning_tokens == 15
    # Enough budget: the rating in the content, the reasoning counted in completion_tokens.
    assert enough.usage is not None and enough.usage.completion_tokens_details is not None
    spent = enough.usage.completion_tokens_details.reasoning_tokens
    assert spent is not None and 3 * 64 <= spent < 3 * 300
    assert enough.usage.completion_tokens > spent
    body = reasoning_request(max_completion_tokens=2000, reasoning_effort="low", n=3)
    given = [first_number(c.message.content or "") for c in enough.choices]
    assert given == ratings(body, srv.settings)
    assert all(c.finish_reason == "stop" for c in enough.choices)


async def test_higher_effort_spends_more_reasoning(srv: SimServer) -> None:
    srv.settings.profile = "openai-reasoning"
    spent = {}
    for effort in ("low", "high"):
        body = reasoning_request(reasoning_effort=effort, max_completion_tokens=9000, n=8)
        status, answer = await post(f"{srv.base_url}/chat/completions", body)
        assert status == 200
        spent[effort] = answer["usage"]["completion_tokens_details"]["reasoning_tokens"]
    assert spent["high"] > 8 * 300 > spent["low"]


# -- openai-responses ----------------------------------------------------------------------

RESPONSES_ONLY = "This model is only supported in v1/responses and not in v1/chat/completions."


def test_openai_responses_answers_on_the_responses_api_in_openais_shapes(srv: SimServer) -> None:
    srv.settings.profile = "openai-responses"
    text = PROMPT.format(text="The cat sat on the mat.")
    asked = [{"role": "user", "content": text}]
    with openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0) as sdk:
        with pytest.raises(openai.NotFoundError) as on_chat:
            sdk.chat.completions.create(model="gpt-5-codex", messages=asked)  # type: ignore[arg-type]
        assert RESPONSES_ONLY in str(on_chat.value)
        # The Responses API takes no n: a draw is a request.
        with pytest.raises(openai.BadRequestError) as with_n:
            sdk.responses.create(model="gpt-5-codex", input=text, extra_body={"n": 2})
        assert (with_n.value.param, with_n.value.code) == ("n", "unknown_parameter")
        with pytest.raises(openai.BadRequestError) as warm:
            sdk.responses.create(
                model="gpt-5-codex", input=text, temperature=0.5, max_output_tokens=2000
            )
        assert (warm.value.param, warm.value.code) == ("temperature", "unsupported_parameter")
        assert not srv.stats.answered
        answer = sdk.responses.create(
            model="gpt-5-codex",
            input=asked,  # type: ignore[arg-type]
            max_output_tokens=2000,
            reasoning={"effort": "low", "summary": "auto"},
            store=False,
        )
        starved = sdk.responses.create(
            model="gpt-5-codex",
            input=asked,
            max_output_tokens=16,
            reasoning={"effort": "high"},  # type: ignore[arg-type]
        )
    # The reasoning first, its summary given as asked; then the message whose output text
    # holds the rating the server has on record.
    assert answer.status == "completed" and answer.store is False
    assert [item.type for item in answer.output] == ["reasoning", "message"]
    summary = answer.output[0].summary  # type: ignore[union-attr]
    assert summary and summary[0].text
    rating = first_number(answer.output_text)
    usage = answer.usage
    assert usage is not None and usage.input_tokens > 0
    assert usage.input_tokens_details.cached_tokens == 0  # the prompt cache is off
    assert 0 < usage.output_tokens_details.reasoning_tokens < usage.output_tokens
    # A budget spent on reasoning: incomplete, for max_output_tokens, and no message at all.
    assert starved.status == "incomplete"
    assert starved.incomplete_details is not None
    assert starved.incomplete_details.reason == "max_output_tokens"
    assert [item.type for item in starved.output] == ["reasoning"]
    # On record: the rating the answer gave, and none for the answer that never began.
    assert [r for given in srv.stats.ratings.values() for r in given] == [rating, None]


async def test_the_sim_command_serves_a_named_model_on_the_responses_api_only() -> None:
    """``geval-async sim --responses-only NAME``: chat completions refuse NAME with OpenAI's
    404 and answer every other model; the Responses API answers NAME."""
    async with sim_command("--responses-only", "gpt-5-codex") as base_url:
        chat = f"{base_url}/chat/completions"
        status, refused = await post(chat, reasoning_request(model="gpt-5-codex"))
        assert status == 404 and refused["error"]["message"] == RESPONSES_ONLY
        assert (await post(chat, reasoning_request(model="sim-judge")))[0] == 200
        asked = {"model": "gpt-5-codex", "input": reasoning_request()["messages"]}
        status, answer = await post(f"{base_url}/responses", asked)
        assert status == 200 and answer["object"] == "response"
        status, with_n = await post(f"{base_url}/responses", {**asked, "n": 3})
        assert status == 400 and with_n["error"]["param"] == "n"


# -- reasoning before the rating -----------------------------------------------------------


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_deepseek_reasoner_reasons_in_its_own_field(srv: SimServer, field: str) -> None:
    srv.settings.profile, srv.settings.reasoning_field = "deepseek-reasoner", field
    body = reasoning_request(model="deepseek-reasoner", max_tokens=2000, n=10, temperature=1.0)
    status, answer = await post(f"{srv.base_url}/chat/completions", body)
    assert status == 200
    given = ratings(body, srv.settings)
    assert [first_number(c["message"]["content"]) for c in answer["choices"]] == given
    for choice, rating in zip(answer["choices"], given, strict=True):
        reasoning = choice["message"][field]
        assert disagrees(reasoning, rating), reasoning
    usage = answer["usage"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] > 0
    logprobs = {**body, "logprobs": True}
    assert (await post(f"{srv.base_url}/chat/completions", logprobs))[0] == 400


async def test_think_tags_put_reasoning_before_the_rating(srv: SimServer) -> None:
    srv.settings.profile = "think-tags"
    body = reasoning_request(model="qwen3", max_tokens=2000, n=40, temperature=1.0)
    status, answer = await post(f"{srv.base_url}/chat/completions", body)
    assert status == 200
    texts = [c["message"]["content"] for c in answer["choices"]]
    tags = {re.match(r"<(think|thinking)>\n", t).group(1) for t in texts}  # type: ignore[union-attr]
    assert tags == {"think", "thinking"}
    given = ratings(body, srv.settings)
    for text, rating in zip(texts, given, strict=True):
        reasoning, after = re.split(r"</think(?:ing)?>\n\n", text)
        assert first_number(after) == rating
        assert disagrees(reasoning, rating), reasoning


async def test_think_tags_cut_off_inside_the_reasoning(srv: SimServer) -> None:
    srv.settings.profile, srv.settings.think_cut_off = "think-tags", 1.0
    body = reasoning_request(max_tokens=2000, n=3)
    status, answer = await post(f"{srv.base_url}/chat/completions", body)
    assert status == 200
    for choice in answer["choices"]:
        assert choice["finish_reason"] == "length"
        assert choice["message"]["content"].startswith("<think")
        assert "</think" not in choice["message"]["content"]
    srv.settings.think_cut_off = 0.0
    status, small = await post(f"{srv.base_url}/chat/completions", {**body, "max_tokens": 5})
    assert [c["finish_reason"] for c in small["choices"]] == ["length"] * 3


# -- anthropic-compat ----------------------------------------------------------------------


async def test_anthropic_compat_takes_n_of_one_and_ignores_logprobs_and_seed(
    srv: SimServer,
) -> None:
    srv.settings.profile = "anthropic-compat"
    url = f"{srv.base_url}/chat/completions"
    status, body = await post(url, reasoning_request(model="claude-sonnet-4-5", n=2))
    assert status == 400
    assert body["error"]["param"] == "n" and body["error"]["type"] == "invalid_request_error"
    status, answer = await post(url, reasoning_request(logprobs=True, top_logprobs=5, seed=1))
    assert status == 200
    assert answer["choices"][0]["logprobs"] is None
    # The seed changes nothing, but every call is a fresh sample (temperature 1).
    given = []
    for seed in range(12):
        status, answer = await post(url, reasoning_request(seed=seed, temperature=1.0))
        given.append(first_number(answer["choices"][0]["message"]["content"]))
    assert len(set(given)) > 1
    recorded = [r for rs in srv.stats.ratings.values() for r in rs]
    assert sorted(recorded[1:]) == sorted(given)


# -- the default stays as it was, and every rating given is on record ----------------------


async def test_default_ratings_are_on_record(srv: SimServer) -> None:
    body = reasoning_request(model="sim-judge", max_tokens=8, n=5, seed=3)
    raw = json.dumps(body).encode()
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{srv.base_url}/chat/completions", data=raw) as resp,
    ):
        answer = await resp.json()
    digest = hashlib.sha256(raw).hexdigest()
    shown = [first_number(c["message"]["content"]) for c in answer["choices"]]
    assert srv.stats.ratings[digest] == shown == ratings(body, srv.settings)
    assert "completion_tokens_details" not in answer["usage"]
    assert set(answer["choices"][0]["message"]) == {"role", "content", "refusal"}


def test_unknown_profile_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="unknown profile 'o9'; known: default, openai-reasoning"):
        SimServer(SimSettings(profile="o9")).start()
    done = subprocess.run(
        [sys.executable, "-m", "geval_async", "sim", "--profile", "o9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--profile: invalid choice: 'o9'" in done.stderr


# -- evaluation steps ----------------------------------------------------------------------

STEPS_PROMPT = (
    "You will be given one summary written for a news article.\n\n"
    "Your task is to rate the summary on one metric.\n\n"
    "Evaluation Criteria:\n\n"
    "Coherence (1-5) - the collective quality of all sentences.\n\n"
    "Evaluation Steps:\n"
)


async def test_a_prompt_ending_in_evaluation_steps_gets_numbered_steps(srv: SimServer) -> None:
    url = f"{srv.base_url}/chat/completions"
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": STEPS_PROMPT}]}
    body["temperature"] = 0
    first, again = await post(url, body), await post(url, body)
    steps = first[1]["choices"][0]["message"]["content"]
    assert steps == again[1]["choices"][0]["message"]["content"]
    lines = steps.splitlines()
    assert 3 <= len(lines) <= 5
    assert [line.split(".")[0] for line in lines] == [str(i) for i in range(1, len(lines) + 1)]
    assert lines[0].startswith("1. Read the news article")
    assert "coherence" in lines[-1] and "1 to 5" in lines[-1]
    assert srv.stats.steps == 2 and list(srv.stats.ratings.values()) == [[None, None]]
    # The form-filling prompt holds the steps and the rating form: it is rated.
    form = STEPS_PROMPT + steps + "\n\nEvaluation Form (scores ONLY):\n\n- Coherence:"
    status, rated = await post(url, {**body, "messages": [{"role": "user", "content": form}]})
    assert status == 200 and 1 <= first_number(rated["choices"][0]["message"]["content"]) <= 5
    assert srv.stats.steps == 2


async def test_think_tags_in_logprobs_mode_give_the_rating_token_after_the_reasoning(
    srv: SimServer,
) -> None:
    srv.settings.profile = "think-tags"
    body = reasoning_request(max_tokens=2000, logprobs=True, top_logprobs=5, temperature=0)
    status, answer = await post(f"{srv.base_url}/chat/completions", body)
    assert status == 200
    tokens = answer["choices"][0]["logprobs"]["content"]
    assert tokens[0]["token"] == "<think>"
    end = [t["token"] for t in tokens].index("</think>")
    rating = tokens[end + 2]
    assert rating["token"].strip().isdigit() and len(rating["top_logprobs"]) == 5
    assert [int(rating["token"])] == ratings(body, srv.settings)
    reasoning = "".join(t["token"] for t in tokens[1:end])
    assert disagrees(reasoning, int(rating["token"])), reasoning


async def test_stats_and_settings_endpoints_know_the_profiles(srv: SimServer) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{srv.root_url}/sim/settings", json={"profile": "o9"}) as resp:
            assert resp.status == 400
            assert "unknown profile 'o9'" in (await resp.json())["error"]["message"]
        async with session.post(
            f"{srv.root_url}/sim/settings", json={"profile": "think-tags"}
        ) as resp:
            assert resp.status == 200 and srv.settings.profile == "think-tags"
    body = reasoning_request(max_tokens=2000, n=2)
    raw = json.dumps(body).encode()
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{srv.base_url}/chat/completions", data=raw) as resp,
    ):
        assert resp.status == 200
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{srv.root_url}/sim/stats") as resp:
            assert "ratings" not in await resp.json()
        async with session.get(f"{srv.root_url}/sim/stats?ratings=1") as resp:
            shown = (await resp.json())["ratings"]
    assert shown == {hashlib.sha256(raw).hexdigest(): ratings(body, srv.settings)}


def test_a_batch_line_is_refused_as_online(srv: SimServer) -> None:
    srv.settings.profile = "openai-reasoning"
    lines = [
        {"custom_id": name, "method": "POST", "url": "/v1/chat/completions", "body": body}
        for name, body in (
            ("old", reasoning_request(max_tokens=5)),
            ("new", reasoning_request(max_completion_tokens=2000)),
        )
    ]
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    with openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0) as sdk:
        uploaded = sdk.files.create(file=("in.jsonl", content), purpose="batch")
        batch = sdk.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        done = sdk.batches.retrieve(batch.id)
        assert done.status == "completed" and done.error_file_id and done.output_file_id
        errors = [json.loads(x) for x in sdk.files.content(done.error_file_id).text.splitlines()]
        output = [json.loads(x) for x in sdk.files.content(done.output_file_id).text.splitlines()]
    assert [e["custom_id"] for e in errors] == ["old"]
    response = errors[0]["response"]
    assert response["status_code"] == 400
    assert response["body"]["error"]["code"] == "unsupported_parameter"
    answer = output[0]["response"]["body"]
    assert answer["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0


@pytest.mark.parametrize("profile", ["openai-reasoning", "deepseek-reasoner", "think-tags"])
async def test_the_same_body_gets_the_same_answer_under_a_profile(
    srv: SimServer, profile: str
) -> None:
    srv.settings.profile = profile
    body = reasoning_request(max_completion_tokens=3000, n=4)
    url = f"{srv.base_url}/chat/completions"
    (status, first), (_, again) = await post(url, body), await post(url, body)
    assert status == 200
    assert first["choices"] == again["choices"] and first["usage"] == again["usage"]
