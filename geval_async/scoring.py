"""The scoring stage (sync): cached answers -> ratings -> weighted scores per record.

Reads the cache only, never the network. For every item of the plan it collects the stored
answers (see :mod:`geval_async.coverage`), turns them into a :class:`RatingDistribution`
(samples mode: each choice's text parsed by the criterion's parser; logprobs mode: the
first token's ``top_logprobs``) and keeps the distribution next to its weighted score
Σ p(v)·v. Invalid samples are counted, never scored as 0; items the cache lacks or refused are
kept with their status so every table can say what it left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from .cache import CachedResponse, JudgeCache
from .coverage import ItemState, item_states
from .plan import PlannedCriterion, Study
from .ratings import (
    RatingDistribution,
    RatingParser,
    distribution_from_logprobs,
    distribution_from_samples,
    first_token_top_logprobs,
)

SCORED, MISSING, REFUSED, NO_VALID = "scored", "missing", "refused", "no valid rating"


@dataclass(frozen=True)
class ItemScore:
    """One record's result on one criterion."""

    record_id: str
    group: str | None
    condition: str | None
    criterion: str
    status: str
    distribution: RatingDistribution | None = None
    answers: tuple[str, ...] = ()
    ratings: tuple[float | None, ...] = ()

    @property
    def weighted_score(self) -> float | None:
        return None if self.distribution is None else self.distribution.weighted_score

    @property
    def valid(self) -> int:
        return 0 if self.distribution is None else self.distribution.valid

    @property
    def invalid(self) -> int:
        return 0 if self.distribution is None else self.distribution.invalid


@dataclass
class CriterionTally:
    """Per-criterion counts the report shows: coverage and invalid samples."""

    items: int = 0
    scored: int = 0
    missing: int = 0
    refused: int = 0
    no_valid: int = 0
    valid_samples: int = 0
    invalid_samples: int = 0
    invalid_examples: list[str] = field(default_factory=list)


def _texts(entries: list[CachedResponse]) -> list[dict[str, Any]]:
    choices: list[dict[str, Any]] = []
    for entry in entries:
        choices.extend(entry.choices())
    return choices


def _choice_text(choice: dict[str, Any]) -> str:
    message = choice.get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


def score_item(state: ItemState, parser: RatingParser, mode: str, n: int) -> ItemScore:
    """Score one item from its cached answers."""
    record, criterion = state.item.record, state.item.criterion
    base = dict(record_id=record.id, group=record.group, condition=record.condition,
                criterion=criterion.name)
    if state.refused is not None:
        return ItemScore(status=REFUSED, **base)  # type: ignore[arg-type]
    if state.missing:
        return ItemScore(status=MISSING, **base)  # type: ignore[arg-type]
    choices = _texts(state.entries)[:n]
    answers = tuple(_choice_text(c) for c in choices)
    if mode == "logprobs":
        top = first_token_top_logprobs(choices[0]) if choices else None
        if top is None:
            # The server sent no logprobs: one invalid sample, visible in the report.
            distribution = RatingDistribution(probs={}, valid=0, invalid=1, valid_mass=0.0)
        else:
            distribution = distribution_from_logprobs(top, parser.scale)
        ratings: tuple[float | None, ...] = tuple(parser.parse(a) for a in answers)
    else:
        ratings = tuple(parser.parse(a) for a in answers)
        distribution = distribution_from_samples(ratings)
    status = SCORED if distribution.weighted_score is not None else NO_VALID
    return ItemScore(status=status, distribution=distribution, answers=answers,  # type: ignore[arg-type]
                     ratings=ratings, **base)


def parser_for(criterion: PlannedCriterion) -> RatingParser:
    """The rating parser a criterion's config asks for."""
    c = criterion.config
    return RatingParser(c.scale, mode=c.parser, pattern=c.pattern)


def score_items(study: Study, cache: JudgeCache) -> Iterator[ItemScore]:
    """Score every item of the plan from the cache, in plan order."""
    parsers = {c.name: parser_for(c) for c in study.criteria}
    sampling = study.config.sampling
    for state in item_states(study, cache):
        yield score_item(state, parsers[state.item.criterion.name], sampling.mode,
                         sampling.choices_per_item)


def tally(scores: list[ItemScore]) -> dict[str, CriterionTally]:
    """Coverage and invalid-sample counts per criterion."""
    out: dict[str, CriterionTally] = {}
    for score in scores:
        t = out.setdefault(score.criterion, CriterionTally())
        t.items += 1
        if score.status == SCORED:
            t.scored += 1
        elif score.status == MISSING:
            t.missing += 1
        elif score.status == REFUSED:
            t.refused += 1
        else:
            t.no_valid += 1
        t.valid_samples += score.valid
        t.invalid_samples += score.invalid
        if score.invalid and len(t.invalid_examples) < 5:
            bad = [a for a, r in zip(score.answers, score.ratings, strict=True) if r is None]
            if bad:
                t.invalid_examples.append(f"{score.record_id}: {bad[0]!r}")
    return out


def distribution_json(score: ItemScore) -> str:
    """The distribution as compact JSON, for the long table."""
    if score.distribution is None:
        return ""
    return orjson.dumps(score.distribution.to_json()["probs"]).decode()
