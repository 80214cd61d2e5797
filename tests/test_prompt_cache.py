"""Prompt caching: what a study on a caching provider pays, and what the user is told.

A criterion whose instructions come before the record's text, and run past 1,024 tokens, is
read from the provider's prompt cache by every request after the first that carried them;
the draws of an item sent one a request (an endpoint that refuses ``n``) share the whole
prompt. The tests judge such a study against the simulated judge with its prompt cache on
(``prompt_cache``) and against a plain aiohttp stub that keeps its own cache (a prompt's
start is served from it once a request carrying it was answered), and check the bill, the
share of cached tokens ``run``, ``status`` and the report show, the ``prompt_cache_key`` the
requests carry (and drop when the endpoint refuses it), and the ``--dry-run`` line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from conftest import ROOT, LoopbackApp, StudyFiles, run_cli, run_study, summary_row

from geval_async.judging.wire.failures import Action, decide, response_fact
from geval_async.sim import SimServer, SimSettings
from geval_async.sim.prompt_cache import PromptCache
from geval_async.study.pricing import billed_cost, cached_input_price, price_of
from geval_async.study.responses_api import read_usage

MODEL = "gpt-5-mini"  # cached input at a tenth of the input price (study/pricing.py)

# Instructions well past 1,024 tokens (four characters a token), the record's text last.
RUBRIC = "\n".join(
    f"{i}. Check whether sentence {i} of the text follows from the one before it, names what "
    f"it refers to, and keeps the reader's attention on the topic (rule {i * 7 % 13})."
    for i in range(1, 41)
)
LONG_PROMPT = f"""You will be given a short text. Rate its clarity on one metric.

Evaluation Criteria:

Clarity (1-5) - how easy the text is to follow.

Evaluation Steps:

{RUBRIC}

Text:

{{{{text}}}}

Evaluation Form (scores ONLY):

- Clarity (1-5):"""

LONG = {
    "name": "rules",
    "display_name": "Clarity",
    "prompt": "prompts/long.txt",
    "scale": [1, 5],
    "fields": ["text"],
}
SHORT = {
    "name": "fit",
    "display_name": "Fit",
    "prompt": "prompts/fit.txt",
    "scale": [1, 3],
    "fields": ["reader", "text"],
}


def _write(study: StudyFiles, base_url: str, cache: str = "cache", **sections: Any) -> None:
    (study.root / "prompts" / "long.txt").write_text(LONG_PROMPT, encoding="utf-8")
    sections.setdefault("criteria", [LONG])
    sections.setdefault("judge", {"model": MODEL, "base_url": base_url})
    study.write_config(
        base_url,
        sampling={"mode": "samples", "n": 10, "temperature": 1.0, "max_tokens": 5},
        limits={"concurrency": 8, "retries": 4, "timeout": 10},
        cache={"path": cache},
        **sections,
    )


def _ledger(study: StudyFiles, cache: str = "cache") -> list[dict[str, Any]]:
    lines = (study.root / cache / "spend.jsonl").read_bytes().splitlines()
    return [orjson.loads(line) for line in lines]


def _judge(study: StudyFiles, sim: SimServer, cache: str) -> dict[str, Any]:
    """Judge the study into ``cache`` and return the run's line of the spend ledger."""
    _write(study, sim.base_url, cache)
    result = run_study(study)
    assert result.returncode == 0, result.stderr
    (run,) = _ledger(study, cache)
    return run


def test_ten_draws_a_request_are_billed_mostly_as_cached(sim: SimServer, study: StudyFiles) -> None:
    # One answer a request (the endpoint refuses n > 1): an item's ten draws are ten requests.
    sim.settings.profile = "anthropic-compat"
    without = _judge(study, sim, "cache-plain")
    assert sim.stats.cached_tokens == 0
    sim.stats.reset()
    sim.settings.prompt_cache = True
    cached = _judge(study, sim, "cache")
    assert sim.stats.received == study.n_records * 10 + 1  # +1: the refused n = 10
    share = cached["cached_tokens"] / cached["prompt_tokens"]
    assert share >= 0.8, cached
    assert cached["billed_usd"] <= without["billed_usd"] / 2, (cached, without)
    # Every request of the criterion carried the same prompt_cache_key.
    (key,) = sim.stats.cache_keys
    assert key.startswith("geval-rules-")

    status = run_cli("status", str(study.config))
    said = f"{share:.0%} of {cached['prompt_tokens']:,} prompt tokens billed as cached"
    assert f"prompt cache: {said}" in status.stdout

    report = run_cli("report", str(study.config), "--html")
    assert report.returncode == 0, report.stderr
    text = (study.root / "out" / "t_report.md").read_text(encoding="utf-8")
    assert f"Prompt cache: {said}" in text
    page = (study.root / "out" / "t_report.html").read_text(encoding="utf-8")
    assert said in page


def test_the_run_summary_says_the_cached_share(sim: SimServer, study: StudyFiles) -> None:
    sim.settings.profile = "anthropic-compat"
    sim.settings.prompt_cache = True
    _write(study, sim.base_url)
    result = run_cli("run", str(study.config))
    assert result.returncode == 0, result.stderr
    (run,) = _ledger(study)
    share = run["cached_tokens"] / run["prompt_tokens"]
    assert f"prompt cache: {share:.0%} of {run['prompt_tokens']:,} prompt tokens" in result.stdout


def test_the_responses_api_is_billed_mostly_as_cached_too(
    sim: SimServer, study: StudyFiles
) -> None:
    # The Responses API takes no n: each of an item's ten draws is a request of its own.
    sim.settings.profile = "openai-responses"
    sim.settings.prompt_cache = True
    _write(
        study, sim.base_url, judge={"model": MODEL, "base_url": sim.base_url, "api": "responses"}
    )
    result = run_cli("run", str(study.config), "--max-tokens", "2000")
    assert result.returncode == 0, result.stderr
    (run,) = _ledger(study)
    assert run["cached_tokens"] / run["prompt_tokens"] >= 0.8, run
    (key,) = sim.stats.cache_keys
    assert key.startswith("geval-rules-")
    assert "prompt cache: " in result.stdout


def test_the_first_request_of_a_criterion_is_answered_before_the_others_go(
    sim: SimServer, study: StudyFiles
) -> None:
    # n in one request: each item sends one; they share the instructions only. Sent all at
    # once, the first eight would each compute the instructions anew (latency keeps them in
    # flight together); held until the first is answered, only that one does.
    sim.settings.prompt_cache = True
    sim.settings.latency_ms = 30
    _write(study, sim.base_url)
    result = run_study(study)
    assert result.returncode == 0, result.stderr
    assert sim.stats.received == study.n_records
    assert sim.stats.received - sim.stats.cache_hits == 1


# A pairwise criterion whose instructions run past 1,024 tokens, the two texts last.
LONG_PAIR_PROMPT = f"""Please act as an impartial judge and compare two texts written for the
same reader. Decide which one is clearer, checking each text against these rules:

{RUBRIC}

[The Start of Assistant A's Answer]
{{{{text_a}}}}
[The End of Assistant A's Answer]

[The Start of Assistant B's Answer]
{{{{text_b}}}}
[The End of Assistant B's Answer]

Output your final verdict: "[[A]]" if A is clearer, "[[B]]" if B is, "[[C]]" for a tie."""


def test_the_first_request_of_a_pairwise_criterion_is_answered_before_the_others_go(
    sim: SimServer, study: StudyFiles
) -> None:
    sim.settings.prompt_cache = True
    sim.settings.latency_ms = 30
    (study.root / "prompts" / "pair.txt").write_text(LONG_PAIR_PROMPT, encoding="utf-8")
    pair = {"name": "pair", "kind": "pairwise", "prompt": "prompts/pair.txt", "compare": ["text"]}
    _write(study, sim.base_url, criteria=[pair])
    dry = run_cli("run", str(study.config), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    tokens = LONG_PAIR_PROMPT.index("{{text_a}}") // 4
    blocks = tokens - (tokens - 1024) % 128
    said = f"prompt cache: pair: about {tokens:,} prompt tokens shared by all its requests, "
    assert f"{said}{blocks:,} of them cacheable" in dry.stdout
    result = run_study(study)
    assert result.returncode == 0, result.stderr
    # A pair a user, asked in both orders: held until the first is answered, only that one
    # computes the instructions; every other reads them from the cache.
    assert sim.stats.received == study.n_records
    assert sim.stats.received - sim.stats.cache_hits == 1
    (key,) = sim.stats.cache_keys
    assert key.startswith("geval-pair-")


def test_the_draws_of_an_item_go_together_after_its_first(
    sim: SimServer, study: StudyFiles
) -> None:
    # One answer a request: the item's first draw goes alone (its answer puts the prompt in the
    # cache), then its other nine together, not one after another.
    sim.settings.profile = "anthropic-compat"
    sim.settings.prompt_cache = True
    sim.settings.latency_ms = 30
    _write(study, sim.base_url)
    result = run_cli("run", str(study.config), "--limit", "1")
    assert result.returncode == 0, result.stderr
    assert summary_row(result.stdout)["new"] == 1
    assert sim.stats.received == 11  # the refused n = 10, then ten draws
    assert sim.stats.peak_in_flight >= 4
    assert sim.stats.cache_hits == 9
    # Every draw is stored: the next run sends nothing, and the item scores ten samples.
    sim.stats.reset()
    again = run_cli("run", str(study.config), "--limit", "1")
    assert again.returncode == 0, again.stderr
    assert sim.stats.received == 0
    answers = run_cli("answers", str(study.config), "--limit", "1")
    assert answers.returncode == 0, answers.stderr


def test_a_criterion_below_the_threshold_sends_no_cache_key(
    sim: SimServer, study: StudyFiles
) -> None:
    sim.settings.prompt_cache = True
    _write(study, sim.base_url, criteria=[SHORT])
    result = run_study(study)
    assert result.returncode == 0, result.stderr
    assert dict(sim.stats.cache_keys) == {"": study.n_records}
    assert sim.stats.cached_tokens == 0


def test_dry_run_says_what_each_criterion_shares(sim: SimServer, study: StudyFiles) -> None:
    _write(study, sim.base_url, criteria=[LONG, SHORT])
    result = run_cli("run", str(study.config), "--dry-run")
    assert result.returncode == 0, result.stderr
    long_tokens = LONG_PROMPT.index("{{text}}") // 4
    blocks = long_tokens - (long_tokens - 1024) % 128
    assert (
        f"prompt cache: rules: about {long_tokens:,} prompt tokens shared by all its requests, "
        f"{blocks:,} of them cacheable" in result.stdout
    )
    assert "prompt cache: fit: about" in result.stdout
    assert "below the 1,024 a provider caches: none cacheable" in result.stdout
    assert sim.stats.received == 0


# --- a plain stub that caches on its own -------------------------------------------------


OPENAI_REFUSAL = {
    "message": "Unsupported parameter: 'prompt_cache_key' is not supported with this model.",
    "type": "invalid_request_error",
    "param": "prompt_cache_key",
    "code": "unsupported_parameter",
}
# Azure OpenAI's words for a parameter it does not know, no field naming it.
AZURE_REFUSAL = {
    "message": "Unrecognized request argument supplied: prompt_cache_key",
    "type": "invalid_request_error",
    "param": None,
    "code": None,
}


class CachingJudge(LoopbackApp):
    """An OpenAI-style endpoint that refuses n > 1 and caches prompts its own way: a word is
    a token, and a request whose first 1,024 words or more (in 128-word blocks) an answered
    request of the same ``prompt_cache_key`` began with has them billed as cached. With
    ``refuse_key`` (an error object) it refuses ``prompt_cache_key`` as an endpoint that does
    not know it."""

    def __init__(self, *, refuse_key: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.refuse_key = refuse_key
        self.answered: list[tuple[str, tuple[str, ...]]] = []
        self.bodies: list[dict[str, Any]] = []
        self.prompt_tokens = self.cached_tokens = 0

    def _cached(self, key: str, words: tuple[str, ...]) -> int:
        longest = 0
        for seen_key, seen in self.answered:
            if seen_key != key:
                continue
            common = 0
            for mine, theirs in zip(words, seen, strict=False):
                if mine != theirs:
                    break
                common += 1
            longest = max(longest, common)
        return 0 if longest < 1024 else longest - (longest - 1024) % 128

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        if body.get("n", 1) > 1:
            return _refusal("n must be 1 for this model", "n", "unsupported_value")
        if self.refuse_key is not None and "prompt_cache_key" in body:
            return web.json_response({"error": self.refuse_key}, status=400)
        key = body.get("prompt_cache_key", "")
        words = tuple(body["messages"][0]["content"].split())
        cached = self._cached(key, words)
        self.prompt_tokens += len(words)
        self.cached_tokens += cached
        answer = {
            "id": f"chatcmpl-{len(self.bodies)}",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "3"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": len(words),
                "completion_tokens": 1,
                "total_tokens": len(words) + 1,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
        self.answered.append((key, words))  # kept once answered, not when it arrived
        return web.json_response(answer)

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/chat/completions", self._complete)]


def _refusal(message: str, param: str, code: str) -> web.Response:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return web.json_response({"error": error}, status=400)


# Words past 1,024 before the record's text: the stub counts a word a token.
WORDY_RUBRIC = " ".join(f"criterion-{i % 97} requires care{i}" for i in range(600))


def _write_wordy(study: StudyFiles, base_url: str, n: int = 10) -> None:
    prompt = f"Rate the clarity of the text (1-5).\n\n{WORDY_RUBRIC}\n\nText:\n\n{{{{text}}}}\n\n"
    (study.root / "prompts" / "long.txt").write_text(prompt + "- Clarity (1-5):", "utf-8")
    study.write_config(
        base_url,
        judge={"model": MODEL, "base_url": base_url},
        sampling={"mode": "samples", "n": n, "temperature": 1.0, "max_tokens": 5},
        limits={"concurrency": 8, "retries": 4, "timeout": 10},
        criteria=[LONG],
    )


def test_a_plain_caching_endpoint_bills_the_draws_as_cached(study: StudyFiles) -> None:
    with CachingJudge() as judge:
        _write_wordy(study, judge.base_url)
        result = run_study(study)
        assert result.returncode == 0, result.stderr
    sent = judge.bodies[1:]  # after the refused n = 10
    assert len(sent) == study.n_records * 10
    assert len({body["prompt_cache_key"] for body in sent}) == 1
    assert judge.cached_tokens / judge.prompt_tokens >= 0.8
    (run,) = _ledger(study)
    assert (run["prompt_tokens"], run["cached_tokens"]) == (
        judge.prompt_tokens,
        judge.cached_tokens,
    )


@pytest.mark.parametrize("error", [OPENAI_REFUSAL, AZURE_REFUSAL], ids=["openai", "azure"])
def test_a_refused_cache_key_is_dropped_and_remembered(
    error: dict[str, Any], study: StudyFiles
) -> None:
    with CachingJudge(refuse_key=error) as judge:
        _write_wordy(study, judge.base_url)
        result = run_study(study)
        assert result.returncode == 0, result.stderr
        refused = [b for b in judge.bodies if "prompt_cache_key" in b and b.get("n", 1) == 1]
        assert len(refused) == 1  # refused once, then left out
        answered = [b for b in judge.bodies if "prompt_cache_key" not in b]
        assert len(answered) == study.n_records * 10
        assert judge.cached_tokens / judge.prompt_tokens >= 0.8  # the cache works without it

        endpoints = json.loads((study.cache / "endpoints.json").read_text(encoding="utf-8"))
        (facts,) = endpoints.values()
        assert facts["dropped"] == ["prompt_cache_key"]
        status = run_cli("status", str(study.config))
        assert "no prompt_cache_key" in status.stdout

        # A later run (more draws) sends none from its first request on.
        judge.bodies.clear()
        _write_wordy(study, judge.base_url, n=12)
        result = run_study(study)
        assert result.returncode == 0, result.stderr
        assert len(judge.bodies) == study.n_records * 2
        assert not [b for b in judge.bodies if "prompt_cache_key" in b]


# --- the simulated judge's cache -----------------------------------------------------------


def _body(text: str, key: str = "") -> dict[str, Any]:
    return {"model": "m", "prompt_cache_key": key, "messages": [{"role": "user", "content": text}]}


def test_the_sim_cache_keeps_a_start_once_answered_in_128_token_blocks() -> None:
    cache = PromptCache()
    start = "a" * (4 * 1100)  # 1,100 tokens: one block of 1,024 cacheable
    first, second = _body(start + "one"), _body(start + "two")
    tokens = 1100
    read, starts = cache.read(first, tokens, now=0.0, retention=300.0)
    assert read == 0
    # Arrived while the first is being answered: nothing is kept yet.
    assert cache.read(second, tokens, now=0.5, retention=300.0)[0] == 0
    cache.keep(starts, now=1.0, retention=300.0)
    assert cache.read(second, tokens, now=2.0, retention=300.0)[0] == 1024
    longer = _body("a" * (4 * 1300))
    assert cache.read(longer, 1300, now=2.0, retention=300.0)[0] == 1024
    # Another prompt_cache_key is routed elsewhere: nothing there.
    assert cache.read(_body(start + "two", key="other"), tokens, 2.0, 300.0)[0] == 0
    # Below 1,024 tokens nothing is cached at all.
    short = _body("a" * (4 * 1000))
    read, starts = cache.read(short, 1000, now=3.0, retention=300.0)
    assert (read, starts) == (0, [])


def test_the_sim_cache_forgets_a_start_left_idle_past_its_retention() -> None:
    cache = PromptCache()
    body = _body("b" * (4 * 2000))
    _, starts = cache.read(body, 2000, now=0.0, retention=300.0)
    cache.keep(starts, now=0.0, retention=300.0)
    assert cache.read(body, 2000, now=299.0, retention=300.0)[0] == 1024 + 7 * 128
    # The read at 299 s began its idle time anew.
    assert cache.read(body, 2000, now=598.0, retention=300.0)[0] == 1024 + 7 * 128
    assert cache.read(body, 2000, now=899.0, retention=300.0)[0] == 0


def test_the_sim_reports_cached_tokens_only_with_its_cache_on() -> None:
    import urllib.request

    settings = SimSettings(prompt_cache=True)
    text = "c" * (4 * 1500)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()
    with SimServer(settings) as server:
        details = []
        for _ in range(2):
            request = urllib.request.Request(
                f"{server.base_url}/chat/completions",
                data=body,
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request) as response:  # noqa: S310 (127.0.0.1)
                details.append(json.loads(response.read())["usage"]["prompt_tokens_details"])
        assert [d["cached_tokens"] for d in details] == [0, 1024 + 3 * 128]
        server.settings.prompt_cache = False
        with urllib.request.urlopen(request) as response:  # noqa: S310
            assert "prompt_tokens_details" not in json.loads(response.read())["usage"]


def test_a_run_whose_usage_says_nothing_of_a_cache_prints_no_share(
    sim: SimServer, study: StudyFiles
) -> None:
    # The default simulated judge reports no prompt_tokens_details, as many servers do.
    _write(study, sim.base_url, criteria=[SHORT])
    result = run_cli("run", str(study.config))
    assert result.returncode == 0, result.stderr
    assert "prompt cache:" not in result.stdout


# --- the shipped prompts -------------------------------------------------------------------

# The shipped studies (judge_files.toml describes judges' files for the meta stage, no study).
SHIPPED = [
    p for p in sorted((ROOT / "examples").glob("*/*.toml")) if "[[criteria]]" in p.read_text()
]


@pytest.mark.parametrize("config", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_prompt_puts_the_record_last(config: Path) -> None:
    """The criterion's fixed text comes before the first record field; after it come only the
    fields, their short labels and the one-line answer form. Pairwise criteria too: their
    shared fields, then the two texts, then the line that asks for the verdict."""
    from geval_async.study.config import load_config
    from geval_async.study.prompts import load_template

    loaded = load_config(config)
    for criterion in (*loaded.criteria, *loaded.pairwise):
        template = load_template(criterion.prompt, criterion.style)
        record = set(criterion.fields) | ({"record"} if criterion.definition else set())
        names = list(template.parts[1::2])
        at = [i for i, name in enumerate(names) if name in record]
        assert at, f"{criterion.prompt}: no record field"
        after = template.parts[2 * at[0] + 2 :]  # the literals and names after the first field
        *labels, last = after[0::2]
        tail, _, form = last.rstrip("\n").rpartition("\n")
        assert all(len(text) <= 80 for text in (*labels, tail)), (criterion.prompt, after)
        assert len(form) <= 200, (criterion.prompt, form)  # the answer form: one line
        assert set(after[1::2]) - record <= {"metric_name", "scale"}, (criterion.prompt, after)


@pytest.mark.parametrize("error", [OPENAI_REFUSAL, AZURE_REFUSAL], ids=["openai", "azure"])
def test_a_refused_cache_key_is_resent_without_it_and_not_billed(error: dict[str, Any]) -> None:
    fact = response_fact(400, json.dumps({"error": error}).encode(), {})
    assert fact.param == "prompt_cache_key"
    sent = {"model": MODEL, "n": 1, "prompt_cache_key": "geval-rules-0123"}
    decision = decide(fact, sent=sent)
    assert decision.action is Action.DROP_PARAMETER
    assert not decision.billed


def test_cached_tokens_of_either_api_are_billed_at_the_cached_input_price() -> None:
    # Chat completions' usage and the Responses API's, read by the one usage reader.
    chat = {
        "prompt_tokens": 2000,
        "completion_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 1920},
    }
    responses = {
        "input_tokens": 2000,
        "output_tokens": 10,
        "input_tokens_details": {"cached_tokens": 1920},
    }
    price, cached = price_of(MODEL), cached_input_price(MODEL)
    assert price == (0.25, 2.00) and cached == 0.025
    expected = (80 * 0.25 + 1920 * 0.025 + 10 * 2.00) / 1e6
    assert billed_cost(chat, price, cached) == pytest.approx(expected)
    assert billed_cost(responses, price, cached) == pytest.approx(expected)
    assert read_usage(responses) == read_usage(chat)


def test_batch_lines_carry_the_criterions_cache_key_as_an_online_run_does(
    sim: SimServer, study: StudyFiles
) -> None:
    _write(study, sim.base_url, criteria=[LONG, SHORT])
    result = run_cli("run", str(study.config), "--batch", "--poll", "0.05", "--quiet")
    assert result.returncode == 0, result.stderr
    batch = dict(sim.stats.cache_keys)
    sim.stats.reset()
    _write(study, sim.base_url, cache="cache-online", criteria=[LONG, SHORT])
    assert run_study(study).returncode == 0
    # The long criterion's lines all carry its key; the short one's (below 1,024 tokens) none.
    assert batch == dict(sim.stats.cache_keys)
    (key,) = (k for k in batch if k)
    assert key.startswith("geval-rules-") and batch[key] == study.n_records
    assert batch[""] == study.n_records
