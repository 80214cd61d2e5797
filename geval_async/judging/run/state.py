"""The state one run shares between its producer, its workers and their attempts.

A run's state is what every request of it reads and changes: the limits and the budget, the
counters, what the endpoint accepts (learned from its answers), the history the failure
decision reads, the writer and the claims, and the one way the run stops (:meth:`RunState.halt`:
the ``stop`` event stops dispatching, answers in flight are still saved, and ``stopped`` holds
the line to show). The CLI sets the event on Ctrl-C, and a ``--max-cost`` cap sets it too.
One attempt at one request is :mod:`.attempt`; the workers that claim and attempt requests
are :mod:`.worker`.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...errors import TransportError
from ...options import ItemOutcome, JudgeApi, Left, SamplingMode
from ...study.plan import JudgeItem, JudgeRequest, Study
from ...study.pricing import SharedCap
from ...study.prompt_cache import prefix_share, prompt_cache_key
from ..store.cache import CachedResponse
from ..store.claims import Claims
from ..store.origin import ServerEntries
from ..wire.capabilities import load_capabilities
from ..wire.failures import History
from ..wire.limits import RateLimits
from ..wire.probe import same_model
from ..wire.refused_settings import unusable_choice
from .budget import run_budget
from .entries import answer_entry, refusal_entry
from .feed import Feed
from .progress import CriterionCounts, RunCounters
from .writer import Writer

if TYPE_CHECKING:
    from ..wire.transport import JudgeAnswer, Transport

__all__ = ["RunState"]


class RunState:
    """The state one run shares between its producer, workers and attempts."""

    def __init__(
        self,
        study: Study,
        entries: ServerEntries,
        *,
        stop: asyncio.Event,
        retry_failed: bool,
        backoff: float,
        warn: Callable[[str], None] | None = None,
        cap: SharedCap | None = None,
    ) -> None:
        self.study, self.config = study, study.config
        # Lookups go through the server's view: another server's answers read as missing.
        self.cache, self.entries = entries.cache, entries
        # Set by connect(), once the plan has something to send.
        self.transport: Transport
        self.claims: Claims
        self.writer: Writer
        self.stop, self.retry_failed, self.backoff = stop, retry_failed, backoff
        limits = self.config.limits
        self.warnings: list[str] = []

        def note(line: str) -> None:
            self.warnings.append(line)
            if warn is not None:
                warn(line)

        self.note = note

        self.limits = RateLimits(
            limits.rpm, limits.tpm, stop=stop, warn=note, max_wait=limits.max_wait
        )
        self.counters = RunCounters(
            criteria={
                name: CriterionCounts(items=items)
                for name, items in study.items_by_criterion().items()
            },
            asked_model=self.config.judge.model,
        )
        self.failures: Counter[str] = Counter()
        self.stopped: str | None = None
        self.budget = run_budget(self.config, self.cache.directory, shared=cap)
        judge = self.config.judge
        # What the endpoint accepts (the token parameter's name, n > 1), as earlier runs
        # learned it: the wire is spelt right from the first request.
        self.endpoint = load_capabilities(
            self.cache.directory, judge.url, judge.model, api=judge.api, store=judge.store
        )
        responses = self.endpoint.api is JudgeApi.RESPONSES
        self.history = History(
            judge.responses_url if responses else judge.url,  # the URL failures name
            judge.api_key_env,
            self.config.judge_entry,
            self.config.sampling_entry,
            retries=limits.retries,
            max_wait=limits.max_wait,
        )
        # The prompt_cache_key of each criterion whose requests share a prefix long enough for
        # the provider to cache: it routes them to the machines that hold it (None: nothing
        # shared to route by, and nothing sent that a local server might not know).
        self.cache_keys = {
            criterion.name: prompt_cache_key(judge.model, criterion)
            if prefix_share(criterion).cacheable
            else None
            for criterion in study.planned_criteria
        }
        self.logprobs = self.config.sampling.mode == SamplingMode.LOGPROBS
        self._served: tuple[str | None, bool] = (None, True)  # last model named, the one asked?
        self.feed = self._feed(study)
        # The run's counts while a later round of draws counts its own (start_round).
        self._run_counts: dict[str, CriterionCounts] | None = None
        # Draws spent by need: each adaptive item's latest outcome, and whether this run
        # answered any of its draws. An item is asked in several rounds, so the run's counts
        # of these criteria are made from where each item ended (settle_counts), not summed.
        self.item_outcomes: dict[tuple[str, str], tuple[ItemOutcome, bool]] | None = None
        self._adaptive: frozenset[str] = frozenset()
        allotment = study.allotment
        if allotment is not None and allotment.criteria:
            self.item_outcomes = {}
            self._adaptive = allotment.criteria
            self.feed.on_left = self.note_left

    def start_round(self, study: Study) -> None:
        """Ask a later round of draws spent by need (:mod:`geval_async.study.draws`): its
        items have their own feed and counts, which :meth:`end_round` folds into the run's."""
        self.end_round()
        self.study = study
        self._run_counts = self.counters.criteria
        self.counters.criteria = {
            name: CriterionCounts(items=items) for name, items in study.items_by_criterion().items()
        }
        self.counters.round += 1
        self.feed = self._feed(study)
        self.feed.writer = self.writer
        if self.item_outcomes is not None and study.allotment is not None:
            self.feed.on_left = self.note_left
            for key in study.allotment.draws:
                self._outcome(key, None)  # asked again: not done until this round answers it

    def _feed(self, study: Study) -> Feed:
        """The feed of ``study``'s items, under the run's limits, endpoint and counts."""
        return Feed(
            study,
            self.entries,
            limits=self.limits,
            endpoint=self.endpoint,
            counters=self.counters,
            stop=self.stop,
            retry_failed=self.retry_failed,
        )

    def end_round(self) -> None:
        """Back to the run's counts after a later round (the round's showed its progress)."""
        if self._run_counts is not None:
            self.counters.criteria, self._run_counts = self._run_counts, None

    def note_item(self, item: JudgeItem, outcome: ItemOutcome, paid: bool) -> None:
        """An adaptive item's outcome in this round (a worker answered, refused or failed it;
        ``paid``: the judge answered this run, not another process)."""
        if self.item_outcomes is not None and item.criterion.name in self._adaptive:
            self._outcome((item.criterion.name, item.record.id), outcome, answered=paid)

    def note_left(self, item: JudgeItem, left: Left) -> None:
        """An adaptive item the walk found settled by the cache (answered or refused)."""
        if item.criterion.name in self._adaptive:
            outcome = ItemOutcome.OK if left is Left.CACHED else ItemOutcome.REJECTED
            self._outcome((item.criterion.name, item.record.id), outcome)

    def _outcome(
        self, key: tuple[str, str], outcome: ItemOutcome | None, *, answered: bool = False
    ) -> None:
        assert self.item_outcomes is not None
        _, before = self.item_outcomes.get(key, (ItemOutcome.OK, False))
        self.item_outcomes[key] = (
            ItemOutcome.STOPPED if outcome is None else outcome,
            before or (answered and outcome is ItemOutcome.OK),
        )

    def settle_counts(self) -> None:
        """The run's counts of the adaptive criteria, from where each of their items ended
        (an item not counted at all was left by a stop: missing)."""
        self.end_round()
        if self.item_outcomes is None:
            return
        for name in self._adaptive:
            counts = self.counters.criteria[name]
            counts.cached = counts.answered = counts.rejected = counts.failed = 0
        for (name, _), (outcome, answered) in self.item_outcomes.items():
            counts = self.counters.criteria[name]
            if outcome is ItemOutcome.OK:
                if answered:
                    counts.answered += 1
                else:
                    counts.cached += 1
            elif outcome is ItemOutcome.REJECTED:
                counts.rejected += 1
            elif outcome is ItemOutcome.FAILED:
                counts.failed += 1

    def connect(self, transport: Transport, claims: Claims) -> None:
        self.transport, self.claims = transport, claims
        self.writer = Writer(self.cache, claims, stop=self.stop, warn=self.note)
        self.feed.writer = self.writer

    def cached(self, request: JudgeRequest) -> CachedResponse | None:
        """The usable cache entry of a request (a refusal counts unless --retry-failed)."""
        entry = self.entries.get(request.key)
        if entry is not None and not entry.ok and self.retry_failed:
            return None
        return entry

    def halt(self, line: str) -> None:
        """Stop the run (the one way): no more dispatching, and ``line`` is what it says."""
        if self.stopped is None:
            self.stopped = line
        self.stop.set()

    def delay(self, attempt: int) -> float:
        """Capped exponential backoff with full jitter."""
        cap = min(self.config.limits.max_backoff, self.backoff * 2 ** (attempt - 1))
        return random.uniform(cap / 2, cap)

    async def sleep_unless_stopped(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self.stop.wait()
        except TimeoutError:
            pass

    def fail(self, request: JudgeRequest, message: str) -> ItemOutcome:
        self.failures[f"{request.item.criterion.name}: {message}"] += 1
        return ItemOutcome.FAILED

    def store_answer(self, request: JudgeRequest, answer: JudgeAnswer, attempts: int) -> None:
        entry = answer_entry(request, answer, attempts)
        counters, usage = self.counters, entry.usage
        tokens = usage.get("total_tokens") if usage else None
        counters.record_answer(tokens if isinstance(tokens, int) else request.est_tokens)
        counters.simulated = counters.simulated or entry.simulated
        parsed = answer.parsed
        served = parsed.get("model")
        if isinstance(served, str):  # a run's answers name a model or two: the last one's kept
            if served != self._served[0]:
                self._served = (served, same_model(served, entry.model))
            if not self._served[1]:
                counters.served[served[:100]] += 1
        choices = parsed["choices"]
        if answer.texts == len(choices) and not self.logprobs:
            usable = answer.texts  # the usual answer: every choice holds text (transport.py)
        else:
            logprobs = self.logprobs
            usable = 0
            for choice in choices:  # each a dict with a message dict (transport.py)
                why = unusable_choice(choice, logprobs=logprobs)
                if why is None:
                    usable += 1
                else:
                    self.counters.unusable[why] += 1
        self.counters.usable += usable
        self._put(request, entry)

    def store_refusal(
        self, request: JudgeRequest, exc: TransportError, attempts: int, reason: str
    ) -> None:
        self.failures[f"{request.item.criterion.name}: refused: {reason}"] += 1
        self._put(request, refusal_entry(request, exc, attempts, reason))

    def _put(self, request: JudgeRequest, entry: CachedResponse) -> None:
        overwrite = self.retry_failed or (
            # Both empty unless the walk found damaged entries or another server's.
            bool(self.cache.corrupted or self.entries.hidden)
            and (request.key in self.cache.corrupted or request.key in self.entries.hidden)
        )
        self.writer.put(entry, overwrite=overwrite)
