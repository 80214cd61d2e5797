"""The simulated judge's certainty: under "varied" some items always get one rating, some
mostly one with a neighbour, some ratings spread across the scale; which kind an item is can be
asked of ``item_certainty``, and an item's k-th draw is the same however its draws are asked."""

from __future__ import annotations

import collections
import math
import re
import statistics
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from conftest import sim_command

from geval_async.sim import KINDS, SimServer, SimSettings, item_certainty

PROMPT = "Evaluate coherence.\nText: {text}\nRate the coherence (1-5). Score:"
DRAWS = 20


def messages(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": PROMPT.format(text=text)}]


def request(text: str, n: int, seed: int, **fields: Any) -> dict[str, Any]:
    return {
        "model": "gpt-test",
        "messages": messages(text),
        "max_tokens": 8,
        "n": n,
        "seed": seed,
        **fields,
    }


@pytest.fixture
def varied() -> Iterator[SimServer]:
    with SimServer(SimSettings(certainty="varied")) as server:
        yield server


async def post(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        return resp.status, await resp.json()


def rating_in(content: str) -> int:
    """The rating a plain answer states: its first number ("4", "Score: 4", "4/5")."""
    found = re.search(r"\d+", content)
    assert found is not None, content
    return int(found.group())


async def draws(srv: SimServer, text: str, n: int = DRAWS, seed: int = 0) -> list[int]:
    status, answer = await post(f"{srv.base_url}/chat/completions", request(text, n, seed))
    assert status == 200, answer
    return [rating_in(choice["message"]["content"]) for choice in answer["choices"]]


def texts_by_kind(settings: SimSettings, count: int) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = collections.defaultdict(list)
    for i in range(count):
        kinds[item_certainty(messages(f"summary {i}"), settings)].append(f"summary {i}")
    return kinds


async def test_sure_items_give_one_rating_and_spread_items_scatter(varied: SimServer) -> None:
    kinds = texts_by_kind(varied.settings, 30)
    assert set(kinds) == set(KINDS) and all(len(texts) >= 5 for texts in kinds.values())
    rated = {kind: [await draws(varied, text) for text in texts] for kind, texts in kinds.items()}
    for ratings in rated["sure"]:
        assert len(set(ratings)) == 1, ratings
    for ratings in rated["leaning"]:
        commonest = collections.Counter(ratings).most_common(1)[0][1]
        assert commonest >= DRAWS // 2, ratings  # mostly one rating
        assert max(ratings) - min(ratings) <= 2, ratings  # and its neighbours
    spreads = [statistics.stdev(ratings) for ratings in rated["spread"]]
    assert statistics.mean(spreads) > 1, spreads
    assert all(len(set(ratings)) >= 3 for ratings in rated["spread"]), rated["spread"]
    leaning = [statistics.stdev(ratings) for ratings in rated["leaning"]]
    assert max(leaning) < statistics.mean(spreads), (leaning, spreads)


async def test_a_draw_is_the_same_however_the_draws_are_asked(varied: SimServer) -> None:
    """Adaptive sampling asks draws 0-2 first and the rest later, with seed + draw index."""
    kinds = texts_by_kind(varied.settings, 12)
    url = f"{varied.base_url}/chat/completions"
    for kind in KINDS:
        text = kinds[kind][0]
        _, whole = await post(url, request(text, DRAWS, seed=100))
        _, first = await post(url, request(text, 3, seed=100))
        _, rest = await post(url, request(text, DRAWS - 3, seed=103))
        chunked = first["choices"] + rest["choices"]
        contents = [choice["message"]["content"] for choice in whole["choices"]]
        assert [choice["message"]["content"] for choice in chunked] == contents, kind
    assert varied.stats.samples == len(KINDS) * 2 * DRAWS


async def test_even_certainty_draws_as_before() -> None:
    settings = SimSettings()
    assert {item_certainty(messages(f"text {i}"), settings) for i in range(30)} == {"even"}
    with SimServer(settings) as srv:
        got = [await draws(srv, f"text {i}", n=10, seed=5) for i in range(4)]
    # The hidden score plus the same noise for every item, unchanged by certainty.
    assert got == [
        [5, 5, 4, 5, 5, 5, 4, 5, 5, 4],
        [3, 2, 3, 3, 4, 2, 4, 1, 3, 4],
        [1, 1, 2, 2, 1, 1, 3, 1, 1, 1],
        [3, 2, 3, 1, 2, 3, 2, 1, 1, 2],
    ]


async def test_logprobs_narrow_for_sure_items_and_widen_for_spread_ones(
    varied: SimServer,
) -> None:
    kinds = texts_by_kind(varied.settings, 12)
    url = f"{varied.base_url}/chat/completions"
    top_share = {}
    for kind in KINDS:
        body = request(kinds[kind][0], 1, 0, logprobs=True, top_logprobs=10)
        status, answer = await post(url, body)
        assert status == 200, answer
        first = answer["choices"][0]["logprobs"]["content"][0]
        on_ratings = [math.exp(a["logprob"]) for a in first["top_logprobs"] if a["token"].isdigit()]
        top_share[kind] = max(on_ratings) / sum(on_ratings)
    assert top_share["sure"] > 0.99
    assert top_share["spread"] < 0.5 < top_share["leaning"] < top_share["sure"]


async def test_certainty_can_be_changed_while_it_runs_and_is_checked() -> None:
    with SimServer(SimSettings()) as srv:
        text = texts_by_kind(SimSettings(certainty="varied"), 12)["sure"][0]
        assert len(set(await draws(srv, text))) > 1  # evenly noisy at first
        async with aiohttp.ClientSession() as session:
            update = f"{srv.root_url}/sim/settings"
            async with session.post(update, json={"certainty": "varied"}) as resp:
                assert resp.status == 200
            async with session.post(update, json={"certainty": "sometimes"}) as resp:
                assert resp.status == 400
                message = (await resp.json())["error"]["message"]
        assert "unknown certainty 'sometimes'; known: even, varied" in message
        assert srv.settings.certainty == "varied"
        assert len(set(await draws(srv, text))) == 1
    with pytest.raises(ValueError, match="unknown certainty 'sometimes'"):
        SimServer(SimSettings(certainty="sometimes")).start()


def test_the_sim_command_refuses_an_unknown_certainty() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "geval_async", "sim", "--certainty", "sometimes"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "--certainty: invalid choice: 'sometimes'" in refused.stderr


async def test_the_sim_command_takes_certainty() -> None:
    text = texts_by_kind(SimSettings(certainty="varied"), 12)["sure"][0]
    async with sim_command("--certainty", "varied") as base_url:
        status, answer = await post(f"{base_url}/chat/completions", request(text, DRAWS, 0))
    assert status == 200
    assert len({rating_in(c["message"]["content"]) for c in answer["choices"]}) == 1
