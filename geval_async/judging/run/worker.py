"""A run's workers: take an item, claim each request, attempt it, count the item.

A worker takes an item from the feed, claims each of its requests (:mod:`~..store.claims`) and
attempts it (:mod:`.attempt`); the answer is written to the cache at once (:mod:`.writer`),
and the item counts as done once it is on disk. A request another process, or another item of
this run, is already asking for is not sent twice: the worker waits for its answer in the
cache. The state the workers share is :mod:`.state`.
"""

from __future__ import annotations

import time

from ...options import ItemOutcome
from ...study.plan import JudgeRequest, chunk_request
from ..wire.probe import same_model
from .attempt import fetch
from .state import RunState

__all__ = ["Run", "same_model"]

# How often a worker looks for an answer another process is fetching (seconds).
_CLAIM_POLL = 0.2

# Read from its class, an enum's member is a lookup each time: read once here.
_OK, _REJECTED, _FAILED = ItemOutcome.OK, ItemOutcome.REJECTED, ItemOutcome.FAILED


class Run(RunState):
    """A run's state and its workers (``run.work()``, one task each)."""

    async def work(self) -> None:
        """Judge the feed's items until it has none left."""
        queue, criteria, config = self.feed.queue, self.counters.criteria, self.config
        while True:
            work = await queue.get() if queue.empty() else queue.get_nowait()  # no coroutine
            if work is None:
                return
            if self.stop.is_set():
                if work.claimed is not None:
                    self.writer.release(work.requests[0].key)
                continue  # drain without sending: the item stays missing
            # The item's requests in turn, here rather than in a coroutine of their own (one
            # made an item, and a frame more each time the task resumes).
            outcome, pending = _OK, work.requests
            claim: tuple[float | None, bool] | None = (work.claimed, work.stored)
            while pending:
                request, pending = pending[0], pending[1:]
                outcome, received = await self.fetch_claimed(request, claim)
                claim = None  # a later chunk is claimed by the worker
                if outcome is not _OK:
                    break
                if received < request.n:
                    # Fewer choices than asked (an earlier run with a smaller n, or llama.cpp,
                    # which ignores n): the rest is the chunk that starts where this one ended,
                    # an earlier run may have stored it (fetch_claimed then reads it).
                    pending = [chunk_request(request, request.draw + received, config)]
            if outcome is _OK:
                criteria[work.item.criterion.config.name].answered += 1
            elif outcome is _REJECTED:
                criteria[work.item.criterion.config.name].rejected += 1
            elif outcome is _FAILED:
                criteria[work.item.criterion.config.name].failed += 1

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
        while True:
            while not held:
                held, stored = await self.writer.claim(request.key)
                if held:
                    break
                if self.claims.batch_of(request.key) is not None:
                    # A live batch job is asking for it: its answer comes when the batch is
                    # collected.
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
                outcome: tuple[ItemOutcome, int] | None
                if entry is not None:
                    outcome = (_OK if entry.ok else _REJECTED), entry.received
                else:
                    outcome = await fetch(self, request)
            finally:
                # Let go once the answer is committed (writer.py), with the others of this turn.
                written = self.writer.release(request.key)
            await written  # the answer is on disk before the item counts as done
            if outcome is not None:
                return outcome
            held = False  # another process took the claim over: wait for its answer
