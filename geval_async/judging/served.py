"""The model a server says it served, against the one asked (a run counts the answers of
another model, :attr:`~.progress.RunCounters.served`)."""

from __future__ import annotations

import functools
import re

__all__ = ["same_model"]

# A dated snapshot's suffix: -2024-07-18, -20241022, -0613.
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4})")


@functools.lru_cache(maxsize=64)  # a run's answers name one or two models
def same_model(served: str, asked: str) -> bool:
    """Whether the model a server says it served is the one asked: the same name, or a dated
    snapshot of it (``gpt-4o-mini-2024-07-18`` or ``gpt-4-0613`` for the name asked), with or
    without a provider's folder (``meta-llama/llama-3-8b``). ``gpt-4o-mini`` is not ``gpt-4o``.
    """
    served, asked = served.strip().lower(), asked.strip().lower()
    if "/" not in asked:
        served = served.rsplit("/", 1)[-1]
    return served == asked or (
        served.startswith(asked) and _SNAPSHOT.fullmatch(served[len(asked) :]) is not None
    )
