"""One run's shared state and its workers: claim, send, decide, store.

A worker takes an item from the feed (an item's draws lent out first, :attr:`.Feed.lent`),
claims each request (:mod:`.claims`), waits for the shared cool-down and the RPM/TPM buckets,
sends one attempt spelt as the endpoint wants it (:mod:`.capabilities`), and writes the answer
to the cache at once. A request another process,
or another item of this run, is already asking for is not sent twice: the worker waits for its
answer in the cache.

Failures: the transport raises one error per failed attempt carrying its typed facts;
:func:`~geval_async.judging.wire.failures.decide`, called once here with the run's history, says
what
it means (pause every worker after a 429, back off and retry, resend under the other token
parameter, store a refusal, give up, or stop the run) and :meth:`Run.apply` does it. A run
stops one way, :meth:`Run.halt`: the ``stop`` event stops dispatching (answers in flight are
still saved) and ``stopped`` holds the line to show. The CLI sets the event on Ctrl-C, and a
``--max-cost`` cap sets it too.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import TransportError
from ...options import ItemOutcome, JudgeApi, SamplingMode
from ...study.plan import JudgeRequest, Study, chunk_request
from ...study.pricing import SharedCap
from ...study.prompt_cache import prefix_share, prompt_cache_key
from ...study.responses_api import read_usage
from ..store.cache import CachedResponse
from ..store.claims import Claims
from ..store.origin import ServerEntries
from ..wire.capabilities import load_capabilities
from ..wire.failures import Action, Decision, History, decide
from ..wire.limits import RateLimits
from ..wire.probe import same_model
from ..wire.refused_settings import answer_fact, ignored_logprobs, unusable_choice
from .budget import request_cost, run_budget
from .entries import answer_entry, refusal_entry
from .feed import Feed, ItemDraws, ItemWork
from .progress import CriterionCounts, RunCounters
from .writer import Writer

if TYPE_CHECKING:
    from ..wire.transport import JudgeAnswer, Transport

__all__ = ["Run", "same_model"]

# How often a worker looks for an answer another process is fetching (seconds).
_CLAIM_POLL = 0.2

# Read from its class, an enum's member is a lookup each time (0.1 us): read once here.
_OK, _REJECTED, _FAILED = ItemOutcome.OK, ItemOutcome.REJECTED, ItemOutcome.FAILED
_STOPPED = ItemOutcome.STOPPED


def _settings(body: dict[str, Any]) -> dict[str, Any]:
    """What a request body set besides its messages (what a failure's decision reads)."""
    return {name: value for name, value in body.items() if name not in ("messages", "input")}


class Run:
    """The state one run shares between its producer and workers."""

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
        self.feed = Feed(
            study,
            self.entries,
            limits=self.limits,
            counters=self.counters,
            stop=stop,
            retry_failed=retry_failed,
        )

    def connect(self, transport: Transport, claims: Claims) -> None:
        self.transport, self.claims = transport, claims
        self.writer = self.feed.writer = Writer(self.cache, claims)

    def cached(self, request: JudgeRequest) -> CachedResponse | None:
        """The usable cache entry of a request (a refusal counts unless --retry-failed)."""
        entry = self.entries.get(request.key)
        if entry is not None and not entry.ok and self.retry_failed:
            return None
        return entry

    # --- workers -------------------------------------------------------------------------

    async def work(self) -> None:
        """Judge the feed's items until it has none left, and the draws lent out until no
        item is left that could lend any."""
        feed, config = self.feed, self.config
        queue, lent = feed.queue, feed.lent
        queue_done = False  # the queue has handed this worker its last None
        while True:
            work: ItemWork | None
            if lent:  # an item's draws, lent out once its first answer was in: first
                work = lent.popleft()
            elif not queue_done:
                work = await queue.get() if queue.empty() else queue.get_nowait()  # no coroutine
                if work is None:
                    queue_done = True
                    continue
            elif feed.on_items:  # items in other workers' hands may still lend their draws
                feed.waiting += 1
                feed.wake.clear()
                try:
                    await feed.wake.wait()
                finally:
                    feed.waiting -= 1
                continue
            else:
                return
            if self.stop.is_set():
                if work.claimed is not None:
                    self.writer.release(work.requests[0].key)
                work.opened()
                continue  # drain without sending: the item stays missing
            if work.draws is not None:
                await self.fetch_lent(work, work.draws)
                continue
            # The item's requests in turn, here rather than in a coroutine of their own (one
            # made an item, and a frame more each time the task resumes).
            feed.on_items += 1
            outcome, pending, lent_out = _OK, work.requests, False
            claim: tuple[float | None, bool] | None = (work.claimed, work.stored)
            try:
                while pending:
                    request, pending = pending[0], pending[1:]
                    try:
                        outcome, received = await self.fetch_claimed(request, claim)
                    finally:
                        if claim is not None:  # the item's first request: its criterion may go
                            work.opened()
                    claim = None  # a later chunk is claimed by the worker
                    if outcome is not _OK:
                        break
                    if received < request.n:
                        # Fewer choices than asked (an earlier run with a smaller n, or
                        # llama.cpp, which ignores n): the rest is the chunk that starts where
                        # this one ended, an earlier run may have stored it (fetch_claimed then
                        # reads it); to an endpoint of one answer a request, its draws are lent
                        # out, and the item counted when the last is in.
                        rest = chunk_request(request, request.draw + received, config)
                        if self.lend_draws(work, rest):
                            lent_out = True
                            break
                        pending = [rest]
            finally:
                feed.on_items -= 1
                if feed.waiting:
                    feed.wake.set()
            if not lent_out:
                self.count(work, outcome)

    def lend_draws(self, work: ItemWork, rest: JudgeRequest) -> bool:
        """Lend out the draws of ``rest`` one a request (:attr:`Feed.lent`), when the endpoint
        answers one a request and no earlier run stored the rest; whether they were."""
        if not self.endpoint.one_request_per_draw or rest.n < 2 or self.cached(rest) is not None:
            return False
        total = rest.draw + rest.n
        draws = ItemDraws(left=rest.n)
        feed = self.feed
        feed.lent.extend(
            ItemWork(work.item, [chunk_request(rest, draw, self.config)], draws=draws)
            for draw in range(rest.draw, total)
        )
        if feed.waiting:
            feed.wake.set()
        return True

    async def fetch_lent(self, work: ItemWork, draws: ItemDraws) -> None:
        """One lent draw of an item; the item is counted when its last draw is in."""
        outcome, _ = await self.fetch_claimed(work.requests[0], None)
        if draws.outcome is _OK:
            draws.outcome = outcome
        draws.left -= 1
        if draws.left == 0:
            self.count(work, draws.outcome)

    def count(self, work: ItemWork, outcome: ItemOutcome) -> None:
        """Count an item's outcome for its criterion."""
        counts = self.counters.criteria[work.item.criterion.config.name]
        if outcome is _OK:
            counts.answered += 1
        elif outcome is _REJECTED:
            counts.rejected += 1
        elif outcome is _FAILED:
            counts.failed += 1

    async def fetch_claimed(
        self, request: JudgeRequest, claim: tuple[float | None, bool] | None
    ) -> tuple[ItemOutcome, int]:
        """Fetch a request unless another process (or item) is asking: then await its answer.

        ``claim``: the producer's claim on it (when taken, and whether the key was stored).
        """
        held, stored = False, False
        if claim is not None and claim[0] is not None:
            stored = claim[1]
            # Claimed in the queue a while ago: make sure it is still this run's.
            held = time.monotonic() - claim[0] < self.claims.ttl / 2 or self.claims.renew(
                request.key
            )
        while not held:
            held, stored = await self.writer.claim(request.key)
            if held:
                break
            if self.claims.batch_of(request.key) is not None:
                # A live batch job is asking for it: its answer comes when the batch is collected.
                self.counters.in_batch += 1
                return ItemOutcome.IN_BATCH, 0
            await self.sleep_unless_stopped(_CLAIM_POLL)
            if self.stop.is_set():
                return ItemOutcome.STOPPED, 0
            entry = self.cached(request)
            if entry is not None:
                return (ItemOutcome.OK if entry.ok else ItemOutcome.REJECTED), entry.received
        try:
            # The holder may have stored the answer just before it let go of the claim.
            entry = self.cached(request) if stored else None
            if entry is not None:
                outcome = (_OK if entry.ok else _REJECTED), entry.received
            else:
                outcome = await self.fetch(request)
        finally:
            # Let go once the answer is committed (writer.py), with the others of this turn.
            written = self.writer.release(request.key)
        await written  # the answer is on disk before the item counts as done
        return outcome

    async def fetch(self, request: JudgeRequest) -> tuple[ItemOutcome, int]:
        """Send one request until it is answered, refused or out of retries."""
        attempts = transient = limited = 0
        limits, counters, budget = self.limits, self.counters, self.budget
        while True:
            if not limits.clear(request.est_tokens):
                await limits.acquire(request.est_tokens)
            if self.stop.is_set():
                return _STOPPED, 0
            cost = 0.0
            if budget is not None:
                # Each request asks for one answer from an endpoint that refuses n > 1: charged so.
                one = self.endpoint.one_request_per_draw
                cost = request_cost(budget, request, one_choice=one)
                if not budget.charge(cost):
                    self.stop.set()  # the reason is written at the end, with the final estimate
                    return _STOPPED, 0
            attempts += 1
            if attempts > 1:  # the first attempt follows the claim at once
                self.claims.renew(request.key)
            counters.requests_sent += 1
            counters.in_flight += 1
            if counters.in_flight > counters.peak_in_flight:
                counters.peak_in_flight = counters.in_flight
            # The logical request (its digest is the key) is spelt for the API at the wire.
            logical = request.body
            body = self.endpoint.wire(logical, self.cache_keys[request.item.criterion.config.name])
            responses = self.endpoint.api is JudgeApi.RESPONSES
            try:
                answer = await self.transport.complete(body, responses=responses)
            except TransportError as exc:
                sent = _settings(body)
                fact = exc.fact
                self.history.saw(fact)
                if fact.status == 429:
                    limited += 1
                else:
                    transient += 1
                attempt = limited if fact.status == 429 else transient
                decision = decide(
                    fact,
                    self.history,
                    n=body.get("n", 1),
                    attempt=attempt,
                    sent=sent,
                    responses=responses,
                )
                outcome = await self.apply(decision, request, exc, (attempts, attempt), cost)
                if outcome is not None:
                    return outcome, 0
                continue
            finally:
                counters.in_flight -= 1
                limits.replied()
            self.history.answered = True
            limits.observe(answer.headers)
            parsed = answer.parsed
            self.endpoint.observe(logical, answer)
            tokens = read_usage(parsed.get("usage"))  # either API's usage
            counters.note_usage(tokens)
            if budget is not None:
                budget.settle(tokens)
            if self.logprobs and logical.get("logprobs") and self.endpoint.logprobs is False:
                # Ignored, not refused: every answer would come without them. Not stored (a
                # samples-mode run asks under other keys).
                self.halt(ignored_logprobs(_settings(body), self.history.sampling))
                return _STOPPED, 0
            # Only an answer of empty choices cut off by max_tokens can be spent on reasoning:
            # the usual one, every choice holding text, needs no look (transport.py counts them).
            spent = None if answer.texts else answer_fact(parsed)
            if spent is None:
                self.history.content_seen = True
            elif (
                decision := decide(spent, self.history, sent=_settings(body))
            ).action is Action.STOP:
                # Billed, but not stored: with the same settings every answer would be empty
                # again, and a rerun with a larger max_tokens asks under other keys anyway.
                self.halt(decision.message)
                return _STOPPED, 0
            self.store_answer(request, answer, attempts)
            return _OK, len(parsed["choices"])

    def halt(self, line: str) -> None:
        """Stop the run (the one way): no more dispatching, and ``line`` is what it says."""
        if self.stopped is None:
            self.stopped = line
        self.stop.set()

    async def apply(
        self,
        decision: Decision,
        request: JudgeRequest,
        exc: TransportError,
        counts: tuple[int, int],
        cost: float,
    ) -> ItemOutcome | None:
        """Carry out a failure decision; the item's outcome, or None to send again.

        ``counts``: the request's attempts so far, and its failures of this kind in a row.
        """
        attempts, attempt = counts
        action = decision.action
        if not decision.billed and self.budget is not None:
            self.budget.refund(cost)
        if action is Action.STOP:
            if exc.fact.refuses_logprobs:
                self.endpoint.logprobs = False
            self.halt(decision.message)
            return ItemOutcome.STOPPED
        if action is Action.REFUSE:
            self.store_refusal(request, exc, attempts, decision.message)
            return ItemOutcome.REJECTED
        if action is Action.GIVE_UP:
            return self.fail(request, decision.message)
        self.counters.note_retry(decision.label if action is not Action.PAUSE else "429")
        if action is Action.ONE_CHOICE:
            # The server will not return several choices: from now on every item asks for
            # one, and the rest come as further draws (stored as draw 0's answer, as from a
            # server that ignores n).
            self.endpoint.learn(action)
        elif action is Action.RESPONSES_API:
            # Sent again at once on the Responses API (the key stays the same): nothing was
            # billed, and nothing is stored for the 404.
            if self.endpoint.learn(action):
                self.history.url = self.config.judge.responses_url
                self.note(
                    f"{self.config.judge.model} is served on the Responses API only: this run "
                    "and later ones send their requests there"
                )
        elif action is Action.DROP_PARAMETER:
            # Sent again at once without it (a 400: nothing billed, nothing stored).
            if self.endpoint.learn(action, exc.fact.param):
                self.note(
                    f"{self.config.judge.model} refuses {exc.fact.param} ({exc.fact.message}): "
                    "the requests go without it from now on"
                )
        elif action is Action.TOKEN_PARAMETER:
            # Sent again at once under the name the endpoint wants (the key stays the same).
            if self.endpoint.token_parameter == exc.fact.param:
                self.endpoint.switch_token_parameter()
                self.history.token_switches += 1
        elif action is Action.PAUSE:
            self.counters.rate_limited += 1
            self.limits.observe(exc.headers)
            wait = decision.wait if decision.wait is not None else self.delay(attempt)
            self.counters.note_wait(wait, decision.message)
            self.limits.refused(request.est_tokens, wait)
        else:
            wait = decision.wait if decision.wait is not None else self.delay(attempt)
            self.counters.note_wait(wait, f"retrying after {decision.label}")
            await self.sleep_unless_stopped(wait)
        return None

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
