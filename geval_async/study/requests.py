"""A request of an item: its messages, its body as sent, its cache key and token estimate.

An item (:class:`JudgeItem`) is one record judged on one criterion, or one rubric of it; its
requests (:class:`JudgeRequest`) are its chunks of samples (see :mod:`.plan`). What a
request holds is made from its item when asked for: the plan of a large study holds no
prompt text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..options import SamplingMode
from .config import CriterionConfig, EvalConfig
from .criteria import Rubric
from .definition import Steps
from .keys import request_key
from .prompts import Template
from .records import Record

# Per-message framing tokens providers add; the estimate only needs to be close and stable.
TOKENS_PER_MESSAGE = 4
CHARS_PER_TOKEN = 4


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
        return request_body(self.config, self.messages, self.draw, self.n)

    @property
    def model(self) -> str:
        """The body's model, without rendering the body."""
        return self.config.judge.model

    @property
    def max_completion_tokens(self) -> int:
        """The body's ``max_tokens x n``: the most the answer can bill, without rendering."""
        return self.config.sampling.max_tokens * self.n

    def sent_tokens(self, one_answer: bool) -> int:
        """The token estimate of the request as sent, what a tokens-a-minute limit counts:
        with ``one_answer`` (an endpoint that takes one answer a request: n refused, or the
        Responses API) its prompt and one answer's max_tokens, since the other draws its n
        stands for go as requests of their own."""
        if not one_answer or self.n <= 1:
            return self.est_tokens
        return self.est_tokens - self.config.sampling.max_tokens * (self.n - 1)


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


def make_request(item: JudgeItem, config: EvalConfig, draw: int, n: int) -> JudgeRequest:
    """The chunk of ``item`` that starts at sample ``draw`` and asks for ``n``: keyed by the
    body it sends (:attr:`JudgeRequest.body` makes the same body again when it is sent)."""
    messages = render_messages(item)
    key = request_key(request_body(config, messages, draw, n), draw)
    return JudgeRequest(item, draw, n, key, token_estimate(config, messages, n), config)


def request_body(
    config: EvalConfig, messages: list[dict[str, str]], draw: int, n: int
) -> dict[str, Any]:
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


def token_estimate(config: EvalConfig, messages: list[dict[str, str]], n: int) -> int:
    """What a request may cost in tokens, for the tokens-a-minute limit and the budget: its
    prompt's characters at about four a token, a few a message, and every answer's most."""
    chars = sum(len(message["content"]) for message in messages)
    return (
        -(-chars // CHARS_PER_TOKEN)
        + TOKENS_PER_MESSAGE * len(messages)
        + config.sampling.max_tokens * n
    )


def first_request(item: JudgeItem, config: EvalConfig, n: int | None = None) -> JudgeRequest:
    """Draw 0 of an item: all its answers asked for at once (``n`` of them: the study's
    n unless a round allots fewer, :mod:`.draws`)."""
    return make_request(item, config, 0, config.sampling.choices_per_item if n is None else n)


def chunk_request(request: JudgeRequest, start: int, config: EvalConfig) -> JudgeRequest:
    """The chunk of ``request``'s item that starts at sample ``start`` and asks for the rest."""
    total = request.draw + request.n
    return make_request(request.item, config, start, total - start)
