"""Text a person reads after a command: the run summary, the coverage table, the dry-run estimate.

Pure formatting from counts; nothing here touches the network or the cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..judging.run.budget import StudyBudget
from ..judging.run.estimate import RunEstimate
from ..judging.run.progress import RunCounters
from ..judging.store.coverage import Coverage
from ..options import JudgeApi
from ..study.config import EvalConfig
from ..study.plan import Study
from ..study.settings import SamplingConfig

if TYPE_CHECKING:
    from ..scoring.scores.draws import DrawTally

SIMULATED_NOTE = "judge: geval-async's SIMULATED server (ratings are synthetic, not an LLM's)"


def table(header: list[str], rows: list[list[object]]) -> str:
    """A fixed-width table, first column left-aligned, the rest right-aligned."""
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for number, row in enumerate(cells):
        rest = [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        parts = [row[0].ljust(widths[0]), *rest]
        lines.append("  ".join(parts).rstrip())
        if number == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_summary(counters: RunCounters, elapsed: float) -> str:
    """Per-criterion outcomes and run totals."""
    rows: list[list[object]] = []
    for name, c in counters.criteria.items():
        rows.append([name, c.items, c.cached, c.answered, c.rejected, c.failed, c.missing])
    t = counters.total()
    rows.append(["total", t.items, t.cached, t.answered, t.rejected, t.failed, t.missing])
    lines = [table(["criterion", "items", "cached", "new", "refused", "failed", "missing"], rows)]
    retries = ", ".join(f"{kind} {count}" for kind, count in sorted(counters.retries.items()))
    lines.append(
        f"requests sent {counters.requests_sent}, tokens {counters.tokens}, "
        f"429s {counters.rate_limited}, retries: {retries or 'none'}, "
        f"peak in flight {counters.peak_in_flight}, {elapsed:.1f} s"
    )
    if counters.served:
        names = ", ".join(f"{name} ({count})" for name, count in counters.served.most_common(3))
        lines.append(
            f"note: {counters.asked_model} was asked, but the server says it answered with "
            f"{names}: the answers are stored as received (their bodies keep the name served)"
        )
    if counters.in_batch:
        lines.append(
            f"{counters.in_batch} items are in live batch jobs (not sent again): "
            "collect them with `geval-async batch collect CONFIG`"
        )
    if counters.simulated:
        lines.append(SIMULATED_NOTE)
    return "\n".join(lines)


def coverage_table(counts: Mapping[str, Coverage]) -> str:
    """``status``: per criterion, items answered, refused and missing, and (while batch jobs
    are live) the items in them, apart from the missing ones."""
    total = Coverage(
        answered=sum(c.answered for c in counts.values()),
        refused=sum(c.refused for c in counts.values()),
        missing=sum(c.missing for c in counts.values()),
        in_batch=sum(c.in_batch for c in counts.values()),
    )
    header = ["criterion", "items", "answered", "refused", "missing"]
    rows: list[list[object]] = [
        [name, c.items, c.answered, c.refused, c.missing]
        for name, c in [*counts.items(), ("total", total)]
    ]
    if total.in_batch:
        header.append("in batch")
        for row, c in zip(rows, [*counts.values(), total], strict=True):
            row.append(c.in_batch)
    return table(header, rows)


def expected_duration(requests: int, tokens: int, rpm: float | None, tpm: float | None) -> str:
    """``--dry-run``: how long the limits make the run at the least, and which one binds."""
    if not requests:
        return "expected duration: none (nothing to send)"
    bounds = []
    if rpm:
        bounds.append((requests / rpm, f"{requests} requests at rpm {rpm:g}"))
    if tpm:
        bounds.append((tokens / tpm, f"{tokens} tokens at tpm {tpm:g}"))
    if not bounds:
        return (
            "expected duration: unknown (no rpm/tpm limits: the server's speed and "
            "concurrency decide)"
        )
    minutes, reason = max(bounds)
    return f"expected duration: at least {_duration(minutes * 60)} under the limits ({reason})"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def budget_left(budget: StudyBudget) -> str:
    """What the study budget leaves, for the resume line: each resume spends from the same cap."""
    from ..study.pricing import usd

    left = budget.left
    return (
        f"\n  (study budget --max-cost {usd(budget.cap)}: {usd(budget.spent)} estimated so far, "
        f"{usd(left)} left" + ("; raise --max-cost to continue)" if left < 1e-9 else ")")
    )


@dataclass(frozen=True)
class DryRunEstimate:
    """What :func:`dry_run` printed, for a panel's total (cost None: the model has no price)."""

    requests: int
    tokens: int
    cost: float | None


def dry_run(study: Study, estimate: RunEstimate) -> DryRunEstimate:
    """Print what a run would send, cost and take (``run --dry-run``), as counted by the
    run's rules (:func:`geval_async.judging.run.estimate.estimate_run`)."""
    from ..study.pricing import estimate_cost

    config = study.config
    requests, tokens = estimate.requests, estimate.tokens
    prompt_tokens, completion_tokens = estimate.prompt_tokens, estimate.completion_tokens
    cost = estimate_cost(config.judge.model, prompt_tokens, completion_tokens, config.price_table)
    rated = len(study.criteria)
    paired = len(study.pairwise)
    print(
        f"items: {study.item_count} ({len(study.selected_records)} records x "
        f"{rated} {'criterion' if rated == 1 else 'criteria'}"
        + (f", and pairs of them on {paired} pairwise" if paired else "")
        + (f", shard {config.shard}" if config.shard else "")
        + f"), {config.sampling.choices_per_item} answers each"
    )
    print(
        f"already cached: {estimate.cached}; "
        + (f"refused (not asked again): {estimate.refused}; " if estimate.refused else "")
        + (f"in live batch jobs: {estimate.in_batch}; " if estimate.in_batch else "")
        + f"requests to send: {requests}"
        # An endpoint of one answer a request is counted a request a draw already.
        + ("" if estimate.one_choice else " (more if the server ignores n)")
        + (
            f", of them {estimate.steps_requests} for evaluation steps"
            if estimate.steps_requests
            else ""
        )
    )
    if estimate.api is JudgeApi.RESPONSES:
        print(
            f"note: {config.judge.model} is judged on the Responses API at "
            f"{config.judge.responses_url} ("
            + (
                "the config's [judge] api"
                if config.judge.api is JudgeApi.RESPONSES
                else "an earlier run learned chat completions refuse it"
            )
            + f"): one answer a request, so an item's {config.sampling.n} answers are that "
            "many requests, each carrying the prompt"
        )
    elif estimate.one_choice:
        print(
            f"note: {config.judge.model} at {config.judge.url} gives one answer a request "
            f"(an earlier run learned it refuses n > 1): an item's {config.sampling.n} answers "
            "are that many requests, each carrying the prompt (all but the first read it from "
            "a provider's prompt cache when it is 1,024 tokens or more)"
        )
    if estimate.simulated is None:
        print(
            f"note: {config.judge.url} did not answer: every stored answer is counted as "
            "cached, whichever server gave it (the run asks the server first)"
        )
    print(
        f"estimated tokens: {tokens} ({prompt_tokens} prompt + "
        f"{completion_tokens} completion at most)"
    )
    print(
        "estimated cost: "
        + (f"${cost:.2f}" if cost is not None else f"unknown (no price for {config.judge.model!r})")
        + _batch_cost(config, prompt_tokens, completion_tokens)
    )
    print(expected_duration(requests, tokens, config.limits.rpm, config.limits.tpm))
    for line in prompt_cache_lines(estimate.study):
        print(f"prompt cache: {line}")
    print("dry run: nothing was sent")
    return DryRunEstimate(requests, tokens, cost)


def prompt_cache_lines(study: Study) -> list[str]:
    """A line per criterion: how many tokens of its prompt all its requests share (the start
    a provider's prompt cache can serve them), as ``--dry-run`` says it."""
    from ..study.evaluation_steps import with_estimated_steps
    from ..study.prompt_cache import prefix_share

    return [prefix_share(c).line() for c in with_estimated_steps(study).planned_criteria]


def _batch_cost(config: EvalConfig, prompt_tokens: int, completion_tokens: int) -> str:
    """``--dry-run``'s batch price, after the online one ("" when the price is unknown)."""
    from ..study.pricing import estimate_cost

    model, prices = config.judge.model, config.price_table
    cost = estimate_cost(model, prompt_tokens, completion_tokens, prices, batch=True)
    return "" if cost is None else f" online, ${cost:.2f} by batch (--batch)"


def adaptive_dry_run(
    study: Study, in_batch: Container[str], *, retry_failed: bool
) -> DryRunEstimate:
    """``run --dry-run`` of a study whose draws are spent by need: what its next round sends
    (every item still drawing stops there: the least), then the most (every such item drawn
    to n, or the budget left) and an estimate from where the items settled so far stopped."""
    from ..judging.run.estimate import estimate_run
    from ..judging.store.read_model import JudgeCache, stored_study
    from ..scoring.scores.draws import DrawBounds, draw_bounds
    from ..study.pricing import estimate_cost

    config = study.config
    sampling = config.sampling
    bounds: DrawBounds
    ready = stored_study(study) if config.cache_path.is_dir() else study
    if ready.pending_steps or not config.cache_path.is_dir():
        bounds = draw_bounds(ready, None)  # nothing judged yet
    else:
        with JudgeCache(config.cache_path, create=False) as cache:
            bounds = draw_bounds(ready, cache)

    async def both() -> tuple[RunEstimate, RunEstimate]:
        return (
            await estimate_run(bounds.least, retry_failed=retry_failed, in_batch=in_batch),
            await estimate_run(bounds.most, retry_failed=retry_failed, in_batch=in_batch),
        )

    least, most = asyncio.run(both())
    estimate = dry_run(bounds.least, least)

    def cost(estimate: RunEstimate) -> float | None:
        return estimate_cost(
            config.judge.model,
            estimate.prompt_tokens,
            estimate.completion_tokens,
            config.price_table,
        )

    print(f"{_by_need(sampling)}: {bounds.settled} items settled, {bounds.drawing} still drawing")
    low, high = cost(least), cost(most)
    print(
        f"  least: {bounds.least_draws} draws, {least.requests} requests, {_usd(low)} "
        "(every item still drawing stops after its next round: what is above)"
    )
    # A budget caps the most: the least, and of the draws past it only those the budget has
    # left, each at what a draw past the least costs when every item is asked up to n.
    past = bounds.most_asked - bounds.least_draws
    part = 1.0 if past <= 0 else min(1.0, max(0.0, (bounds.most_draws - bounds.least_draws) / past))
    drawn = None if low is None or high is None else low + part * (high - low)
    if most.one_choice:  # one answer a request: a draw past the least is a request
        most_requests = least.requests + round(part * (most.requests - least.requests))
        top = drawn
    else:
        # On an endpoint that takes n, every further round is a request that pays the prompt
        # again; at worst a round adds one draw to an item.
        most_requests = least.requests + bounds.most_rounds
        base = least if least.requests else most
        prompt = bounds.most_rounds * base.prompt_tokens / base.requests if base.requests else 0
        completion = part * (most.completion_tokens - least.completion_tokens)
        more = estimate_cost(
            config.judge.model, round(prompt), round(completion), config.price_table
        )
        top = None if low is None or more is None else low + more
    print(
        f"  most: {bounds.most_draws} draws, {most_requests} requests, {_usd(top)} "
        + (
            "(every item still drawing asked up to n"
            if sampling.draws is None
            else "(the budget left, spent where ratings disagree most"
        )
        + ("" if most.one_choice or not bounds.most_rounds else ", at worst a round a draw")
        + ")"
    )
    if bounds.share is None:
        print("  estimate: none yet (no item has settled; run once to learn where items stop)")
    else:
        draws = round(bounds.least_draws + bounds.share * (bounds.most_draws - bounds.least_draws))
        # Where the settled items stopped, in draws; the rounds they took are not known here.
        guess = None if low is None or drawn is None else low + bounds.share * (drawn - low)
        print(
            f"  estimate: about {draws} draws, {_usd(guess)}, from where the {bounds.settled} "
            f"items settled so far stopped ({bounds.share:.0%} of the way from first_draws to n)"
        )
    return estimate


def _usd(value: float | None) -> str:
    from ..study.pricing import usd

    return "unknown (no price)" if value is None else usd(value)


def draws_lines(tally: DrawTally, sampling: SamplingConfig) -> list[str]:
    """``status`` of a study whose draws are spent by need: per criterion, the items settled
    (how many at first_draws) and still drawing, and the draws the settled ones used against
    the fixed n's."""
    lines = [f"{_by_need(sampling)}:"]
    for name in sorted(set(tally.settled) | set(tally.drawing)):
        settled, drawing = tally.settled[name], tally.drawing[name]
        used, fixed = tally.used[name], settled * sampling.n
        lines.append(
            f"  {name}: {settled} items settled ({tally.at_first[name]} at first_draws), "
            f"{drawing} still drawing; the settled used {used} draws"
            + (f", {used / fixed:.0%} of n = {sampling.n} each" if fixed else "")
        )
    return lines


def _by_need(sampling: SamplingConfig) -> str:
    """ "draws spent by need (target_se = 0.15, first_draws = 3, n = 20)"."""
    rule = (
        f"target_se = {sampling.target_se:g}"
        if sampling.target_se is not None
        else f"a budget of {sampling.draws} draws"
    )
    return f"draws spent by need ({rule}, first_draws = {sampling.first_draws}, n = {sampling.n})"
