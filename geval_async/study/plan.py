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
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice
from typing import Any

from ..errors import ConfigError
from ..options import SamplingMode
from .config import CriterionConfig, EvalConfig
from .criteria import Rubric
from .definition import Steps
from .keys import KeyFrame, request_key
from .prompts import Template, field_text
from .records import Record, Records
from .shard import Share

# Per-message framing tokens providers add; the estimate only needs to be close and stable.
_TOKENS_PER_MESSAGE = 4
_CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class PlannedCriterion:
    """A criterion with its parsed template, and its evaluation steps when known (the
    template's ``{{steps}}`` stays open while generated ones are not read yet)."""

    config: CriterionConfig
    template: Template
    steps: Steps | None = None

    @property
    def steps_pending(self) -> bool:
        """Whether its steps are to be generated and not read from the cache yet."""
        return self.steps is not None and self.steps.text is None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def rubrics(self) -> tuple[Rubric | None, ...]:
        """The rubrics asked separately, or (None,) for a single-question criterion."""
        return self.config.rubrics or (None,)


@dataclass(frozen=True)
class Study:
    """Everything needed to plan and score a study, checked."""

    config: EvalConfig
    records: Records  # read from the file again as each walk of the plan needs them
    criteria: tuple[PlannedCriterion, ...]
    warnings: tuple[str, ...] = ()  # doubts found at load (a prompt stating another scale)

    @property
    def pending_steps(self) -> tuple[PlannedCriterion, ...]:
        """The criteria whose generated steps are not read yet: no item of them can be
        rendered until they are (:func:`~geval_async.study.steps.with_steps`)."""
        return tuple(c for c in self.criteria if c.steps_pending)

    @property
    def item_count(self) -> int:
        """Items (record x criterion x rubric) in the plan (in its shard, with ``--shard``)."""
        return sum(self.items_by_criterion().values())

    def items_by_criterion(self) -> dict[str, int]:
        """How many items of each criterion the plan (or its shard) holds."""
        if self.config.shard is None:
            records = len(self.selected_records)
            return {c.name: records * len(c.rubrics) for c in self.criteria}
        counts = dict.fromkeys((c.name for c in self.criteria), 0)
        for item in plan_items(self):
            counts[item.criterion.name] += 1
        return counts

    @property
    def planned(self) -> int:
        """About how many first requests the plan looks up (exact without ``--shard``): a
        cache not much larger is read whole (:meth:`~.cache.JudgeCache.scan_heads`)."""
        items = len(self.selected_records) * sum(len(c.rubrics) for c in self.criteria)
        shard = self.config.shard
        return items if shard is None else -(-items // shard.count)

    @cached_property
    def share(self) -> Share | None:
        """With ``--shard``, the part of the plan this shard holds, cut once from every
        item's first key (:meth:`~.shard.Shard.cut`); None without a shard."""
        shard = self.config.shard
        if shard is None:
            return None
        return shard.cut(r.key for requests in _request_chunks(self) for r in requests)

    @property
    def selected_records(self) -> Records:
        """The records in the plan (the first ``--limit`` when a limit is set)."""
        limit = self.config.limit
        return self.records if limit is None else self.records[:limit]


# JudgeItem and JudgeRequest are not frozen, though never changed: a frozen dataclass's
# __init__ sets each field through object.__setattr__, and a rerun makes one of each per item.
@dataclass(slots=True)
class JudgeItem:
    """One record judged on one criterion (or one rubric of it): needs ``choices_per_item``
    answers."""

    record: Record
    criterion: PlannedCriterion
    rubric: Rubric | None = None


@dataclass(slots=True)
class JudgeRequest:
    """One chat-completions request of an item, with its cache key and token estimate.

    Its messages and body are made when asked for, not kept: a rerun looks up every request
    of the plan and sends none, and a request waiting to be sent holds no prompt text.
    """

    item: JudgeItem
    draw: int
    n: int
    key: str
    est_tokens: int
    config: EvalConfig = field(repr=False, compare=False)

    @property
    def messages(self) -> list[dict[str, str]]:
        """The judge messages (rendered again each time: they are not kept)."""
        return render_messages(self.item)

    @property
    def body(self) -> dict[str, Any]:
        """The request as sent."""
        return _body(self.config, self.messages, self.draw, self.n)

    @property
    def model(self) -> str:
        """The body's model, without rendering the body."""
        return self.config.judge.model

    @property
    def max_completion_tokens(self) -> int:
        """The body's ``max_tokens x n``: the most the answer can bill, without rendering."""
        return self.config.sampling.max_tokens * self.n


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
    chunk at a time (:func:`first_requests`); with a shard, of its items only, each rendered
    and hashed once."""
    share = study.share
    for requests in _request_chunks(study, send=send, chunk=chunk):
        if share is None:
            yield from requests
        else:
            yield from (request for request in requests if share.holds(request.key))


def _request_chunks(
    study: Study, *, send: bool = False, chunk: int = 256
) -> Iterator[list[JudgeRequest]]:
    items = _send_order(study) if send else _plan_order(study)
    while requests := first_requests(islice(items, chunk), study.config):
        yield requests


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
    for criterion in study.criteria:
        for rubric in criterion.rubrics:
            for record in records:
                yield JudgeItem(record, criterion, rubric)


def _send_order(study: Study) -> Iterator[JudgeItem]:
    """Every item of the plan in the order the runner sends them: record by record.

    All criteria of a record go out together, so the token cost of the requests stays even
    over the run. Sent criterion by criterion, a criterion with a short prompt (no source
    text) would spend a stretch of the run bound by the requests limit with tokens to spare,
    and one with a long prompt a stretch bound by tokens with requests to spare; interleaved,
    both limits can be used at once. (Provider prompt caches keep a prefix for minutes, so
    each criterion's instructions stay cached as they alternate.)
    """
    _check_steps(study)
    pairs = [(criterion, rubric) for criterion in study.criteria for rubric in criterion.rubrics]
    for record in study.selected_records:
        for criterion, rubric in pairs:
            yield JudgeItem(record, criterion, rubric)


def render_messages(item: JudgeItem) -> list[dict[str, str]]:
    """The judge messages for an item (the template filled from the record)."""
    return [{"role": item.criterion.config.role, "content": render_text(item)}]


def render_text(item: JudgeItem) -> str:
    """The text of an item's one message: its criterion's template filled from the record."""
    criterion = item.criterion
    values: dict[str, Any] = {
        name: item.record.fields[source] for name, source in criterion.config.fields.items()
    }
    if item.rubric is not None:
        values["rubric"] = item.rubric.text
    return criterion.template.render(values)


def _request(item: JudgeItem, config: EvalConfig, draw: int, n: int) -> JudgeRequest:
    messages = render_messages(item)
    key = request_key(_body(config, messages, draw, n), draw)
    return JudgeRequest(item, draw, n, key, _estimate(config, messages, n), config)


def _body(config: EvalConfig, messages: list[dict[str, str]], draw: int, n: int) -> dict[str, Any]:
    sampling = config.sampling
    body: dict[str, Any] = {
        "model": config.judge.model,
        "messages": messages,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_tokens,
        "n": n,
    }
    if sampling.mode == SamplingMode.LOGPROBS:
        body["logprobs"] = True
        body["top_logprobs"] = sampling.top_logprobs
    if sampling.seed is not None:
        body["seed"] = sampling.seed + draw
    if sampling.reasoning_effort is not None:
        body["reasoning_effort"] = str(sampling.reasoning_effort)
    return body


def _estimate(config: EvalConfig, messages: list[dict[str, str]], n: int) -> int:
    chars = 0
    for message in messages:
        chars += len(message["content"])
    return _tokens(config, chars, len(messages), n)


def _tokens(config: EvalConfig, chars: int, messages: int, n: int) -> int:
    return (
        -(-chars // _CHARS_PER_TOKEN)
        + _TOKENS_PER_MESSAGE * messages
        + config.sampling.max_tokens * n
    )


def first_request(item: JudgeItem, config: EvalConfig) -> JudgeRequest:
    """Draw 0 of an item: all its answers asked for at once."""
    return _request(item, config, 0, config.sampling.choices_per_item)


def first_requests(items: Iterable[JudgeItem], config: EvalConfig) -> list[JudgeRequest]:
    """Draw 0 of each item, as :func:`first_request` makes it, for many items at once: a rerun
    of a large plan looks up every request. Each criterion's part of the key is hashed once
    (:class:`~.keys.KeyFrame`), and its template is filled from each record without a
    mapping of values; no body is built."""
    n = config.sampling.choices_per_item
    # A request's token estimate (_tokens) less its text's share: the same for every item.
    fixed = _tokens(config, 0, 1, n)
    prompts: dict[tuple[int, int], _Prompt] = {}
    requests: list[JudgeRequest] = []
    append = requests.append
    for item in items:
        criterion, rubric = item.criterion, item.rubric
        prompt = prompts.get((id(criterion), id(rubric)))
        if prompt is None or prompt.criterion is not criterion or prompt.rubric is not rubric:
            prompt = prompts[id(criterion), id(rubric)] = _Prompt(item, config)
        frame = prompt.frame
        if frame is None:
            append(first_request(item, config))
            continue
        text = prompt.text(item.record)
        tokens = fixed - (-len(text) // _CHARS_PER_TOKEN)
        append(JudgeRequest(item, 0, n, frame.key(text), tokens, config))
    return requests


_join = "".join


class _Prompt:
    """One criterion's (and rubric's) template, ready to be filled from many records, and
    the frame of its first requests' keys (None: keyed the slow way)."""

    def __init__(self, item: JudgeItem, config: EvalConfig) -> None:
        self.criterion, self.rubric = item.criterion, item.rubric
        template = self.criterion.template
        if self.rubric is not None:
            template = template.fill({"rubric": self.rubric.text})  # as render_text does
        fields = self.criterion.config.fields
        self._parts = list(template.parts)
        self._slots = [(i, fields[template.parts[i]]) for i in range(1, len(template.parts), 2)]
        body = _body(config, render_messages(item), 0, config.sampling.choices_per_item)
        self.frame = KeyFrame.around(body, 0)

    def text(self, record: Record) -> str:
        """What :func:`render_text` gives for this criterion and ``record``."""
        parts, fields = self._parts.copy(), record.fields
        for index, source in self._slots:
            value = fields[source]
            parts[index] = value if type(value) is str else field_text(value)
        return _join(parts)


def chunk_request(request: JudgeRequest, start: int, config: EvalConfig) -> JudgeRequest:
    """The chunk of ``request``'s item that starts at sample ``start`` and asks for the rest."""
    total = request.draw + request.n
    return _request(request.item, config, start, total - start)
