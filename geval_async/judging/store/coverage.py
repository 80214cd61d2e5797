"""What the cache holds for each item of a plan: no network, no writes.

What is left to send is decided from it once (:mod:`.left`), and the scoring stage collects
every stored answer of an item through it (:mod:`.read_model`). An item's answers
are its chunks in draw order: draw 0, then the chunk that starts where it ended, and so on
until the item has its n samples (see :mod:`geval_async.study.plan`). The cache is in the one
current form (:mod:`geval_async.judging.store.folder`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Generic, TypeVar

from ...options import Left
from ...study.config import EvalConfig
from ...study.plan import JudgeItem, JudgeRequest, Study, chunk_request, planned_requests
from .cache import CachedResponse, EntryHead
from .origin import EntrySource
from .stored_steps import require_steps

_E = TypeVar("_E", CachedResponse, EntryHead)


@dataclass
class ItemState(Generic[_E]):
    """The cached answers of one item and what it still lacks.

    ``refused`` is the stored refusal when a request of the item was refused for good. The
    answers are whole entries, or their heads when read from :class:`~.origin.Heads`.
    ``requests`` are the chunks the walk named, in draw order: each stored one's, then the
    refused or missing one (so no other reader walks the chain again).
    """

    item: JudgeItem
    first: JudgeRequest
    entries: list[_E] = field(default_factory=list)
    missing: list[JudgeRequest] = field(default_factory=list)
    refused: _E | None = None
    requests: list[JudgeRequest] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing and self.refused is None


def item_state(
    first: JudgeRequest,
    cache: EntrySource[_E],
    config: EvalConfig,
    *,
    retry_failed: bool = False,
) -> ItemState[_E]:
    """Walk an item's chunks; with ``retry_failed`` a refusal counts as missing."""
    if first.n < 1:
        return ItemState(first.item, first)
    # Draw 0 first, without the loop: a rerun's walk makes one state per item of the plan.
    entry = cache.get(first.key)
    if entry is None or (not entry.ok and retry_failed):
        return ItemState(first.item, first, [], [first], None, [first])
    if not entry.ok:
        return ItemState(first.item, first, [], [], entry, [first])
    state: ItemState[_E] = ItemState(first.item, first, [entry], [], None, [first])
    start = entry.received
    while start < first.n:
        request = chunk_request(first, start, config)
        state.requests.append(request)
        entry = cache.get(request.key)
        if entry is None or (not entry.ok and retry_failed):
            state.missing.append(request)
            break
        if not entry.ok:
            state.refused = entry
            break
        state.entries.append(entry)
        start += entry.received
    return state


def item_states(
    study: Study, cache: EntrySource[CachedResponse]
) -> Iterator[ItemState[CachedResponse]]:
    """The state of every item of the plan, in plan order (generated steps read from the
    cache first: ConfigError when they are not there)."""
    study = require_steps(study, cache) if study.pending_steps else study
    return states_ahead(planned_requests(study), cache, study.config)


def states_ahead(
    firsts: Iterable[JudgeRequest],
    cache: EntrySource[_E],
    config: EvalConfig,
    *,
    retry_failed: bool = False,
    chunk: int = 256,
) -> Iterator[ItemState[_E]]:
    """The state of each item (given by its first request,
    :func:`~geval_async.study.plan.planned_requests`), in order, reading the cache a chunk of
    items at a time."""
    firsts = iter(firsts)
    while ahead := list(islice(firsts, chunk)):
        cache.prefetch([first.key for first in ahead])
        for first in ahead:
            yield item_state(first, cache, config, retry_failed=retry_failed)


@dataclass
class Coverage:
    """Per-criterion counts of items answered, refused, missing and waiting in batch jobs."""

    answered: int = 0
    refused: int = 0
    missing: int = 0
    in_batch: int = 0

    @property
    def items(self) -> int:
        return self.answered + self.refused + self.missing + self.in_batch

    def add(self, left: Left, count: int = 1) -> None:
        """Count ``count`` items that stand at ``left`` (:func:`~.left.left_of`): the one
        place an item is counted by where it stands (``status``, the dry run, the batch
        commands)."""
        if left is Left.CACHED:
            self.answered += count
        elif left is Left.REFUSED:
            self.refused += count
        elif left is Left.IN_BATCH:
            self.in_batch += count
        else:
            self.missing += count
