"""The plan: records x criteria x draws -> judge requests, produced lazily.

:func:`~.prepare.prepare_study` loads and checks everything a run needs (records, templates,
placeholder fields) so that bad input fails before the first request. :func:`plan_items` then
yields one
:class:`JudgeItem` per record and criterion, criterion by criterion (consecutive requests share a
prompt prefix, which providers cache), without building the whole plan in memory. A request's
messages are rendered only when :func:`first_request` is called for it, by the worker that needs
it.

An item needs ``choices_per_item`` answers (samples), drawn in chunks. The chunk at draw
``d`` starts at sample ``d`` and asks for the rest (``n = total - d``); draw 0 asks for all of
them in one request. When a chunk returns fewer (an earlier run with a smaller n, or llama.cpp,
which ignores ``n``), the next chunk starts where it ended. The chain is a pure function of
what is in the cache, so the scoring stage finds the same keys without a network, and always
scores the first n samples in draw order (see :mod:`geval_async.study.keys`).

A walk that decides many items from their first keys (a rerun looks up every item of the
plan) takes them a chunk at a time (:func:`plan_chunks`): each item's first request is made by
:func:`first_request` (its key is the hash of the body it sends) and only its key and token
estimate are kept, so a chunk holds no prompt text. What a request holds, and how it is made,
is :mod:`.requests`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import islice, product

from ..errors import ConfigError
from .config import EvalConfig
from .criteria import Rubric
from .draws import Allotment
from .pairing import PairSlot, pair_records, pair_slots
from .records import Record, Records
from .requests import (
    JudgeItem,
    JudgeRequest,
    PlannedCriterion,
    chunk_request,
    first_request,
    render_messages,
)
from .shard import Share

# The plan's requests are made in .requests; imported from here too, where they always were.
__all__ = [
    "ChunkSizes",
    "JudgeItem",
    "JudgeRequest",
    "PlanChunk",
    "PlannedCriterion",
    "Study",
    "chunk_request",
    "first_request",
    "plan_chunks",
    "plan_items",
    "planned_requests",
    "render_messages",
]


@dataclass(frozen=True)
class Study:
    """Everything needed to plan and score a study, checked."""

    config: EvalConfig
    records: Records  # read from the file again as each walk of the plan needs them
    criteria: tuple[PlannedCriterion, ...]
    warnings: tuple[str, ...] = ()  # doubts found at load (a prompt stating another scale)
    # The pairwise criteria (:mod:`.pairing`): their items are pairs of records in an order,
    # planned after the rated criteria's items.
    pairwise: tuple[PlannedCriterion, ...] = ()
    # The draws each item of a round asks for, when draws are spent by need (:mod:`.draws`);
    # None: every item asks the study's n.
    allotment: Allotment | None = None

    @property
    def planned_criteria(self) -> tuple[PlannedCriterion, ...]:
        """Every criterion the plan asks, rated and pairwise: what the judge stage sends."""
        return (*self.criteria, *self.pairwise)

    def rated(self) -> Study:
        """The study without its pairwise criteria: what the rating tables score."""
        return replace(self, pairwise=()) if self.pairwise else self

    def paired(self) -> Study:
        """The study's pairwise criteria alone: what the pairwise statistics read."""
        return replace(self, criteria=())

    def pair_slots(self, criterion: PlannedCriterion) -> list[PairSlot]:
        """A pairwise criterion's requests, from the records' index (no text read)."""
        pairing = criterion.config.pairing
        assert pairing is not None  # only pairwise criteria are asked
        return pair_slots(
            self.selected_records,
            pairing,
            self.config.stats.conditions,
            f"{self.config.source}: criterion {criterion.name!r}",
        )

    @property
    def pending_steps(self) -> tuple[PlannedCriterion, ...]:
        """The criteria whose generated steps are not read yet: no item of them can be
        rendered until they are (:func:`~geval_async.study.evaluation_steps.with_steps`)."""
        return tuple(c for c in self.criteria if c.steps_pending)

    @property
    def item_count(self) -> int:
        """Items (record x criterion x rubric) in the plan (in its shard, with ``--shard``)."""
        return sum(self.items_by_criterion().values())

    def items_by_criterion(self) -> dict[str, int]:
        """How many items of each criterion the plan (or its shard) holds."""
        allotment = self.allotment
        if allotment is not None and allotment.only:
            asked = allotment.items_by_criterion()
            return {c.name: asked.get(c.name, 0) for c in self.planned_criteria}
        if self.config.shard is None:
            records = len(self.selected_records)
            counts = {c.name: records * len(c.rubrics) for c in self.criteria}
            return counts | {c.name: len(self.pair_slots(c)) for c in self.pairwise}
        counts = dict.fromkeys((c.name for c in (*self.criteria, *self.pairwise)), 0)
        for item in plan_items(self):
            counts[item.criterion.name] += 1
        return counts

    @cached_property
    def share(self) -> Share | None:
        """With ``--shard``, the part of the plan this shard holds, cut once from every
        item's first key (:meth:`~.shard.Shard.cut`); None without a shard."""
        shard = self.config.shard
        if shard is None:
            return None
        # Cut from every item's key, whatever a round asks: an item keeps its shard.
        whole = replace(self, allotment=None)
        parts = _chunks(whole, send=False, chunk=2048)
        return shard.cut(key for part in parts for key in part.keys)

    @property
    def selected_records(self) -> Records:
        """The records in the plan (the first ``--limit`` when a limit is set)."""
        limit = self.config.limit
        return self.records if limit is None else self.records[:limit]


def plan_items(study: Study) -> Iterator[JudgeItem]:
    """Yield every item of the plan, criterion by criterion (and rubric by rubric).

    With a shard (``--shard I/K``), only the items whose first draw's key falls in it.
    """
    if study.config.shard is None:
        return _plan_order(study)
    return (request.item for request in planned_requests(study))


def planned_requests(
    study: Study, *, send: bool = False, chunk: int = 256
) -> Iterator[JudgeRequest]:
    """The first request of every item of the plan, in plan order (or in send order), made a
    chunk at a time (:func:`plan_chunks`); with a shard, of its items only, each rendered
    and hashed once."""
    for part in plan_chunks(study, send=send, chunk=chunk):
        yield from part.requests()


@dataclass(slots=True)
class PlanChunk:
    """Consecutive items of the plan, with their first requests' keys and token estimates,
    made in bulk: the items are ``records`` x ``prompts``, record by record (``where`` picks
    those a shard holds). An item's :class:`JudgeItem` and :class:`JudgeRequest` are made
    only when asked for: a rerun decides a chunk of items from their keys alone."""

    config: EvalConfig
    records: list[Record]
    prompts: list[tuple[PlannedCriterion, Rubric | None]]
    keys: list[str]
    tokens: list[int]  # each first request's est_tokens
    where: list[int] | None = None  # the items' places in records x prompts (None: all)
    draws: list[int] | None = None  # each first request's n, when a round allots them
    n: int = field(init=False)  # each first request's n (choices_per_item: read once)

    def __post_init__(self) -> None:
        self.n = self.config.sampling.choices_per_item

    def __len__(self) -> int:
        return len(self.keys)

    def item(self, index: int) -> JudgeItem:
        """The ``index``-th item of the chunk."""
        place = index if self.where is None else self.where[index]
        record, prompt = divmod(place, len(self.prompts))
        criterion, rubric = self.prompts[prompt]
        return JudgeItem(self.records[record], criterion, rubric)

    def request(self, index: int) -> JudgeRequest:
        """The first request of the ``index``-th item, as :func:`first_request` makes it."""
        item = self.item(index)
        n = self.n if self.draws is None else self.draws[index]
        return JudgeRequest(item, 0, n, self.keys[index], self.tokens[index], self.config)

    def requests(self) -> list[JudgeRequest]:
        return [self.request(index) for index in range(len(self.keys))]

    def first_over(self, tpm: float | None, *, one_answer: bool = False) -> int | None:
        """The token estimate of the first item over ``tpm`` (None: none, or no limit); with
        ``one_answer``, of its first request as an endpoint of one answer a request is sent
        it (:meth:`JudgeRequest.sent_tokens`)."""
        if not tpm:
            return None
        tokens = self.tokens
        if one_answer:
            max_tokens = self.config.sampling.max_tokens
            ns = self.draws or [self.n] * len(tokens)
            tokens = [t - max_tokens * max(n - 1, 0) for t, n in zip(tokens, ns, strict=True)]
        if max(tokens, default=0) <= tpm:
            return None
        return next(t for t in tokens if t > tpm)

    def names(self) -> list[str]:
        """Each item's criterion name, in order."""
        names = [criterion.name for criterion, _ in self.prompts]
        if self.where is None:
            return names * len(self.records)
        return [names[place % len(names)] for place in self.where]


@dataclass
class ChunkSizes:
    """How many items each next chunk of a walk holds: ``first``, then twice the last, up to
    ``most`` (read anew for every chunk, so that the walker may lower it as it goes).

    A run's feed walks with a small first chunk and lowers ``most`` once it sends
    (:mod:`geval_async.judging.run.feed`): a chunk is made on the event loop in one go
    (rendering and hashing every item), so a large first chunk keeps the first request back,
    and one made while requests are in flight keeps their answers waiting as long, which
    leaves the server idle once its queue is done.
    """

    most: int = 2048
    first: int | None = None

    def take(self, last: int | None) -> int:
        """The next chunk's size, after a chunk of ``last`` items (None: the first)."""
        if last is None:
            return min(self.first or self.most, self.most)
        return min(2 * last, self.most)


def plan_chunks(
    study: Study, *, send: bool = False, chunk: int | ChunkSizes = 2048
) -> Iterator[PlanChunk]:
    """Every item of the plan (in plan order, or in send order) with its first request's key,
    about ``chunk`` items at a time (or as many as :class:`ChunkSizes` says for each chunk);
    with a shard, of its items only."""
    share = study.share
    for part in _chunks(study, send=send, chunk=chunk):
        if share is not None:
            kept = [i for i, key in enumerate(part.keys) if share.holds(key)]
            part.keys = [part.keys[i] for i in kept]
            part.tokens = [part.tokens[i] for i in kept]
            if part.draws is not None:
                part.draws = [part.draws[i] for i in kept]
            part.where = kept if part.where is None else [part.where[i] for i in kept]
        if part.keys:
            yield part


def _chunks(study: Study, *, send: bool, chunk: int | ChunkSizes) -> Iterator[PlanChunk]:
    _check_steps(study)
    config = study.config
    pairs = [(criterion, rubric) for criterion in study.criteria for rubric in criterion.rubrics]
    sizes = chunk if isinstance(chunk, ChunkSizes) else ChunkSizes(chunk)
    if not pairs:
        yield from _pair_chunks(study, sizes, config)
        return
    # In send order, record by record: all criteria of a record go out together, so the
    # token cost of the requests stays even over the run. Sent criterion by criterion, a
    # criterion with a short prompt (no source text) would spend a stretch of the run bound
    # by the requests limit with tokens to spare, and one with a long prompt a stretch bound
    # by tokens with requests to spare; interleaved, both limits can be used at once.
    # (Provider prompt caches keep a prefix for minutes, so each criterion's instructions
    # stay cached as they alternate.)
    records = study.selected_records
    allotment = study.allotment
    if send:
        yield from _record_chunks(records, pairs, sizes, config, allotment)
    else:
        for pair in pairs:
            yield from _record_chunks(records, [pair], sizes, config, allotment)
    yield from _pair_chunks(study, sizes, config)


def _pair_chunks(study: Study, sizes: ChunkSizes, config: EvalConfig) -> Iterator[PlanChunk]:
    """The pairwise criteria's items, criterion by criterion: each pair in each order asked
    is a pair record (:mod:`.pairing`) judged on its criterion (in a round's opening only)."""
    if study.allotment is not None and study.allotment.only:
        return
    for criterion in study.pairwise:
        pairing = criterion.config.pairing
        assert pairing is not None  # study.pairwise holds pairwise criteria only
        records = pair_records(study.selected_records, study.pair_slots(criterion), pairing)
        yield from _record_chunks(records, [(criterion, None)], sizes, config)


def _record_chunks(
    selected: Iterable[Record],
    pairs: list[tuple[PlannedCriterion, Rubric | None]],
    sizes: ChunkSizes,
    config: EvalConfig,
    allotment: Allotment | None = None,
) -> Iterator[PlanChunk]:
    """Chunks of records x ``pairs``, about as many items as ``sizes`` says for each, record
    by record; each item's first request made and only its key and token estimate kept.
    With an ``allotment``, each item asks the draws it allots (and a later round holds only
    the items it names)."""
    records = iter(selected)
    count = len(pairs)
    n = config.sampling.choices_per_item
    items: int | None = None  # the last chunk's size, in items
    while True:
        items = sizes.take(items)
        batch = list(islice(records, max(1, items // count)))
        if not batch:
            return
        keys: list[str] = []
        tokens: list[int] = []
        draws: list[int] = []
        where: list[int] = []
        for place, (record, (criterion, rubric)) in enumerate(product(batch, pairs)):
            asked = n if allotment is None else allotment.of(criterion.name, record.id, n)
            if asked is None:
                continue
            request = first_request(JudgeItem(record, criterion, rubric), config, asked)
            keys.append(request.key)
            tokens.append(request.est_tokens)
            draws.append(asked)
            where.append(place)
        if keys:
            every = len(where) == len(batch) * count
            allotted = None if allotment is None else draws
            yield PlanChunk(config, batch, pairs, keys, tokens, None if every else where, allotted)


def _check_steps(study: Study) -> None:
    """No item is rendered before its criterion's generated steps are read from the cache."""
    if study.pending_steps:
        name = study.pending_steps[0].name
        raise ConfigError(
            f"{study.config.source}: criterion {name!r} has no evaluation steps in the cache "
            f"{study.config.cache_path} yet: run `geval-async run {study.config.source}` first "
            "(it asks the judge for them once)"
        )


def _plan_order(study: Study) -> Iterator[JudgeItem]:
    _check_steps(study)
    records = study.selected_records
    allotment, n = study.allotment, study.config.sampling.choices_per_item
    for criterion in study.criteria:
        for rubric in criterion.rubrics:
            for record in records:
                if allotment is None or allotment.of(criterion.name, record.id, n) is not None:
                    yield JudgeItem(record, criterion, rubric)
    if allotment is not None and allotment.only:
        return
    for criterion in study.pairwise:
        pairing = criterion.config.pairing
        assert pairing is not None  # study.pairwise holds pairwise criteria only
        for pair in pair_records(records, study.pair_slots(criterion), pairing):
            yield JudgeItem(pair, criterion)
