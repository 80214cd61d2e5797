"""A run's workers: take an item, claim each request, attempt it, count the item.

A worker takes an item from the feed (an item's draws lent out first, :attr:`.Feed.lent`),
claims each of its requests (:mod:`~..store.claims`) and attempts it (:mod:`.attempt`); the
answer is written to the cache at once (:mod:`.writer`), and the item counts as done once it
is on disk. A request another process, or another item of this run, is already asking for is
not sent twice: the worker waits for its answer in the cache. The state the workers share is
:mod:`.state`.
"""

from __future__ import annotations

import time

from ...options import ItemOutcome
from ...study.plan import JudgeRequest, chunk_request
from ..wire.probe import same_model
from .attempt import fetch
from .feed import ItemDraws, ItemWork
from .state import RunState
from .writer import AnswersLost

__all__ = ["Run", "same_model"]

# How often a worker looks for an answer another process is fetching (seconds).
_CLAIM_POLL = 0.2

# Read from its class, an enum's member is a lookup each time: read once here.
_OK, _REJECTED, _FAILED = ItemOutcome.OK, ItemOutcome.REJECTED, ItemOutcome.FAILED


class Run(RunState):
    """A run's state and its workers (``run.work()``, one task each)."""

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
            paid = False  # whether the judge answered this run any of the item's requests
            claim: tuple[float | None, bool] | None = (work.claimed, work.stored)
            try:
                while pending:
                    request, pending = pending[0], pending[1:]
                    try:
                        outcome, received, fresh = await self.fetch_claimed(request, claim)
                        paid = paid or fresh
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
                self.count(work, outcome, paid)

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
        outcome, _, fresh = await self.fetch_claimed(work.requests[0], None)
        if draws.outcome is _OK:
            draws.outcome = outcome
        draws.paid = draws.paid or fresh
        draws.left -= 1
        if draws.left == 0:
            self.count(work, draws.outcome, draws.paid)

    def count(self, work: ItemWork, outcome: ItemOutcome, paid: bool) -> None:
        """Count an item's outcome for its criterion: new when the judge answered this run
        any of the item's requests, cached when another process was given all of them while
        this run waited (each run's summary counts what it paid for)."""
        counts = self.counters.criteria[work.item.criterion.config.name]
        if self.item_outcomes is not None:
            self.note_item(work.item, outcome, paid)
        if outcome is _OK and not paid:
            counts.cached += 1
        elif outcome is _OK:
            counts.answered += 1
        elif outcome is _REJECTED:
            counts.rejected += 1
        elif outcome is _FAILED:
            counts.failed += 1

    async def fetch_claimed(
        self, request: JudgeRequest, claim: tuple[float | None, bool] | None
    ) -> tuple[ItemOutcome, int, bool]:
        """Fetch a request unless another process (or item) is asking: then await its answer.
        The outcome, the choices received, and whether the judge answered this run (False:
        the answer was read from the cache, stored there by another process).

        ``claim``: the producer's claim on it (when taken, and whether the key was stored).
        """
        held, stored = False, False
        if claim is not None and claim[0] is not None:
            stored = claim[1]
            # Claimed in the queue a while ago: make sure it is still this run's.
            held = time.monotonic() - claim[0] < self.claims.ttl / 2 or self.claims.renew(
                request.key
            )
        while True:
            while not held:
                held, stored = await self.writer.claim(request.key)
                if held:
                    break
                if self.claims.batch_of(request.key) is not None:
                    # A live batch job is asking for it: its answer comes when the batch is
                    # collected.
                    self.counters.in_batch += 1
                    return ItemOutcome.IN_BATCH, 0, False
                await self.sleep_unless_stopped(_CLAIM_POLL)
                if self.stop.is_set():
                    return ItemOutcome.STOPPED, 0, False
                entry = self.cached(request)
                if entry is not None:
                    found = ItemOutcome.OK if entry.ok else ItemOutcome.REJECTED
                    return found, entry.received, False
            try:
                # The holder may have stored the answer just before it let go of the claim.
                entry = self.cached(request) if stored else None
                outcome: tuple[ItemOutcome, int, bool] | None
                if entry is not None:
                    outcome = (_OK if entry.ok else _REJECTED), entry.received, False
                else:
                    outcome = await fetch(self, request)
            finally:
                # Let go once the answer is committed (writer.py), with the others of this turn.
                written = self.writer.release(request.key)
            try:
                await written  # the answer is on disk before the item counts as done
            except AnswersLost:
                # A full disk kept it until the run stopped: the stop drains the other
                # workers, whose answers in flight are counted too, and the run says how
                # many were lost when it ends.
                return ItemOutcome.STOPPED, 0, False
            if outcome is not None:
                return outcome
            held = False  # another process took the claim over: wait for its answer
