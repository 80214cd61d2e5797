"""Prices of common judge models (USD per million tokens), estimates and the ``--max-cost`` cap.

Prices change; these are list prices at the time of writing and only ever feed an estimate
(``--dry-run``) or the budget cap. A config's ``[prices]`` table adds or overrides models.
Batch jobs (``--batch``) are billed at :data:`BATCH_PRICES`: half the online price for
OpenAI's models, as OpenAI and Azure OpenAI charge for their Batch API.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .responses_api import UsageTokens, read_usage

# model prefix -> (input, output) USD per 1M tokens. The longest matching prefix wins.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o4-mini": (1.10, 4.40),
    "o3-mini": (1.10, 4.40),
    # Read 2026-12-01. gpt-5-nano: OpenAI's model page
    # (https://developers.openai.com/api/docs/models/gpt-5-nano). The others as OpenAI's pricing
    # page (https://developers.openai.com/api/docs/pricing) lists them, read through GitHub's
    # Copilot price table (github/docs data/tables/copilot/models-and-pricing.yml: gpt-5-mini,
    # gpt-5.2, gpt-5.4) and the openai-cost crate's dated table (gpt-5, gpt-5.1). A snapshot
    # (gpt-5-mini-2025-08-07) takes its family's price; a gpt-5.x not listed here takes the
    # nearest shorter prefix's (gpt-5.4-nano: gpt-5.4's), an over-estimate: add it to [prices].
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5.1": (1.25, 10.00),
    "gpt-5.2": (1.75, 14.00),
    "gpt-5.4": (2.50, 15.00),
    "gpt-5.4-mini": (0.75, 4.50),
    "sim-judge": (0.0, 0.0),
}

# model prefix -> USD per 1M cached input tokens (``usage.prompt_tokens_details.cached_tokens``),
# where the provider lists one (same sources as above); other models: the input price.
CACHED_INPUT: dict[str, float] = {
    "gpt-4o-mini": 0.075,
    "gpt-4o": 1.25,
    "gpt-4.1-nano": 0.025,
    "gpt-4.1-mini": 0.10,
    "gpt-4.1": 0.50,
    "o4-mini": 0.275,
    "o3-mini": 0.55,
    "gpt-5": 0.125,
    "gpt-5-mini": 0.025,
    "gpt-5-nano": 0.005,
    "gpt-5.1": 0.125,
    "gpt-5.2": 0.175,
    "gpt-5.4": 0.25,
    "gpt-5.4-mini": 0.075,
}

# The Batch API's price: 50% of the online price for every model above.
BATCH_PRICES: dict[str, tuple[float, float]] = {
    model: (price_in / 2, price_out / 2) for model, (price_in, price_out) in PRICES.items()
}


def price_of(
    model: str, prices: Mapping[str, tuple[float, float]] | None = None, *, batch: bool = False
) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens of ``model`` (longest matching prefix), or None.

    With ``batch`` the Batch API price: :data:`BATCH_PRICES`, or half the ``prices`` entry of a
    model the built-in table does not know.
    """
    if batch:
        online = price_of(model, prices)
        if online is not None and online != price_of(model, PRICES):
            # A [prices] entry of the config: its batch price is half, as OpenAI's.
            return online[0] / 2, online[1] / 2
        return price_of(model, BATCH_PRICES)
    table = PRICES if prices is None else prices
    matches = [p for p in table if model.startswith(p)]
    return table[max(matches, key=len)] if matches else None


def cached_input_price(
    model: str, prices: Mapping[str, tuple[float, float]] | None = None
) -> float | None:
    """USD per 1M cached prompt tokens: the built-in :data:`CACHED_INPUT` price, or (a model
    the config prices itself, or one with no cached price) its input price."""
    price = price_of(model, prices)
    if price is None:
        return None
    if prices is not None and price != price_of(model, PRICES):
        return price[0]
    matches = [p for p in CACHED_INPUT if model.startswith(p)]
    return CACHED_INPUT[max(matches, key=len)] if matches else price[0]


def billed_cost(
    usage: Mapping[str, object], price: tuple[float, float], cached_price: float | None = None
) -> float | None:
    """USD of one answer from the usage the server reported (prompt, of it cached, and
    completion tokens, reasoning included); None when the usage gives no token counts."""
    tokens = _billed_tokens(usage)
    if tokens is None:
        return None
    uncached, cached, completion = tokens
    price_in, price_out = price
    cached_in = price_in if cached_price is None else cached_price
    return (uncached * price_in + cached * cached_in + completion * price_out) / 1e6


def _billed_tokens(usage: Mapping[str, object]) -> tuple[int, int, int] | None:
    """The prompt's uncached and cached tokens and the completion's (reasoning included) the
    usage reports, in either API's names (:func:`.responses_api.read_usage`); None when it
    gives no token counts."""
    tokens = read_usage(usage)
    if tokens is None:
        return None
    return tokens.prompt - tokens.cached, tokens.cached, tokens.completion


@dataclass(frozen=True)
class PromptCacheShare:
    """How many of the prompt tokens answers reported were read from the provider's prompt
    cache (billed at the cached-input price)."""

    prompt_tokens: int
    cached_tokens: int

    @property
    def share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def line(self) -> str:
        """ "84% of 1,234,000 prompt tokens billed as cached (1,036,560)"."""
        return (
            f"{self.share:.0%} of {self.prompt_tokens:,} prompt tokens billed as cached "
            f"({self.cached_tokens:,})"
        )


def estimate_cost(
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    prices: Mapping[str, tuple[float, float]] | None = None,
    *,
    batch: bool = False,
) -> float | None:
    """Estimated USD for the tokens (at the Batch API price with ``batch``), or None when the
    model has no known price."""
    price = price_of(model, prices, batch=batch)
    if price is None:
        return None
    price_in, price_out = price
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000


def usd(amount: float) -> str:
    """Dollars the way a person reads them: "$12.50", "$0.0042"."""
    return f"${amount:,.2f}" if amount >= 1 or amount == 0 else f"${amount:.4g}"


@dataclass
class SharedCap:
    """One ``--max-cost`` cap that several budgets spend from: a panel's judges, each charged
    at its own model's price, judged at once. ``before`` is what earlier runs of the study
    spent (every judge's), read once when the panel's run starts."""

    cap: float
    before: float = 0.0
    spent: float = 0.0


@dataclass
class Budget:
    """A study's spending cap (``--max-cost``) and the estimated USD this run dispatched.

    A request is charged before it is sent, at its prompt-token estimate plus ``max_tokens x n``
    completion tokens (the most it can cost); a request that would take the study's total
    (``before``, what earlier runs spent, plus this run's) past the cap is not sent. Answers
    already in the cache cost nothing.
    """

    cap: float
    price: tuple[float, float]
    spent: float = 0.0
    refused: bool = False  # a request was held back because of the cap
    before: float = 0.0  # estimated spend of the study's earlier runs
    cached_price: float | None = None  # USD per 1M cached prompt tokens (None: input price)
    unbilled: int = 0  # answers whose usage gave no token counts (kept at their estimate)
    # What the answers' usage reported, in tokens (the prompt's uncached and cached parts,
    # the completion): priced when read (:attr:`billed`), not summed in USD an answer.
    billed_tokens: list[int] = field(default_factory=lambda: [0, 0, 0])
    # A panel's cap, shared with the other judges' budgets (None: this budget's own cap).
    shared: SharedCap | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        price_in, price_out = self.price
        return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000

    def charge(self, cost: float) -> bool:
        """Add ``cost`` and return True, or return False when it would pass the cap."""
        shared = self.shared
        if shared is not None:
            if shared.before + shared.spent + cost > shared.cap:
                self.refused = True
                return False
            shared.spent += cost
        elif self.before + self.spent + cost > self.cap:
            self.refused = True
            return False
        self.spent += cost
        return True

    def refund(self, cost: float) -> None:
        """Give back a charge that was not billed (a 429 is never billed)."""
        # Rounded to a nano-dollar: charges and refunds in another order than float addition
        # would leave a run that was billed nothing 1e-17 USD "spent", and recorded.
        self.spent = round(self.spent - cost, 9)
        if self.shared is not None:
            self.shared.spent = round(self.shared.spent - cost, 9)

    def settle(self, tokens: UsageTokens | None) -> None:
        """Add what the server reported an answer billed (its usage, as
        :func:`~.responses_api.read_usage` reads it), beside the estimate.

        The cap keeps counting estimates (the most each request could cost), so that a run
        never passes it whatever the answers turn out to cost; the spend a user is shown is
        this one.
        """
        # As billed_cost reads the usage, its tokens added up instead of its USD rounded: the
        # sum is priced once, when the spend is read.
        if tokens is None:
            self.unbilled += 1
        else:
            total = self.billed_tokens
            total[0] += tokens.prompt - tokens.cached
            total[1] += tokens.cached
            total[2] += tokens.completion

    @property
    def billed(self) -> float:
        """What the answers' usage says they cost (USD)."""
        uncached, cached, completion = self.billed_tokens
        price_in, price_out = self.price
        cached_in = price_in if self.cached_price is None else self.cached_price
        return round((uncached * price_in + cached * cached_in + completion * price_out) / 1e6, 12)

    @property
    def left(self) -> float:
        """What the cap leaves for later runs."""
        if self.shared is not None:
            return max(0.0, self.shared.cap - self.shared.before - self.shared.spent)
        return max(0.0, self.cap - self.before - self.spent)

    def reached(self) -> str:
        cap, before, spent = self.cap, self.before, self.spent
        whose = ""
        if self.shared is not None:
            cap, before, spent = self.shared.cap, self.shared.before, self.shared.spent
            whose = " by the panel's judges"
        earlier = f" ({usd(before)} of it by earlier runs)" if before else ""
        return (
            f"budget cap {usd(cap)} reached after {usd(before + spent)} "
            f"estimated{whose}{earlier}; raise --max-cost to continue"
        )
