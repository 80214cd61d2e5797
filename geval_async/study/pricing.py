"""Prices of common judge models (USD per million tokens), estimates and the ``--max-cost`` cap.

Prices change; these are list prices at the time of writing and only ever feed an estimate
(``--dry-run``) or the budget cap. A config's ``[prices]`` table adds or overrides models.
Batch jobs (``--batch``) are billed at :data:`BATCH_PRICES`: half the online price for
OpenAI's models, as OpenAI and Azure OpenAI charge for their Batch API.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
    "sim-judge": (0.0, 0.0),
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

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        price_in, price_out = self.price
        return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000

    def charge(self, cost: float) -> bool:
        """Add ``cost`` and return True, or return False when it would pass the cap."""
        if self.before + self.spent + cost > self.cap:
            self.refused = True
            return False
        self.spent += cost
        return True

    def refund(self, cost: float) -> None:
        """Give back a charge that was not billed (a 429 is never billed)."""
        # Rounded to a nano-dollar: charges and refunds in another order than float addition
        # would leave a run that was billed nothing 1e-17 USD "spent", and recorded.
        self.spent = round(self.spent - cost, 9)

    @property
    def left(self) -> float:
        """What the cap leaves for later runs."""
        return max(0.0, self.cap - self.before - self.spent)

    def reached(self) -> str:
        earlier = f" ({usd(self.before)} of it by earlier runs)" if self.before else ""
        return (
            f"budget cap {usd(self.cap)} reached after {usd(self.before + self.spent)} "
            f"estimated{earlier}; raise --max-cost to continue"
        )
