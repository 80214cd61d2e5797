"""What the cache holds for each item of a plan: no network, no writes.

The runner uses it to skip what is done, ``status`` to count answered / failed / missing per
criterion, and the scoring stage to collect every stored answer of an item. An item's answers
are its draw-0 entry plus, when that returned fewer choices than asked, the further draws (see
:mod:`geval_async.plan`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..study.config import EvalConfig
from .cache import CachedResponse, JudgeCache
from .plan import JudgeItem, JudgeRequest, Study, first_request, followup_requests, plan_items


@dataclass
class ItemState:
    """The cached answers of one item and what it still lacks.

    ``refused`` is the stored refusal when a request of the item was refused for good.
    """

    item: JudgeItem
    first: JudgeRequest
    entries: list[CachedResponse] = field(default_factory=list)
    missing: list[JudgeRequest] = field(default_factory=list)
    refused: CachedResponse | None = None

    @property
    def complete(self) -> bool:
        return not self.missing and self.refused is None


def item_state(
    first: JudgeRequest, cache: JudgeCache, config: EvalConfig, *, retry_failed: bool = False
) -> ItemState:
    """Look up every request of an item; with ``retry_failed`` a refusal counts as missing."""
    state = ItemState(first.item, first)

    def lookup(request: JudgeRequest) -> bool:
        entry = cache.get(request.key)
        if entry is None or (not entry.ok and retry_failed):
            state.missing.append(request)
            return False
        if not entry.ok:
            state.refused = entry
            return False
        state.entries.append(entry)
        return True

    if lookup(first):
        for request in followup_requests(first, state.entries[0].received, config):
            lookup(request)
    return state


def item_states(study: Study, cache: JudgeCache) -> Iterator[ItemState]:
    """The state of every item of the plan, in plan order."""
    for item in plan_items(study):
        yield item_state(first_request(item, study.config), cache, study.config)


@dataclass
class Coverage:
    """Per-criterion counts of items answered, refused and missing."""

    answered: int = 0
    refused: int = 0
    missing: int = 0

    @property
    def items(self) -> int:
        return self.answered + self.refused + self.missing


def coverage(study: Study, cache: JudgeCache) -> dict[str, Coverage]:
    """Count, per criterion, the items the cache answers, refuses or lacks."""
    counts = {c.name: Coverage() for c in study.criteria}
    for state in item_states(study, cache):
        c = counts[state.item.criterion.name]
        if state.refused is not None:
            c.refused += 1
        elif state.missing:
            c.missing += 1
        else:
            c.answered += 1
    return counts
