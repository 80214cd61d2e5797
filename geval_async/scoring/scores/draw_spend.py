"""What a study that spends its draws by need paid, against the fixed study of the same n.

Each counted request of an adaptive item is read from its stored entry: the draws it asked
for and received, and the usage the server reported. An item settled by its rule counts the
requests that hold the draws its score reads (a cache that holds more, from a fixed run or a
higher target, paid those for another study); an item still drawing counts every request it
has. A request whose usage gives token counts is priced as billed; one without is priced at
the token estimate the run charges (the prompt's characters at about four a token, and every
draw's ``max_tokens``).

The fixed study is estimated from the same answers: as many requests as the endpoint needs
for n draws an item (one, on an endpoint that takes ``n``; n, on one that answers one draw a
request), each carrying the prompt the adaptive requests carried on average, and n draws an
item at the completion tokens the adaptive draws took on average. So on an endpoint that
takes ``n`` the rounds make more requests than the fixed study, each paying the prompt again,
and the saving is in completion tokens alone; on an endpoint of one draw a request, both fall.

How many draws a request of the endpoint holds is read from the answers themselves, as the
run learns it (:mod:`geval_async.judging.wire.capabilities`): a request of the Responses API,
or one answered with fewer draws than it asked (n refused, or ignored as llama.cpp does), shows
the most it gives. Answers that never asked for more than one draw show nothing: the fixed
study is then counted as one request an item.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ...judging.store.read_model import ItemAnswers
from ...options import JudgeApi
from ...study.config import EvalConfig
from ...study.plan import render_messages
from ...study.pricing import cached_input_price, price_of
from ...study.requests import token_estimate
from ...study.responses_api import read_usage
from ..stats.adaptive import Stop

__all__ = ["CriterionSpend", "DrawSpend", "FixedCost", "fixed_cost"]


@dataclass
class CriterionSpend:
    """The counted requests of one criterion's adaptive items and the tokens they took."""

    requests: int = 0
    draws: int = 0  # the draws those requests received
    prompt: int = 0  # prompt tokens not read from the provider's prompt cache
    cached: int = 0  # prompt tokens read from it
    completion: int = 0  # reasoning included
    billed: int = 0  # requests whose usage gave token counts
    estimated: int = 0  # requests priced at the token estimate

    @property
    def basis(self) -> str:
        """Where the cost comes from: "billed", "estimated" or "billed and estimated"."""
        if self.estimated == 0:
            return "billed"
        return "estimated" if self.billed == 0 else "billed and estimated"


@dataclass
class DrawSpend:
    """Per criterion, what the adaptive items' counted requests took (:class:`CriterionSpend`),
    and the most draws an answer of the endpoint held when it held fewer than asked (None:
    no answer did, so the endpoint takes ``n``)."""

    criteria: dict[str, CriterionSpend] = field(default_factory=dict)
    per_request: int | None = None

    def counting(
        self,
        config: EvalConfig,
        answers: Iterable[ItemAnswers],
        stops: Mapping[tuple[str, str], Stop],
    ) -> Iterator[ItemAnswers]:
        """``answers`` as they are, each adaptive item's requests (those whose item ``stops``
        names) counted as it passes."""
        for answers_of in answers:
            item = answers_of.item
            stop = stops.get((item.criterion.name, item.record.id))
            if stop is not None:
                self.add(config, answers_of, stop)
            yield answers_of

    def add(self, config: EvalConfig, answers: ItemAnswers, stop: Stop) -> None:
        """Count the requests of one item that hold the draws its score reads (all of them
        while it is still drawing)."""
        item = answers.item
        spend = self.criteria.setdefault(item.criterion.name, CriterionSpend())
        if config.judge.api is JudgeApi.RESPONSES:
            self.per_request = 1
        limit = stop.draws if stop.settled else config.sampling.n
        start = 0
        prompt_estimate: int | None = None
        for entry in answers.spent:
            if start >= limit:
                break
            start += entry.received
            if entry.received < entry.asked:
                self.per_request = max(self.per_request or 0, entry.received) or 1
            spend.requests += 1
            spend.draws += entry.received
            tokens = read_usage(entry.usage)
            if tokens is not None:
                spend.billed += 1
                spend.prompt += tokens.prompt - tokens.cached
                spend.cached += tokens.cached
                spend.completion += tokens.completion
                continue
            if prompt_estimate is None:  # rendered once an item, and only when needed
                prompt_estimate = token_estimate(config, render_messages(item), 0)
            spend.estimated += 1
            spend.prompt += prompt_estimate
            spend.completion += config.sampling.max_tokens * entry.received


@dataclass(frozen=True)
class FixedCost:
    """One criterion's adaptive spend beside the fixed study's (costs in USD; None: the model
    has no price)."""

    requests: int
    fixed_requests: int
    prompt_tokens: int
    fixed_prompt_tokens: int
    completion_tokens: int
    fixed_completion_tokens: int
    cost: float | None
    fixed_cost: float | None
    basis: str

    @property
    def saving(self) -> float | None:
        """1 - cost / fixed cost (None: no price, or a fixed study that costs nothing)."""
        if self.cost is None or not self.fixed_cost:
            return None
        return 1.0 - self.cost / self.fixed_cost


def fixed_cost(
    config: EvalConfig, spend: CriterionSpend, items: int, per_request: int | None
) -> FixedCost:
    """``spend`` beside what the fixed study of ``items`` items at the config's n takes, from
    the same prompt tokens a request and completion tokens a draw (``per_request``: the most
    draws a request of the endpoint holds, None: all n)."""
    n = config.sampling.n
    fixed_requests = items * (1 if per_request is None else math.ceil(n / per_request))
    prompt_per_request = (spend.prompt + spend.cached) / spend.requests if spend.requests else 0.0
    cached_share = (
        spend.cached / (spend.prompt + spend.cached) if spend.prompt + spend.cached else 0.0
    )
    completion_per_draw = spend.completion / spend.draws if spend.draws else 0.0
    fixed_prompt = fixed_requests * prompt_per_request
    fixed_completion = items * n * completion_per_draw
    model, prices = config.judge.model, config.price_table
    price = price_of(model, prices)
    cost = fixed = None
    if price is not None:
        price_in, price_out = price
        cached_in = cached_input_price(model, prices)
        cached_in = price_in if cached_in is None else cached_in

        def usd(uncached: float, cached: float, completion: float) -> float:
            return (uncached * price_in + cached * cached_in + completion * price_out) / 1e6

        cost = usd(spend.prompt, spend.cached, spend.completion)
        fixed = usd(
            fixed_prompt * (1 - cached_share), fixed_prompt * cached_share, fixed_completion
        )
    return FixedCost(
        spend.requests,
        fixed_requests,
        spend.prompt + spend.cached,
        round(fixed_prompt),
        spend.completion,
        round(fixed_completion),
        cost,
        fixed,
        spend.basis,
    )
