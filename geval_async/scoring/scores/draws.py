"""Which draws of each item count, when draws are spent by need; and the next round.

An adaptive study (``[sampling] target_se`` or ``draws``) reads each item of its rated
criteria up to the study's n, whatever its cache holds, and replays the rule of
:mod:`~geval_async.scoring.stats.adaptive` on the ratings: an item is scored from the first
draws the rule settled on, and is still drawing (missing) while the rule asks for more. The
judge stage asks what the same replay says is missing (:func:`next_round`), so a run, its
resumption and the scores all agree on which draws an item has, from the cache alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ...errors import ConfigError
from ...judging.store.read_model import ItemAnswers, JudgeCache, StudyAnswers
from ...options import Left
from ...study.draws import Allotment
from ...study.plan import PlannedCriterion, Study
from ..stats.adaptive import Stop, allot_budget, stopping_point
from .draw_spend import CriterionSpend, DrawSpend, fixed_cost
from .scores import ItemScore, Parser, parser_for, score_item, score_items

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DrawBounds",
    "DrawTally",
    "adaptive_criteria",
    "counted",
    "draw_bounds",
    "draws_frame",
    "item_stops",
    "next_round",
    "score_by_need",
    "whole_study",
]

ItemKey = tuple[str, str]  # (criterion, record id)


def adaptive_criteria(study: Study) -> tuple[PlannedCriterion, ...]:
    """The criteria whose draws are spent by need: rated ones of an adaptive study (a rubric's
    verdicts and a pair's order are asked the study's n)."""
    if not study.config.sampling.adaptive:
        return ()
    return tuple(c for c in study.criteria if not c.config.is_rubric)


def whole_study(study: Study) -> Study:
    """The adaptive criteria alone, every item of them read up to the study's n."""
    return replace(study, criteria=adaptive_criteria(study), pairwise=(), allotment=None)


def _ratings(answers: ItemAnswers, parser: Parser, study: Study) -> tuple[float | None, ...]:
    """An item's ratings in draw order, read as its score reads them."""
    sampling = study.config.sampling
    whole = replace(answers, missing=False, refused=False)
    return score_item(whole, parser, sampling.mode, sampling.n).ratings


@dataclass
class DrawTally:
    """Where the adaptive items stand, per criterion: settled (scored from the draws the rule
    chose), still drawing, the draws counted (``used``, settled items only) and the settled
    items stopped at first_draws (``at_first``)."""

    settled: Counter[str]
    drawing: Counter[str]
    used: Counter[str]
    at_first: Counter[str]  # settled at first_draws
    # The requests the items' counted draws took and their tokens (:mod:`.draw_spend`),
    # counted while the items are scored.
    spend: DrawSpend = field(default_factory=DrawSpend)

    @classmethod
    def of(cls, stops: dict[ItemKey, Stop], first: int) -> DrawTally:
        tally = cls(Counter(), Counter(), Counter(), Counter())
        for (criterion, _), stop in stops.items():
            if stop.settled:
                tally.settled[criterion] += 1
                tally.used[criterion] += stop.draws
                tally.at_first[criterion] += stop.draws <= first
            else:
                tally.drawing[criterion] += 1
        return tally


def item_stops(study: Study, answers: Iterable[ItemAnswers]) -> dict[ItemKey, Stop]:
    """Each adaptive item's draws and whether it is settled, from its stored ratings
    (``answers``: the items of :func:`whole_study`, in plan order; others are passed over)."""
    return _stops(study, _item_ratings(study, answers))


def _item_ratings(
    study: Study, answers: Iterable[ItemAnswers]
) -> dict[ItemKey, tuple[float | None, ...]]:
    parsers = {c.name: parser_for(c) for c in adaptive_criteria(study)}
    ratings: dict[ItemKey, tuple[float | None, ...]] = {}
    for item in answers:
        criterion = item.item.criterion.name
        parser = parsers.get(criterion)
        if parser is not None:
            ratings[(criterion, item.item.record.id)] = _ratings(item, parser, study)
    return ratings


def _stops(study: Study, ratings: dict[ItemKey, tuple[float | None, ...]]) -> dict[ItemKey, Stop]:
    sampling = study.config.sampling
    n, first = sampling.n, sampling.first_draws
    if sampling.draws is not None and study.config.shard is not None:
        raise ConfigError(
            f"{study.config.source}: [sampling] draws is a budget for the whole study, spent "
            "where its ratings disagree most: run it without --shard (target_se works with "
            "shards)"
        )
    if sampling.draws is None:
        target = sampling.target_se
        assert target is not None  # an adaptive study has a target or a budget
        return {key: stopping_point(r, n, first, target) for key, r in ratings.items()}
    spans = {c.name: _span(c) for c in adaptive_criteria(study)}
    keys = list(ratings)
    need = first * len(keys)
    if sampling.draws < need:
        raise ConfigError(
            f"{study.config.source}: [sampling] draws = {sampling.draws} cannot give each of "
            f"the {len(keys)} items its first_draws ({first}): set draws to at least {need}, "
            "or lower first_draws"
        )
    stops = allot_budget(
        [ratings[key] for key in keys], [spans[c] for c, _ in keys], n, first, sampling.draws
    )
    return dict(zip(keys, stops, strict=True))


def _span(criterion: PlannedCriterion) -> float:
    points = criterion.config.scale.points
    return (points[-1] - points[0]) or 1.0


def next_round(study: Study, cache: JudgeCache, *, opening: bool) -> tuple[Study, int]:
    """The study as the next round asks it, and how many of its items are still drawing.

    ``opening``: the round that starts a run holds every item of the plan (those the cache
    settles are counted, not asked; the other criteria's items are asked as always); a
    later round holds only the items still drawing, each asked the draws the rule gives it.
    """
    if not adaptive_criteria(study):
        return study, 0
    sampling = study.config.sampling
    stops = item_stops(study, StudyAnswers(whole_study(study), cache))
    drawing = {key: stop.draws for key, stop in stops.items() if not stop.settled}
    names = frozenset(c.name for c in adaptive_criteria(study))
    if opening:
        # A settled item is asked the draws it has, so the walk counts it answered.
        asked = {key: stop.draws for key, stop in stops.items()}
        allotment = Allotment(names, sampling.first_draws, asked)
    else:
        allotment = Allotment(names, sampling.first_draws, drawing, only=True)
    return replace(study, allotment=allotment), len(drawing)


def score_by_need(
    study: Study, answers: StudyAnswers, tally: list[DrawTally] | None = None
) -> Iterator[ItemScore]:
    """Every item's score (:func:`~.scores.score_items`); an adaptive item's from the draws
    its rule settled on, missing while it is still drawing. ``tally``: the adaptive items'
    :class:`DrawTally` is appended to it."""
    if not adaptive_criteria(study):
        return score_items(study, answers)
    stops = item_stops(study, answers)  # a first pass: a budget's rounds read every item
    items: Iterable[ItemAnswers] = answers
    if tally is not None:
        tally.append(DrawTally.of(stops, study.config.sampling.first_draws))
        items = tally[-1].spend.counting(study.config, answers, stops)
    return score_items(study, (counted(item, stops) for item in items))


def counted(answers: ItemAnswers, stops: dict[ItemKey, Stop]) -> ItemAnswers:
    """An item's answers cut to the draws its rule settled on (missing while it draws);
    an item the rule does not decide (another criterion's) as it is."""
    stop = stops.get((answers.item.criterion.name, answers.item.record.id))
    if stop is None:
        return answers
    if stop.settled and len(answers.choices) >= stop.draws:
        choices = answers.choices[: stop.draws]
        return replace(answers, choices=choices, missing=False, refused=False, left=Left.CACHED)
    if answers.refused:
        return replace(answers, left=Left.REFUSED)
    left = Left.IN_BATCH if answers.left is Left.IN_BATCH else Left.TO_SEND
    return replace(answers, missing=True, left=left)


@dataclass
class DrawBounds:
    """What is left of an adaptive study, at least and at most (``run --dry-run``).

    ``least``: the study as its next round asks it (every item still drawing stops there);
    ``most``: every item still drawing asked up to n (``most_asked`` draws; a budget caps
    them: ``most_draws`` is then the budget left). ``share``: how far, from the least to the
    most, the items settled so far went (None: none is settled yet), the estimate of where
    the rest will stop. ``most_rounds``: the requests past one an item that the items still
    drawing can take at worst on an endpoint that takes ``n``, where ``most`` asks each of
    them once: a round may add a single draw, so an item may need a round for every draw
    from its next round's to n (a budget: at most one a draw past the least).
    """

    least: Study
    most: Study
    least_draws: int
    most_draws: int
    most_asked: int
    settled: int
    drawing: int
    share: float | None
    most_rounds: int = 0


def draw_bounds(study: Study, cache: JudgeCache | None) -> DrawBounds:
    """The bounds of an adaptive study's spend from what ``cache`` holds (None: nothing)."""
    sampling = study.config.sampling
    n, first = sampling.n, sampling.first_draws
    names = frozenset(c.name for c in adaptive_criteria(study))
    ratings = {} if cache is None else _item_ratings(study, StudyAnswers(whole_study(study), cache))
    stops = _stops(study, ratings) if ratings else {}
    drawing = {key: stop for key, stop in stops.items() if not stop.settled}
    items = sum(study.items_by_criterion()[name] for name in names)
    fresh = items - len(stops)  # items the cache holds nothing of
    # An item may hold more draws than its next round asks (a budget raised: the rounds are
    # replayed, and the earlier budget's rounds gave it more): it asks none of them again.
    least_draws = fresh * first + sum(max(0, s.draws - len(ratings[k])) for k, s in drawing.items())
    most_asked = most_draws = fresh * n + sum(n - len(ratings[k]) for k in drawing)
    most_rounds = fresh * max(0, n - first) + sum(max(0, n - s.draws) for s in drawing.values())
    if sampling.draws is not None:
        most_draws = min(most_draws, max(0, sampling.draws - sum(map(len, ratings.values()))))
        most_rounds = min(most_rounds, max(0, most_draws - least_draws))
    settled = [stop.draws for stop in stops.values() if stop.settled]
    share = None
    if settled:
        share = (
            0.0 if n <= first else sum((k - first) / (n - first) for k in settled) / len(settled)
        )
    asked = {key: stop.draws for key, stop in stops.items()}
    least = replace(study, allotment=Allotment(names, first, asked))
    most = replace(study, allotment=Allotment(names, n, asked | dict.fromkeys(drawing, n)))
    return DrawBounds(
        least,
        most,
        least_draws,
        most_draws,
        most_asked,
        len(stops) - len(drawing),
        len(drawing) + fresh,
        share,
        most_rounds,
    )


DRAWS_COLUMNS = [
    "criterion",
    "items",
    "settled",
    "drawing",
    "draws",
    "fixed_draws",
    "draws_share",
    "at_first_draws",
    "requests",
    "fixed_requests",
    "prompt_tokens",
    "fixed_prompt_tokens",
    "completion_tokens",
    "fixed_completion_tokens",
    "cost",
    "fixed_cost",
    "saving",
    "cost_basis",
]


def draws_frame(study: Study, tally: DrawTally) -> pd.DataFrame:
    """Per adaptive criterion, the draws its items used against the fixed n, the share of
    settled items stopped at ``first_draws``, and the requests, tokens and cost against the
    fixed study's (:mod:`.draw_spend`), as ``stats/<prefix>_draws.csv`` holds it.

    ``draws`` counts the settled items' draws; ``fixed_draws`` is n for every item, so a study
    with items still drawing shows a share below what it will end at. ``requests`` and
    ``cost`` count what was paid, the draws of items still drawing included.
    """
    import pandas as pd  # a run reads ratings here without the tables' imports

    config = study.config
    n = config.sampling.n
    rows = []
    for criterion in adaptive_criteria(study):
        name = criterion.name
        settled, drawing = tally.settled[name], tally.drawing[name]
        items = settled + drawing
        used = tally.used[name]
        spend = tally.spend.criteria.get(name)
        costs = fixed_cost(config, spend or CriterionSpend(), items, tally.spend.per_request)
        rows.append(
            {
                "criterion": name,
                "items": items,
                "settled": settled,
                "drawing": drawing,
                "draws": used,
                "fixed_draws": n * items,
                "draws_share": used / (n * items) if items else None,
                "at_first_draws": tally.at_first[name] / settled if settled else None,
                "requests": costs.requests,
                "fixed_requests": costs.fixed_requests,
                "prompt_tokens": costs.prompt_tokens,
                "fixed_prompt_tokens": costs.fixed_prompt_tokens,
                "completion_tokens": costs.completion_tokens,
                "fixed_completion_tokens": costs.fixed_completion_tokens,
                "cost": costs.cost,
                "fixed_cost": costs.fixed_cost,
                "saving": costs.saving,
                "cost_basis": costs.basis,
            }
        )
    return pd.DataFrame(rows, columns=DRAWS_COLUMNS)
