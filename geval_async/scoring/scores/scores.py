"""The scoring stage (sync): cached answers -> ratings -> weighted scores per record.

Reads the cache only, never the network. For every item of the plan it takes the stored
answers (the read model, :mod:`geval_async.judging.store.read_model`), turns them into a
:class:`RatingDistribution` (samples mode: each choice's text parsed by the criterion's
parser; logprobs mode: the first token's ``top_logprobs``) and keeps the distribution next to
its weighted score Σ p(v)·v. Invalid samples are counted, never scored as 0; items the cache
lacks or refused are kept with their status so every table can say what it left out.

Rubric criteria (AND / OR / weighted sum) are scored per rubric (yes/no), then combined per
record (see :mod:`geval_async.scoring.reading.rubrics`); the combined score carries its rubrics as
``parts``. Likert criteria with ``answer = "option"`` map the option number the judge chose to
its point.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...judging.store.read_model import ItemAnswers
from ...options import AnswerForm, Fractional, ParserMode, SamplingMode, ScoreStatus
from ...study.plan import PlannedCriterion, Study
from ..reading.distributions import standard_error, with_mass_floor
from ..reading.ratings import (
    RatingDistribution,
    RatingParser,
    Reading,
    Reason,
    distribution_from_samples,
    first_token_top_logprobs,
)
from ..reading.rubrics import RubricOutcome, combine, parse_yes_no, yes_no_from_logprobs
from ..reading.thinking import REASONING_CUT_OFF, message_reasoning, split_reasoning

SCORED, MISSING, REFUSED, NO_VALID = (
    ScoreStatus.SCORED,
    ScoreStatus.MISSING,
    ScoreStatus.REFUSED,
    ScoreStatus.NO_VALID,
)


@dataclass(frozen=True)
class ItemScore:
    """One record's result on one criterion."""

    record_id: str
    group: str | None
    condition: str | None
    criterion: str
    status: ScoreStatus
    distribution: RatingDistribution | None = None
    answers: tuple[str, ...] = ()
    ratings: tuple[float | None, ...] = ()
    reasons: tuple[Reason | None, ...] = ()  # per answer: why it gave no rating
    reasonings: tuple[str | None, ...] = ()  # per answer: its message's reasoning field, if any
    rubric: str | None = None
    parts: tuple[ItemScore, ...] = ()
    outcome: RubricOutcome | None = None
    # samples: s / sqrt(m) of the valid ratings (None below two); logprobs: the distribution's
    # standard deviation; rubric criteria: None (their score is a verdict, not a mean).
    se: float | None = None
    served: tuple[str, ...] = ()  # the models the server said it served (the raw export)

    @property
    def weighted_score(self) -> float | None:
        if self.parts:
            return None if self.outcome is None else self.outcome.value
        return None if self.distribution is None else self.distribution.weighted_score

    @property
    def valid(self) -> int:
        if self.parts:
            return sum(p.valid for p in self.parts)
        return 0 if self.distribution is None else self.distribution.valid

    @property
    def invalid(self) -> int:
        if self.parts:
            return sum(p.invalid for p in self.parts)
        return 0 if self.distribution is None else self.distribution.invalid


@dataclass(frozen=True)
class PanelItemScore(ItemScore):
    """One record's panel result on one criterion: the pooled score, and which judges scored
    (pooled by :func:`~.panel.pool_items`).

    ``distribution`` is the pool of the scoring judges' distributions (None for rubric
    criteria); ``valid`` and ``invalid`` count every judge's samples.
    """

    pooled: float | None = None
    judges_scored: tuple[str, ...] = ()
    judges_missing: tuple[str, ...] = ()
    member_valid: int = 0
    member_invalid: int = 0

    @property
    def weighted_score(self) -> float | None:
        return self.pooled

    @property
    def valid(self) -> int:
        return self.member_valid

    @property
    def invalid(self) -> int:
        return self.member_invalid

    @property
    def flagged(self) -> bool:
        """Scored, but not by every judge of the panel."""
        return self.pooled is not None and bool(self.judges_missing)


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
    reasons: Counter[str] = field(default_factory=Counter)  # invalid samples by reason


def _choice_text(choice: dict[str, Any]) -> str:
    message = choice.get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


def _choice_reasoning(choice: dict[str, Any]) -> str | None:
    return message_reasoning(choice.get("message"))


class _YesNo:
    """A parser with RatingParser's interface for yes/no rubric answers."""

    def read(
        self, text: str, finish_reason: str | None = None, reasoning: str | None = None
    ) -> Reading:
        if "<" in text:  # "Yes" after the reasoning, not the reasoning's "no"
            split = split_reasoning(text)
            if split.unfinished:
                return Reading(None, Reason.CUT_OFF, REASONING_CUT_OFF)
            text = split.answer
        rating = parse_yes_no(text)
        if rating is not None:
            return Reading(rating)
        if finish_reason == "length":
            inside = not text.strip() and (reasoning or "").strip()
            return Reading(None, Reason.CUT_OFF, REASONING_CUT_OFF if inside else None)
        return Reading(None, Reason.NO_RATING if text.strip() else Reason.REFUSED)


Parser = RatingParser | _YesNo


def score_item(
    state: ItemAnswers, parser: Parser, mode: SamplingMode, n: int, min_valid_mass: float = 0.5
) -> ItemScore:
    """Score one item (one record on one criterion or rubric) from its cached answers.

    In logprobs mode an answer whose first token puts less than ``min_valid_mass`` of its
    probability on valid ratings is invalid (``low_mass``), not scored from the rest.
    """
    record, criterion = state.item.record, state.item.criterion
    base: dict[str, Any] = dict(
        record_id=record.id,
        group=record.group,
        condition=record.condition,
        criterion=criterion.name,
        rubric=None if state.item.rubric is None else state.item.rubric.name,
        served=state.served,
    )
    if state.refused:
        return ItemScore(status=REFUSED, **base)
    if state.missing:
        return ItemScore(status=MISSING, **base)
    choices = state.choices[:n]
    answers = tuple(map(_choice_text, choices))
    reasonings = tuple(map(_choice_reasoning, choices))
    # map, not generators: a study reads tens of thousands of answers here.
    finishes = [c.get("finish_reason") for c in choices]
    readings = list(map(parser.read, answers, finishes, reasonings))
    ratings: tuple[float | None, ...] = tuple([r.rating for r in readings])
    reasons = tuple([r.reason for r in readings])
    if mode == SamplingMode.LOGPROBS:
        top = first_token_top_logprobs(choices[0]) if choices else None
        if top is None:
            # The server sent no logprobs: one invalid sample, visible in the report.
            distribution = RatingDistribution(probs={}, valid=0, invalid=1, valid_mass=0.0)
        elif isinstance(parser, _YesNo):
            distribution = yes_no_from_logprobs(top)
        else:
            distribution = parser.logprob_distribution(top)
        distribution = with_mass_floor(distribution, min_valid_mass)
        # The first token's probabilities are what is scored: the text only explains them.
        if distribution.invalid:
            told = distribution.reason if distribution.reason != Reason.NO_RATING else None
            reasons = tuple(told or r or Reason.NO_RATING for r in reasons) or (
                told or Reason.NO_RATING,
            )
        else:
            reasons = (None,) * len(reasons)
    else:
        distribution = distribution_from_samples(ratings)
    config = criterion.config
    if config.answer == AnswerForm.OPTION and not config.is_rubric:
        # The judge answered option k; the score is the k-th point.
        points = config.scale.points
        distribution = RatingDistribution(
            probs={points[int(k) - 1]: p for k, p in distribution.probs.items()},
            valid=distribution.valid,
            invalid=distribution.invalid,
            valid_mass=distribution.valid_mass,
        )
        ratings = tuple(None if r is None else points[int(r) - 1] for r in ratings)
    status = SCORED if distribution.weighted_score is not None else NO_VALID
    se = distribution.sd if mode == SamplingMode.LOGPROBS else standard_error(ratings)
    return ItemScore(
        status=status,
        se=se,
        distribution=distribution,
        answers=answers,
        ratings=ratings,
        reasons=reasons,
        reasonings=reasonings,
        **base,
    )


def combine_rubrics(criterion: PlannedCriterion, parts: list[ItemScore]) -> ItemScore:
    """One record's rubric scores -> the criterion's AND / OR / weighted-sum result."""
    first = parts[0]
    base: dict[str, Any] = dict(
        record_id=first.record_id,
        group=first.group,
        condition=first.condition,
        criterion=criterion.name,
        parts=tuple(parts),
    )
    for status in (REFUSED, MISSING, NO_VALID):
        if any(p.status == status for p in parts):
            return ItemScore(status=status, **base)
    holds = {
        p.rubric or "": (p.distribution.probs.get(1.0, 0.0) if p.distribution else 0.0)
        for p in parts
    }
    outcome = combine(criterion.config.kind, criterion.config.rubrics, holds)
    return ItemScore(status=SCORED, outcome=outcome, **base)


def parser_for(criterion: PlannedCriterion) -> Parser:
    """The answer parser a criterion's config asks for."""
    c = criterion.config
    if c.is_rubric:
        return _YesNo()
    function = c.parser_function
    return RatingParser(
        c.answer_scale,
        mode=ParserMode.FUNCTION if function is not None else c.parser,
        pattern=c.pattern,
        # An option number is whole: "2.5" names no option.
        fractional=Fractional.INVALID if c.answer == AnswerForm.OPTION else c.fractional,
        options=c.options,
        names=(c.name, c.display_name),
        function=function,
    )


def score_items(study: Study, answers: Iterable[ItemAnswers]) -> Iterator[ItemScore]:
    """Score every record on every criterion from its stored answers (in plan order, as
    :class:`~geval_async.judging.store.read_model.StudyAnswers` gives them)."""
    parsers = {c.name: parser_for(c) for c in study.criteria}
    criteria = {c.name: c for c in study.criteria}
    sampling = study.config.sampling
    pending: dict[str, list[ItemScore]] = {}
    current: str | None = None
    for state in answers:
        name = state.item.criterion.name
        score = score_item(
            state,
            parsers[name],
            sampling.mode,
            sampling.choices_per_item,
            sampling.min_valid_mass,
        )
        if not criteria[name].config.is_rubric:
            yield score
            continue
        if current is not None and name != current:
            yield from _combined(criteria[current], pending)
            pending = {}
        current = name
        pending.setdefault(score.record_id, []).append(score)
    if current is not None:
        yield from _combined(criteria[current], pending)


def _combined(
    criterion: PlannedCriterion, pending: dict[str, list[ItemScore]]
) -> Iterator[ItemScore]:
    for parts in pending.values():
        yield combine_rubrics(criterion, parts)


def tally(scores: Iterable[ItemScore]) -> dict[str, CriterionTally]:
    """Coverage and invalid-sample counts per criterion."""
    out: dict[str, CriterionTally] = {}
    for score in scores:
        count_item(out, score)
    return out


def count_item(tallies: dict[str, CriterionTally], score: ItemScore) -> None:
    """Add one item score to its criterion's :class:`CriterionTally` (created when new)."""
    t = tallies.get(score.criterion)
    if t is None:
        t = tallies[score.criterion] = CriterionTally()
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
    for part in score.parts or (score,):
        t.reasons.update(str(r) for r in part.reasons if r is not None)
        if part.invalid and len(t.invalid_examples) < 5:
            bad = [a for a, r in zip(part.answers, part.ratings, strict=True) if r is None]
            if bad:
                where = part.record_id + (f" [{part.rubric}]" if part.rubric else "")
                t.invalid_examples.append(f"{where}: {bad[0]!r}")


def distribution_json(score: ItemScore) -> str:
    """The distribution as compact JSON, for the long table.

    Rubric criteria give the probability that each rubric holds and the combined probability
    (AND/OR) or expectation (weighted sum).
    """
    if score.outcome is not None:
        return orjson.dumps(
            {"rubrics": score.outcome.holds, "probability": score.outcome.probability}
        ).decode()
    if score.distribution is None:
        return ""
    return orjson.dumps(score.distribution.to_json()["probs"]).decode()
