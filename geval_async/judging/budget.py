"""The ``--max-cost`` cap of a run: its budget, and the most one request can cost."""

from __future__ import annotations

from ..errors import ConfigError
from ..study.config import EvalConfig
from ..study.pricing import Budget, price_of
from .plan import JudgeRequest

__all__ = ["request_cost", "run_budget"]


def run_budget(config: EvalConfig) -> Budget | None:
    """The ``--max-cost`` budget of a run, or None without a cap."""
    if config.max_cost is None:
        return None
    price = price_of(config.judge.model, config.price_table)
    if price is None:
        raise ConfigError(
            f"--max-cost needs the price of model {config.judge.model!r}: "
            "add it to the config's [prices] table"
        )
    return Budget(config.max_cost, price)


def request_cost(budget: Budget, request: JudgeRequest) -> float:
    """The most a request can cost: its prompt estimate plus max_tokens x n completion."""
    completion = int(request.body.get("max_tokens") or 0) * int(request.body.get("n") or 1)
    return budget.cost(request.est_tokens - completion, completion)
