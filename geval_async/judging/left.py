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

from collections.abc import Container, Iterator
from dataclasses import dataclass
from typing import Any

from ..options import Left
from ..study.plan import JudgeItem, JudgeRequest, Study, planned_requests
from .cache import EntryHead
from .coverage import Coverage, ItemState, states_ahead
from .origin import Heads, ServerEntries
from .stored_steps import require_steps

__all__ = ["ItemLeft", "Left", "coverage", "left_of", "what_is_left"]


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
    study = require_steps(study, entries) if study.pending_steps else study
    states = states_ahead(
        planned_requests(study, send=send_order),
        Heads(entries, planned=study.planned),
        study.config,
        retry_failed=retry_failed,
    )
    for state in states:
        yield ItemLeft(state, left_of(state, in_batch))


def left_of(state: ItemState[Any], in_batch: Container[str] = frozenset()) -> Left:
    """Where an item stands, from what the walk of its chunks found (the one rule)."""
    if state.refused is not None:
        return Left.REFUSED
    if not state.missing:
        return Left.CACHED
    if all(request.key in in_batch for request in state.missing):
        return Left.IN_BATCH
    return Left.TO_SEND


def coverage(
    study: Study, entries: ServerEntries, in_batch: Container[str] = frozenset()
) -> dict[str, Coverage]:
    """Count, per criterion, the items the cache answers, refuses or lacks, and those live
    batch jobs are asking for (``in_batch``, their keys)."""
    counts = {c.name: Coverage() for c in study.criteria}
    for item in what_is_left(study, entries, in_batch=in_batch):
        c = counts[item.item.criterion.name]
        if item.left is Left.CACHED:
            c.answered += 1
        elif item.left is Left.REFUSED:
            c.refused += 1
        elif item.left is Left.IN_BATCH:
            c.in_batch += 1
        else:
            c.missing += 1
    return counts
