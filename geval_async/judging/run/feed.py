"""The producer side of the worker pool: what is left to ask, claimed in batches, queued.

The feed walks the plan in send order and asks what is left of every item, a chunk of items
at a time (:func:`~geval_async.judging.store.left.left_chunks`, the rule ``--dry-run`` counts by):
what is stored is counted and never touches a limiter or the network; an item with something
missing is claimed for this run (:mod:`geval_async.judging.store.claims`), many items in one
transaction, and goes onto a bounded queue the workers take from. A claim another process
holds is left to the worker, which waits for that process's answer instead.

A criterion whose requests share a prefix a provider caches (1,024 tokens or more,
:mod:`geval_async.study.prompt_cache`) is opened by one item: its first request goes alone,
and the criterion's other items wait until it is answered, then go as fast as ever, each
reading the prefix from the provider's cache instead of paying for it. Sent together, the
first requests would all miss (the prefix is kept only once computed). The walk waits for that
one answer (a round trip a criterion, once a run: what was queued before goes on meanwhile);
a study whose criteria are all below the threshold never waits. Likewise an item's draws sent one a
request (an endpoint that refuses ``n``): the first goes alone, the others are then lent out
to every worker at once (:attr:`Feed.lent`), each reading the whole prompt from the cache.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain

from ...options import ItemOutcome
from ...study.config import EvalConfig
from ...study.plan import ChunkSizes, JudgeItem, JudgeRequest, Study
from ...study.prompt_cache import prefix_share
from ..store.left import Left, LeftChunk, collector_paused, left_chunks
from ..store.origin import ServerEntries
from ..wire.capabilities import Capabilities
from ..wire.limits import RateLimits
from .progress import RunCounters
from .writer import Writer

__all__ = ["Feed", "ItemDraws", "ItemWork"]

_CLAIM_BATCH = 64
# Items in the walk's first chunk, and in each chunk made once the run sends (the walk of a
# rerun grows to 2,048): a chunk is made on the loop in one go, rendering and hashing each
# item, while the workers' answers wait (study.plan.ChunkSizes).
_FIRST_CHUNK = 64
_SENDING_CHUNK = 256


@dataclass
class ItemDraws:
    """The draws of an item lent out one a request (:attr:`Feed.lent`): how many are still
    out, and the item's outcome so far (the first draw's, or the first failure)."""

    left: int
    outcome: ItemOutcome = ItemOutcome.OK
    paid: bool = False  # whether the judge answered this run any of them (not another process)


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
    # Set once its first request is over (answered or not): it opens its criterion's prefix.
    opens: asyncio.Event | None = None
    # One draw of an item whose other draws are lent out too (Feed.lent): their shared tally.
    draws: ItemDraws | None = None

    def opened(self) -> None:
        """Its first request is over: the criterion's other items may go."""
        if self.opens is not None:
            self.opens.set()


class Feed:
    """The queue of a run's missing items, and the producer that fills it."""

    def __init__(
        self,
        study: Study,
        entries: ServerEntries,
        *,
        limits: RateLimits,
        endpoint: Capabilities,
        counters: RunCounters,
        stop: asyncio.Event,
        retry_failed: bool,
    ) -> None:
        self.study, self.entries = study, entries
        self.endpoint = endpoint  # what it takes, as learned so far (one answer a request?)
        self.writer: Writer  # set by the run once there is something to send
        self.limits, self.counters, self.stop = limits, counters, stop
        self.retry_failed = retry_failed
        self.config: EvalConfig = study.config
        self.workers = self.config.limits.concurrency
        # What the workers take (worker.Run.work): the next item to judge, or None when there
        # is none left (one None per worker).
        self.queue: asyncio.Queue[ItemWork | None] = asyncio.Queue(maxsize=2 * self.workers)
        # Items claimed together, in one transaction: as many as there are workers, and at
        # least _CLAIM_BATCH (a transaction's cost is shared by the keys it claims).
        self._ahead: list[ItemWork] = []
        self._batch = max(self.workers, _CLAIM_BATCH)
        # The criteria whose shared prefix a provider caches, rated and pairwise, and the event
        # of each one's opening item (set when its first request is over).
        criteria = study.planned_criteria
        self._cached_prefix = {c.name for c in criteria if prefix_share(c).cacheable}
        self._openers: dict[str, asyncio.Event] = {}
        # The draws of items an endpoint answers one a request, lent out once the item's first
        # answer is in (the provider's cache then holds its prompt): every worker takes them
        # before new items, so that an item's draws go together instead of one after another.
        self.lent: deque[ItemWork] = deque()
        # Workers on an item taken from the queue (each may lend its draws), and an event
        # that wakes the workers the queue has nothing more for, when draws are lent or an
        # item is over: they help with the draws until no item is left that could lend any.
        self.on_items = 0
        self.waiting = 0
        self.wake = asyncio.Event()
        # Told each item the cache settles (answered or refused), when the run follows its
        # items one by one (draws spent by need, asked in rounds).
        self.on_left: Callable[[JudgeItem, Left], None] | None = None

    def first_work(self) -> Iterator[LeftChunk] | None:
        """Count what the cache settles up to the first chunk of items with something
        missing; the chunks from that one on, or None when there is nothing to send (then the
        run opens no transport and no claims)."""
        # A live batch job's requests are left to the worker, which finds the batch's claim.
        sizes = ChunkSizes(first=_FIRST_CHUNK)
        chunks = left_chunks(
            self.study, self.entries, retry_failed=self.retry_failed, send_order=True, chunk=sizes
        )
        with collector_paused():  # a synchronous walk, before anything is sent
            for chunk in chunks:
                if self.stop.is_set() or chunk.open:
                    # From here on the run sends: the rest of the walk goes in small chunks.
                    sizes.most = _SENDING_CHUNK
                    return chain([chunk], chunks)
                self._count(chunk)
        return None

    def _count(self, chunk: LeftChunk) -> None:
        """Count a chunk's items the cache answers or refuses (the rest are queued)."""
        # As check_request, not a call per item; a request as the endpoint is sent it.
        one_answer = self.endpoint.one_request_per_draw
        over = chunk.plan.first_over(self.limits.tpm, one_answer=one_answer)
        if over is not None:
            self.limits.check_request(over)
        if self.on_left is not None:
            for index, left in enumerate(chunk.lefts):
                if left is Left.CACHED or left is Left.REFUSED:
                    self.on_left(chunk.plan.item(index), left)
        criteria = self.counters.criteria
        for (name, left), count in chunk.counts().items():
            if left is Left.CACHED:
                criteria[name].cached += count
            elif left is Left.REFUSED:
                criteria[name].rejected += count

    async def produce(self, chunks: Iterable[LeftChunk]) -> None:
        """Queue the items of ``chunks`` that need requests (from :meth:`first_work`)."""
        for chunk in chunks:
            if self.stop.is_set():
                break
            self._count(chunk)
            for item, requests in chunk.to_send():
                if self.stop.is_set():
                    break
                work = ItemWork(item, requests)
                if self._cached_prefix:
                    await self._hold_for_opener(work)
                await self._enqueue(work)
        await self._enqueue(None)
        # Not in a `finally`: when the producer fails or is cancelled (a second Ctrl-C) the
        # task group cancels the workers, and waiting here for room in a full queue nobody
        # drains any more would hang the run.
        for _ in range(self.workers):
            await self.queue.put(None)

    async def _hold_for_opener(self, work: ItemWork) -> None:
        """Make ``work`` its criterion's opening item, or wait until that one's first request
        is over (its answer puts the prefix in the provider's cache)."""
        name = work.item.criterion.name
        if name not in self._cached_prefix:
            return
        opener = self._openers.get(name)
        if opener is None:
            work.opens = self._openers[name] = asyncio.Event()
        elif not opener.is_set():
            await self._enqueue(None)  # the items held back for a claim go out, the opener too
            await opener.wait()  # set by the worker whatever happens, a stop included

    async def _enqueue(self, work: ItemWork | None) -> None:
        """Queue ``work``, claiming items in batches (None: the last batch).

        A batch goes out when it is full, or at once while the workers have nothing to do.
        """
        if work is not None:
            self._ahead.append(work)
            if len(self._ahead) < self._batch and not self.queue.empty():
                return
        batch, self._ahead = self._ahead, []
        if not batch:
            return
        now = time.monotonic()
        claimed = await self.writer.claim_many([w.requests[0].key for w in batch])
        for item_work, (held, stored) in zip(batch, claimed, strict=True):
            item_work.claimed, item_work.stored = (now if held else None), stored
        queue = self.queue
        for item_work in batch:
            if queue.full():
                await queue.put(item_work)
            else:
                queue.put_nowait(item_work)  # as put() does when there is room: no coroutine
