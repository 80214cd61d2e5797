"""The study budget: what every run has spent, and the ``--max-cost`` cap.

A request is charged before it is sent at the most it can cost (its prompt estimate plus
``max_tokens x n`` completion at the model's price: reasoning tokens are billed as completion
tokens; to an endpoint that refuses n > 1, each request asks for one answer, so ``max_tokens``);
the cap counts these estimates. Beside them, each answer adds what its usage says was
billed (prompt tokens, the cached part at the cached-input price, completion tokens with
reasoning): the spend ``run`` and ``status`` show. Each run appends both to ``spend.jsonl`` in
the cache folder, one line per run, with the prompt tokens its answers reported and how many
of them were read from the provider's prompt cache.
``--max-cost`` caps the study's total: a resumed run may spend what the earlier runs of the same
config left, not the whole cap again.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from ...errors import CacheError, ConfigError
from ...study.config import EvalConfig
from ...study.plan import JudgeRequest
from ...study.pricing import (
    Budget,
    PromptCacheShare,
    SharedCap,
    cached_input_price,
    price_of,
)

__all__ = [
    "LEDGER",
    "StudyBudget",
    "panel_cap",
    "record_spend",
    "request_cost",
    "run_budget",
    "study_budget",
    "study_prompt_cache",
    "study_spent",
]

LEDGER = "spend.jsonl"


def _study(config: EvalConfig) -> str:
    return str(Path(config.source).resolve())


def study_spent(cache_dir: Path, config: EvalConfig, *, billed: bool = False) -> float:
    """The estimated USD the earlier runs of this study's config recorded in the cache (with
    ``billed``, what their answers' usage billed)."""
    try:
        lines = (Path(cache_dir) / LEDGER).read_bytes().splitlines()
    except FileNotFoundError:
        return 0.0
    except OSError as exc:
        raise CacheError(f"{cache_dir}: cannot read {LEDGER} ({exc.strerror})") from exc
    study, total = _study(config), 0.0
    for line in lines:
        try:
            run = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a line cut by a crash: that run's spend is lost, not the ledger
        usd = run.get("billed_usd" if billed else "usd") if isinstance(run, dict) else None
        if run.get("config") == study and isinstance(usd, int | float) and math.isfinite(usd):
            total += usd
    return total


@dataclass(frozen=True)
class StudyBudget:
    """A study's ``--max-cost`` cap and the estimated USD its runs have spent of it."""

    cap: float
    spent: float

    @property
    def left(self) -> float:
        return max(0.0, self.cap - self.spent)


def study_budget(config: EvalConfig) -> StudyBudget | None:
    """The study's cap and what the earlier runs of its config recorded in the cache (None:
    no ``--max-cost``): what a resumed run may still spend."""
    if config.max_cost is None:
        return None
    return StudyBudget(config.max_cost, study_spent(config.cache_path, config))


def record_spend(
    cache_dir: Path,
    config: EvalConfig,
    budget: Budget | None,
    prompt_cache: PromptCacheShare | None = None,
) -> None:
    """Append a run's estimated and billed spend to the ledger, and (``prompt_cache``) how
    many of its prompt tokens the answers' usage said were cached (nothing when the run spent
    nothing and no usage said)."""
    spent = budget is not None and (budget.spent > 0 or budget.billed > 0)
    if not spent and prompt_cache is None:
        return
    run: dict[str, object] = {
        "config": _study(config),
        "model": config.judge.model,
        "usd": round(budget.spent, 9) if budget is not None else 0.0,
        # the part the answers' usage reported
        "billed_usd": round(budget.billed, 9) if budget is not None else 0.0,
        "time": time.time(),
    }
    if prompt_cache is not None:
        run["prompt_tokens"] = prompt_cache.prompt_tokens
        run["cached_tokens"] = prompt_cache.cached_tokens
    line = orjson.dumps(run)
    try:
        # One write of one line with O_APPEND: two runs appending at once do not interleave.
        handle = os.open(Path(cache_dir) / LEDGER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        try:
            os.write(handle, line + b"\n")
        finally:
            os.close(handle)
    except OSError as exc:
        raise CacheError(f"{cache_dir}: cannot record the run's spend ({exc.strerror})") from exc


def study_prompt_cache(cache_dir: Path, config: EvalConfig) -> PromptCacheShare | None:
    """The prompt tokens the earlier runs of this study's config recorded, and how many of
    them the answers' usage said were cached (None: no run recorded any)."""
    try:
        lines = (Path(cache_dir) / LEDGER).read_bytes().splitlines()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CacheError(f"{cache_dir}: cannot read {LEDGER} ({exc.strerror})") from exc
    study, prompt, cached, found = _study(config), 0, 0, False
    for line in lines:
        try:
            run = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(run, dict) or run.get("config") != study:
            continue
        tokens, hits = run.get("prompt_tokens"), run.get("cached_tokens")
        if type(tokens) is int and type(hits) is int:
            prompt, cached, found = prompt + tokens, cached + hits, True
    return PromptCacheShare(prompt, cached) if found and prompt else None


def run_budget(
    config: EvalConfig,
    cache_dir: Path,
    *,
    batch: bool = False,
    shared: SharedCap | None = None,
) -> Budget | None:
    """The budget of a run: the ``--max-cost`` cap less what earlier runs spent, or (no cap)
    an unlimited one that only counts; None when the model has no price and there is no cap.
    With ``batch``, at the Batch API price (a submit of batch jobs). With ``shared``, the cap
    is a panel's, spent from by every judge of it (:func:`panel_cap`)."""
    price = price_of(config.judge.model, config.price_table, batch=batch)
    cached = None if batch else cached_input_price(config.judge.model, config.price_table)
    if config.max_cost is None:
        return None if price is None else Budget(math.inf, price, cached_price=cached)
    if price is None:
        raise ConfigError(
            f"--max-cost needs the {'batch ' if batch else ''}price of model "
            f"{config.judge.model!r}: "
            "add it to the config's [prices] table"
        )
    if shared is not None:
        return Budget(shared.cap, price, before=shared.before, cached_price=cached, shared=shared)
    return Budget(
        config.max_cost, price, before=study_spent(cache_dir, config), cached_price=cached
    )


def panel_cap(config: EvalConfig, cache_dir: Path) -> SharedCap | None:
    """The one ``--max-cost`` cap of a panel's judges run at once (None: no cap): what every
    earlier run of the study's config spent, whichever judge, counts against it."""
    if config.max_cost is None:
        return None
    return SharedCap(config.max_cost, before=study_spent(cache_dir, config))


def request_cost(budget: Budget, request: JudgeRequest, *, one_choice: bool = False) -> float:
    """The most a request can cost: its prompt estimate plus max_tokens x n completion; with
    ``one_choice`` (the endpoint refuses n > 1: the request is sent asking for one answer),
    max_tokens x 1."""
    max_tokens = request.config.sampling.max_tokens
    completion = max_tokens * request.n  # request.max_completion_tokens, without the property
    return budget.cost(request.est_tokens - completion, max_tokens if one_choice else completion)
