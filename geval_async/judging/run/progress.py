"""Run counters, and when to show them.

:class:`RunCounters` is what the runner updates and what the summary reports: per criterion,
items done (from the cache or newly answered), refused, failed and still missing; per run,
requests sent, tokens, 429s and retries by kind. :func:`report_progress` hands them to the
caller every few seconds; the command line renders them (:mod:`geval_async.cli.progress`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ...study.pricing import PromptCacheShare
from ...study.responses_api import UsageTokens

# How often a quiet run looks for new retries: the first is said within this, not an interval.
RETRY_LOOK = 0.25


@dataclass
class CriterionCounts:
    """Per-criterion item outcomes of one run."""

    items: int = 0
    cached: int = 0
    answered: int = 0
    rejected: int = 0
    failed: int = 0

    @property
    def done(self) -> int:
        return self.cached + self.answered

    @property
    def missing(self) -> int:
        return self.items - self.done - self.rejected - self.failed


@dataclass
class RunCounters:
    """Everything a run counts; the source of the progress line and the summary."""

    criteria: dict[str, CriterionCounts] = field(default_factory=dict)
    requests_sent: int = 0
    tokens: int = 0
    rate_limited: int = 0
    retries: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0
    peak_in_flight: int = 0
    simulated: bool = False
    last_retry: str = ""  # the failure of the latest retry, e.g. "connection refused"
    # The latest pause a failure asked for: until when (time.monotonic()) and why.
    wait_until: float = 0.0
    wait_reason: str = ""
    # Choices of this run's answers that hold no rating to read, by why ("content null"),
    # and the ones that hold something: "every answer unusable" is said, not scored as 0.
    unusable: Counter[str] = field(default_factory=Counter)
    usable: int = 0
    # Answers whose body names a model other than the one asked (not a dated snapshot of
    # it), by the name served.
    served: Counter[str] = field(default_factory=Counter)
    asked_model: str = ""
    in_batch: int = 0  # items skipped because a live batch job holds their requests
    # Draws spent by need: the round being asked (1: the opening one, every item of the
    # plan; a later one asks only the items still drawing, counted in ``criteria`` then).
    round: int = 1
    # Prompt tokens this run's answers reported, and of them the ones read from the
    # provider's prompt cache (cache_reported: some usage said how many, 0 included).
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_reported: bool = False
    started: float = field(default_factory=time.monotonic)
    # Answers and tokens per second of the last minute: [second, answers, tokens] (a deque of
    # one entry per answer held 200,000 tuples at 3,500 answers a second).
    _recent: deque[list[int]] = field(default_factory=deque, repr=False)  # a minute of sends

    def total(self) -> CriterionCounts:
        out = CriterionCounts()
        for c in self.criteria.values():
            out.items += c.items
            out.cached += c.cached
            out.answered += c.answered
            out.rejected += c.rejected
            out.failed += c.failed
        return out

    def note_retry(self, label: str) -> None:
        """Count a retry of kind ``label`` ("429", "http 503", "connection refused", ...)."""
        self.retries[label] += 1
        self.last_retry = label

    def note_wait(self, seconds: float, reason: str) -> None:
        """A pause of ``seconds`` begins now, for ``reason`` ("429, Retry-After 30")."""
        until = time.monotonic() + seconds
        if until >= self.wait_until or self.wait_left() == 0:
            self.wait_until, self.wait_reason = until, reason

    def wait_left(self) -> float:
        """Seconds left in the latest pause (0: none)."""
        return max(0.0, self.wait_until - time.monotonic())

    def every_answer_unusable(self) -> str:
        """ "8 x content null, 2 x no logprobs" when no answer of this run had anything to
        read, else ""."""
        if self.usable or not self.unusable:
            return ""
        return ", ".join(f"{count} x {why}" for why, count in self.unusable.most_common())

    def note_usage(self, tokens: UsageTokens | None) -> None:
        """Count an answer's prompt tokens and the cached part (its usage, read once)."""
        if tokens is not None:
            self.prompt_tokens += tokens.prompt
            self.cached_tokens += tokens.cached
            self.cache_reported = self.cache_reported or tokens.cache_reported

    def prompt_cache(self) -> PromptCacheShare | None:
        """The cached share of this run's prompt tokens (None: no usage said)."""
        if not self.cache_reported or not self.prompt_tokens:
            return None
        return PromptCacheShare(self.prompt_tokens, self.cached_tokens)

    @property
    def retried(self) -> int:
        return sum(self.retries.values())

    def record_answer(self, tokens: int) -> None:
        """Count an answer (the request was counted in ``requests_sent`` when it went out)."""
        second = int(time.monotonic())
        self.tokens += tokens
        recent = self._recent
        last = recent[-1] if recent else None
        if last is not None and last[0] == second:
            last[1] += 1
            last[2] += tokens
        else:
            recent.append([second, 1, tokens])
            # A one-minute window gives rates a user can compare with their RPM/TPM limits.
            while recent[0][0] < second - 60:
                recent.popleft()

    def rates(self) -> tuple[float, float]:
        """Requests and tokens per minute over the last minute (or since the start)."""
        now = time.monotonic()
        recent = [r for r in self._recent if r[0] >= now - 60.0]
        if not recent:
            return 0.0, 0.0
        span = min(60.0, max(1.0, now - self.started))
        per_minute = 60.0 / span
        return (
            sum(r[1] for r in recent) * per_minute,
            sum(r[2] for r in recent) * per_minute,
        )


@dataclass
class RunResult:
    """What a run did: counts, why it stopped early (if it did) and sample failures."""

    counters: RunCounters
    stopped: str | None = None
    interrupted: bool = False
    failures: Counter[str] = field(default_factory=Counter)
    elapsed: float = 0.0
    endpoint: str | None = None  # what the endpoint accepts, as learned ("gpt-5-mini at ...")
    billed: float | None = None  # USD the answers' usage reported (None: the model has no price)
    warnings: list[str] = field(default_factory=list)  # lines said during the run (on_warning)
    corrupted: int = 0  # cache entries that did not decode: counted as missing, asked again

    @property
    def complete(self) -> bool:
        """Whether every item of the plan has all its answers."""
        total = self.counters.total()
        return total.done == total.items


async def report_progress(
    counters: RunCounters,
    on_progress: Callable[[RunCounters], None] | None,
    on_retries: Callable[[RunCounters], None] | None,
    interval: float,
) -> None:
    """Every ``interval`` seconds, the counters to ``on_progress``; or (quiet) to
    ``on_retries`` when the retries grew: at the first retry (within :data:`RETRY_LOOK`
    seconds), then not more often than every ``interval`` seconds."""
    if on_progress is not None:
        while True:
            await asyncio.sleep(interval)
            on_progress(counters)
    if on_retries is None:
        return
    clock = asyncio.get_running_loop().time
    reported, said = 0, -math.inf
    while True:
        await asyncio.sleep(RETRY_LOOK)
        if counters.retried > reported and clock() - said >= interval:
            reported, said = counters.retried, clock()
            on_retries(counters)
