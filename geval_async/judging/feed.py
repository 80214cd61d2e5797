"""The producer side of the worker pool: what is left to ask, claimed in batches, queued.

The feed walks the plan in send order and asks what is left of every item
(:func:`~geval_async.judging.left.what_is_left`, the rule ``--dry-run`` counts by): what
is stored is counted and never touches a limiter or the network; an item with something
missing is claimed for this run (:mod:`geval_async.judging.claims`), many items in one
transaction, and goes onto a bounded queue the workers take from. A claim another process
holds is left to the worker, which waits for that process's answer instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain

from ..study.config import EvalConfig
from ..study.plan import JudgeItem, JudgeRequest, Study
from .left import ItemLeft, Left, what_is_left
from .limits import RateLimits
from .origin import ServerEntries
from .progress import RunCounters
from .writer import Writer

__all__ = ["Feed", "ItemWork"]


@dataclass
class ItemWork:
    """An item with something missing, as a worker takes it.

    ``claimed`` is when the feed claimed its first request for this run (None: the worker
    claims it), ``stored`` whether the cache then held an entry under that key.
    """

    item: JudgeItem
    requests: list[JudgeRequest]
    claimed: float | None = None
    stored: bool = False


class Feed:
    """The queue of a run's missing items, and the producer that fills it."""

    def __init__(
        self,
        study: Study,
        entries: ServerEntries,
        *,
        limits: RateLimits,
        counters: RunCounters,
        stop: asyncio.Event,
        retry_failed: bool,
    ) -> None:
        self.study, self.entries = study, entries
        self.writer: Writer  # set by the run once there is something to send
        self.limits, self.counters, self.stop = limits, counters, stop
        self.retry_failed = retry_failed
        self.config: EvalConfig = study.config
        self.workers = self.config.limits.concurrency
        self.queue: asyncio.Queue[ItemWork | None] = asyncio.Queue(maxsize=2 * self.workers)
        # Items claimed together, in one transaction: as many as there are workers.
        self._ahead: list[ItemWork] = []

    async def get(self) -> ItemWork | None:
        """The next item to judge; None when there is none left (one None per worker)."""
        return await self.queue.get()

    def first_work(self) -> Iterator[ItemLeft] | None:
        """Count what the cache settles up to the first item with something missing; the
        items from that one on, or None when there is nothing to send (then the run opens no
        transport and no claims)."""
        # A live batch job's requests are left to the worker, which finds the batch's claim.
        states = what_is_left(
            self.study, self.entries, retry_failed=self.retry_failed, send_order=True
        )
        for state in states:
            if self.stop.is_set() or not self._settled(state):
                # From here on the run writes: heads read in one pass would go stale, so the
                # rest of the walk reads the cache a chunk at a time.
                self.entries.cache.forget_heads()
                return chain([state], states)
        return None

    def _settled(self, state: ItemLeft) -> bool:
        """Count an item the cache answers or refuses; False when it needs requests."""
        tpm = self.limits.tpm
        if tpm and state.first.est_tokens > tpm:  # as check_request, without a call per item
            self.limits.check_request(state.first.est_tokens)
        left = state.left
        if left is Left.CACHED:
            self.counters.criteria[state.state.item.criterion.name].cached += 1
        elif left is Left.REFUSED:
            self.counters.criteria[state.state.item.criterion.name].rejected += 1
        else:
            return False
        return True

    async def produce(self, states: Iterable[ItemLeft]) -> None:
        """Queue the items of ``states`` that need requests (from :meth:`first_work`)."""
        for state in states:
            if self.stop.is_set():
                break
            if not self._settled(state):
                await self._enqueue(ItemWork(state.item, state.to_send))
        await self._enqueue(None)
        # Not in a `finally`: when the producer fails or is cancelled (a second Ctrl-C) the
        # task group cancels the workers, and waiting here for room in a full queue nobody
        # drains any more would hang the run.
        for _ in range(self.workers):
            await self.queue.put(None)

    async def _enqueue(self, work: ItemWork | None) -> None:
        """Queue ``work``, claiming items in batches (None: the last batch).

        A batch goes out when it is full, or at once while the workers have nothing to do.
        """
        if work is not None:
            self._ahead.append(work)
            if len(self._ahead) < self.workers and not self.queue.empty():
                return
        batch, self._ahead = self._ahead, []
        if not batch:
            return
        now = time.monotonic()
        claimed = await self.writer.claim_many([w.requests[0].key for w in batch])
        for item_work, (held, stored) in zip(batch, claimed, strict=True):
            item_work.claimed, item_work.stored = (now if held else None), stored
        for item_work in batch:
            await self.queue.put(item_work)
