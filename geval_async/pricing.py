"""Prices of common judge models, for ``--dry-run`` estimates (USD per million tokens).

Prices change; these are list prices at the time of writing and only ever feed an estimate.
"""

from __future__ import annotations

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


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int,
                  prices: dict[str, tuple[float, float]] | None = None) -> float | None:
    """Estimated USD for the tokens, or None when the model has no known price."""
    table = PRICES if prices is None else prices
    matches = [p for p in table if model.startswith(p)]
    if not matches:
        return None
    price_in, price_out = table[max(matches, key=len)]
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000
