"""What is left to send: every item of a plan as one server's run would find it, decided once.

An item is **cached** (every chunk answered), **refused** (a request of it refused for good),
**in batch** (what it lacks is asked by a live batch job) or **to send** (its next chunk). The
walk reads the cache as the server asked sees it (:mod:`.origin`: a real server's run reads the
simulated judge's answers as missing, and the reverse), entry heads only, each item's chunk
chain once (:func:`~.coverage.states_ahead`). The run's feed, ``run --dry-run``, ``batch
submit`` and ``batch export`` send (or count) the to-send requests it names; the batch commands
print its :func:`coverage`, and ``status`` decides each item by the same :func:`left_of` while
it reads the answers (:mod:`.read_model`).
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Container, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from ...options import Left
from ...study.plan import ChunkSizes, JudgeItem, JudgeRequest, PlanChunk, Study, plan_chunks
from .cache import EntryHead
from .coverage import Coverage, ItemState, item_state
from .origin import Heads, ServerEntries
from .stored_steps import require_steps

_TO_SEND = Left.TO_SEND  # an enum's member read from its class is a lookup each time

__all__ = [
    "ItemLeft",
    "Left",
    "LeftChunk",
    "LeftTally",
    "collector_paused",
    "coverage",
    "left_chunks",
    "left_of",
    "tally_left",
    "what_is_left",
]


@dataclass(frozen=True, slots=True)
class ItemLeft:
    """One item, what the cache holds of it, and where it stands."""

    state: ItemState[EntryHead]
    left: Left

    @property
    def item(self) -> JudgeItem:
        return self.state.item

    @property
    def first(self) -> JudgeRequest:
        return self.state.first

    @property
    def to_send(self) -> list[JudgeRequest]:
        """The requests a run sends for it: its next chunk (none unless :attr:`left` is
        to send). The chunk asks for every sample the item still lacks."""
        return self.state.missing if self.left is Left.TO_SEND else []


@dataclass(slots=True)
class LeftChunk:
    """Consecutive items of the plan (a :class:`~geval_async.study.plan.PlanChunk`) and where
    each stands, decided together from one lookup of their first keys. Nothing is made per
    item of a rerun but its key and its place in :attr:`lefts`: an :class:`ItemLeft` only when
    asked for (:meth:`states`, :meth:`unsettled`)."""

    plan: PlanChunk
    lefts: list[Left]
    heads: list[EntryHead | None]  # each item's draw 0, as the server asked sees it
    open: list[int]  # the items neither cached nor refused (to send, or in batch)
    walked: dict[int, ItemState[EntryHead]] = field(default_factory=dict)  # later chunks read

    def counts(self) -> Counter[tuple[str, Left]]:
        """How many items of each criterion stand where: ``(criterion name, left) -> count``."""
        names = self.plan.names()
        if self.lefts.count(Left.CACHED) == len(self.lefts):  # a rerun's chunks
            return Counter({(name, Left.CACHED): count for name, count in Counter(names).items()})
        return Counter(zip(names, self.lefts, strict=True))

    def state(self, index: int) -> ItemLeft:
        """The ``index``-th item, what the cache holds of it and where it stands."""
        left = self.lefts[index]
        walked = self.walked.get(index)
        if walked is not None:
            return ItemLeft(walked, left)
        first = self.plan.request(index)
        item, head = first.item, self.heads[index]
        if first.n < 1:
            state: ItemState[EntryHead] = ItemState(item, first)
        elif left is Left.CACHED and head is not None:
            state = ItemState(item, first, [head], [], None, [first])
        elif left is Left.REFUSED:
            state = ItemState(item, first, [], [], head, [first])
        else:
            state = ItemState(item, first, [], [first], None, [first])
        return ItemLeft(state, left)

    def states(self) -> Iterator[ItemLeft]:
        """Every item of the chunk, in order."""
        return (self.state(index) for index in range(len(self.lefts)))

    def unsettled(self) -> list[ItemLeft]:
        """The items the cache neither answers nor refuses, in order."""
        return [self.state(index) for index in self.open]

    def to_send(self) -> list[tuple[JudgeItem, list[JudgeRequest]]]:
        """Each of :meth:`unsettled`'s items with its :attr:`~ItemLeft.to_send`, without the
        :class:`ItemLeft` and the :class:`ItemState` a run's feed does not read."""
        out: list[tuple[JudgeItem, list[JudgeRequest]]] = []
        lefts, walked, request = self.lefts, self.walked, self.plan.request
        for index in self.open:
            send = lefts[index] is _TO_SEND
            state = walked.get(index)
            if state is not None:
                out.append((state.item, state.missing if send else []))
            else:
                first = request(index)
                out.append((first.item, [first] if send else []))
        return out


def left_chunks(
    study: Study,
    entries: ServerEntries,
    *,
    retry_failed: bool = False,
    in_batch: Container[str] = frozenset(),
    send_order: bool = False,
    chunk: int | ChunkSizes = 2048,
) -> Iterator[LeftChunk]:
    """Every item of the plan, where it stands, about ``chunk`` items at a time (or as
    :class:`~geval_async.study.plan.ChunkSizes` says; other arguments as
    :func:`what_is_left`); an item whose first chunk came back short has its later chunks
    walked alone."""
    study = require_steps(study, entries) if study.pending_steps else study
    config = study.config
    chains = Heads(entries)
    for part in plan_chunks(study, send=send_order, chunk=chunk):
        heads = entries.heads(part.keys)
        if part.draws is None:
            # The heads are a handful of shared objects: decided once each, told apart by
            # identity.
            n = config.sampling.choices_per_item
            decided = {
                id(head): _by_first(head, n, retry_failed)
                for head in dict(zip(map(id, heads), heads, strict=True)).values()
            }
            lefts = list(map(decided.__getitem__, map(id, heads)))
        else:  # a round of draws spent by need: each item asks its own
            lefts = [
                _by_first(head, n, retry_failed) for head, n in zip(heads, part.draws, strict=True)
            ]
        done = LeftChunk(part, [], heads, [])
        if lefts.count(Left.CACHED) != len(lefts):
            _settle(done, lefts, chains, retry_failed, in_batch)
        done.lefts = cast(list[Left], lefts)  # every None decided by _settle
        yield done


def _by_first(head: EntryHead | None, n: int, retry_failed: bool) -> Left | None:
    """Where draw 0 alone decides an item that asks ``n`` draws, as left_of decides it:
    refused, or answered whole; None: its later chunks are walked."""
    if n < 1:
        return Left.CACHED
    if head is None or (not head.ok and retry_failed):
        return Left.TO_SEND
    if not head.ok:
        return Left.REFUSED
    return Left.CACHED if head.received >= n else None


def _settle(
    chunk: LeftChunk,
    lefts: list[Left | None],
    chains: Heads,
    retry_failed: bool,
    in_batch: Container[str],
) -> None:
    """Decide the items draw 0 left open: walk the chains of those whose first chunk came
    back short, and tell those in batch from those to send."""
    config = chunk.plan.config
    for index, left in enumerate(lefts):
        if left is Left.CACHED or left is Left.REFUSED:
            continue
        if left is None:
            state = item_state(chunk.plan.request(index), chains, config, retry_failed=retry_failed)
            chunk.walked[index] = state
            left = lefts[index] = left_of(state, in_batch)
            if left is Left.CACHED or left is Left.REFUSED:
                continue
        elif chunk.plan.keys[index] in in_batch:
            left = lefts[index] = Left.IN_BATCH
        chunk.open.append(index)


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a walk decides the plan (as it was after).

    A walk of a rerun makes a few container objects per item (each record's parsed fields,
    the chunk's lists) that live until the chunk is decided: about 1,000 collections of the
    youngest generation traverse them for a million items, 0.6 CPU s of a 13 s rerun. The walk
    is synchronous and makes no reference cycles (its objects are freed by their counts), so
    nothing is left for the collector to find but what an exception's traceback holds, which
    it finds once the walk is over.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def what_is_left(
    study: Study,
    entries: ServerEntries,
    *,
    retry_failed: bool = False,
    in_batch: Container[str] = frozenset(),
    send_order: bool = False,
) -> Iterator[ItemLeft]:
    """Every item of the plan (in plan order, or the run's send order) and where it stands.

    Args:
        study: the prepared study; generated steps not in place are read from the cache.
        entries: the cache as the server asked sees it (``ServerEntries(cache, None)``: every
            stored answer counts, whichever server gave it).
        retry_failed: a refusal counts as to send (``run --retry-failed``).
        in_batch: the keys live batch jobs are asking for (:meth:`~.batch.ledger.Ledger.
            live_keys`): an item lacking only those is in batch, not to send.
        send_order: walk in the order a run sends (:func:`~geval_async.study.plan.
            planned_requests`).

    Raises:
        ConfigError: generated steps are not in the cache (run ``run`` first).
    """
    for chunk in left_chunks(
        study, entries, retry_failed=retry_failed, in_batch=in_batch, send_order=send_order
    ):
        yield from chunk.states()


def left_of(state: ItemState[Any], in_batch: Container[str] = frozenset()) -> Left:
    """Where an item stands, from what the walk of its chunks found (the one rule)."""
    if state.refused is not None:
        return Left.REFUSED
    if not state.missing:
        return Left.CACHED
    if all(request.key in in_batch for request in state.missing):
        return Left.IN_BATCH
    return Left.TO_SEND


@dataclass
class LeftTally:
    """What is left of a plan, counted: per criterion the items answered, refused, missing
    (to send) and in batch; the requests to send and their tokens (prompt estimate plus the
    completion budget, ``max_tokens x n`` each). ``over``: the token estimate of the first
    request over the tpm limit asked about, where the count stopped (None: none)."""

    criteria: dict[str, Coverage]
    requests: int = 0
    tokens: int = 0
    completion_tokens: int = 0
    over: int | None = None
    # The endpoint gives one choice a request (n refused): a request of n is sent as n
    # requests of one choice, each carrying the prompt (the completion budget is the same).
    one_choice: bool = False

    def add(self, chunk: LeftChunk) -> None:
        """Count a chunk's items (:meth:`~.coverage.Coverage.add`) and its requests to send."""
        for (name, left), count in chunk.counts().items():
            self.criteria[name].add(left, count)
        for item in chunk.unsettled():
            for request in item.to_send:
                sends = request.n if self.one_choice else 1
                completion = request.max_completion_tokens
                self.requests += sends
                self.tokens += sends * (request.est_tokens - completion) + completion
                self.completion_tokens += completion


def tally_left(
    study: Study,
    entries: ServerEntries,
    *,
    retry_failed: bool = False,
    in_batch: Container[str] = frozenset(),
    tpm: float | None = None,
    one_choice: bool = False,
) -> LeftTally:
    """Count what is left of the plan (arguments as :func:`what_is_left`); with ``tpm``, stop
    at the first item whose first request that limit can never let through (``over``); with
    ``one_choice``, count requests as an endpoint that refuses n > 1 is sent them."""
    criteria = study.planned_criteria
    tally = LeftTally({c.name: Coverage() for c in criteria}, one_choice=one_choice)
    with collector_paused():
        for chunk in left_chunks(study, entries, retry_failed=retry_failed, in_batch=in_batch):
            tally.over = chunk.plan.first_over(tpm, one_answer=one_choice)
            if tally.over is not None:
                break
            tally.add(chunk)
    return tally


def coverage(
    study: Study, entries: ServerEntries, in_batch: Container[str] = frozenset()
) -> dict[str, Coverage]:
    """Count, per criterion, the items the cache answers, refuses or lacks, and those live
    batch jobs are asking for (``in_batch``, their keys)."""
    return tally_left(study, entries, in_batch=in_batch).criteria
