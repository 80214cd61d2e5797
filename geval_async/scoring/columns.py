"""A study's item scores held as numbers in columns, not as one object per item.

:func:`~.scores.score_items` yields an :class:`~.scores.ItemScore` per record and criterion;
a study of 250,000 records x 4 criteria would hold a million of them (about 2 kB each, with
their tuples of answers and their distribution). :class:`ScoreColumns` keeps, per item, a few
codes and numbers in arrays (the record's position, the criterion, the status, the standard
error, the distribution's code) and, per answer, the codes of its text, rating, reason and
reasoning field. What repeats is stored once and coded: each distinct distribution, answer
text, rating and server model name (a study's "4" and ``{4: 1.0}`` recur a million times).
Rubric criteria's combined items (whose parts are item scores themselves) are few and stay
objects.

It is a ``Sequence[ItemScore]``: ``columns[i]`` and iteration rebuild each item as it was
scored (equal to it), one at a time, so the raw exports and the HTML report read it as
before while the tables (:func:`~.tables.long_frame`) and the invalid-sample counts are made
from the columns directly. Pure and sync: numpy only.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

import numpy as np
import orjson

from ..options import Reason, ScoreStatus
from ..study.plan import Study
from .distributions import RatingDistribution
from .scores import CriterionTally, ItemScore, count_item

__all__ = ["ScoreColumns", "collect_scores"]

T = TypeVar("T")
STATUSES = list(ScoreStatus)
REASONS = list(Reason)
_STATUS_CODES = {s: i for i, s in enumerate(STATUSES)}
_REASON_CODES = {r: i for i, r in enumerate(REASONS)}


class _Coded(Generic[T]):
    """Distinct values, each stored once, by code (0, 1, ...)."""

    __slots__ = ("codes", "values")

    def __init__(self) -> None:
        self.codes: dict[Hashable, int] = {}
        self.values: list[T] = []

    def code(self, value: T, key: Hashable = None) -> int:
        key = value if key is None else key
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.values)
            self.values.append(value)
        return code


def _distribution_key(d: RatingDistribution) -> Hashable:
    # Types kept apart: a rating 3 and a rating 3.0 are written differently.
    probs = tuple((type(v), v, p) for v, p in d.probs.items())
    return (probs, d.valid, d.invalid, d.valid_mass, d.reason)


def _rating_key(value: object) -> Hashable:
    return (type(value), value)


class ScoreColumns(Sequence[ItemScore]):
    """Every item score of a study, in plan order, as columns (see the module docstring).

    Built by :func:`collect_scores`; read like the list of :class:`ItemScore` it replaces.
    """

    def __init__(self, record_ids: list[str], groups: list[Any], conditions: list[Any]) -> None:
        # The records the items name, by code (a study's own, in file order, then any other).
        self.record_ids, self.record_groups, self.record_conditions = (
            record_ids,
            groups,
            conditions,
        )
        self.criteria: _Coded[str] = _Coded()
        self.rubrics: _Coded[str] = _Coded()
        self.distributions: _Coded[RatingDistribution] = _Coded()
        self.texts: _Coded[str] = _Coded()
        self.ratings: _Coded[float] = _Coded()
        self.served: _Coded[tuple[str, ...]] = _Coded()
        self.tallies: dict[str, CriterionTally] = {}
        # Per item.
        self.record = array("i")
        self.criterion = array("h")
        self.status = array("b")
        self.distribution = array("i")  # -1: none
        self.se = array("d")  # NaN: none
        self.rubric = array("h")  # -1: none
        self.served_code = array("i")
        # Per item, how many answers, ratings, reasons and reasoning fields it has (equal but
        # for a logprobs item without choices, which has one reason and no answer).
        self.counts = tuple(array("H") for _ in range(4))
        # Per answer, in item order.
        self.text = array("i")
        self.rating = array("i")  # -1: invalid
        self.reason = array("b")  # -1: valid
        self.reasoning = array("i")  # -1: none (into texts)
        self.held: dict[int, ItemScore] = {}  # rubric criteria's combined items
        self._offsets: tuple[np.ndarray, ...] | None = None

    # --- building -------------------------------------------------------------------------

    def append(self, score: ItemScore, record: int) -> None:
        """Add one item score (``record``: its record's code)."""
        index = len(self.record)
        count_item(self.tallies, score)
        self.record.append(record)
        self.criterion.append(self.criteria.code(score.criterion))
        self.status.append(_STATUS_CODES[score.status])
        self.served_code.append(self.served.code(score.served))
        if score.parts or score.outcome is not None:
            self.held[index] = score
            self.distribution.append(-1)
            self.se.append(np.nan)
            self.rubric.append(-1)
            for counts in self.counts:
                counts.append(0)
            return
        d = score.distribution
        code = -1 if d is None else self.distributions.code(d, _distribution_key(d))
        self.distribution.append(code)
        self.se.append(np.nan if score.se is None else score.se)
        self.rubric.append(-1 if score.rubric is None else self.rubrics.code(score.rubric))
        answers, ratings, reasons, reasonings = (
            score.answers,
            score.ratings,
            score.reasons,
            score.reasonings,
        )
        sequences = (answers, ratings, reasons, reasonings)
        for counts, values in zip(self.counts, sequences, strict=True):
            counts.append(len(values))
        texts, coded = self.texts, self.ratings
        self.text.extend([texts.code(a) for a in answers])
        self.rating.extend([-1 if r is None else coded.code(r, _rating_key(r)) for r in ratings])
        self.reason.extend([-1 if r is None else _REASON_CODES[r] for r in reasons])
        self.reasoning.extend([-1 if r is None else texts.code(r) for r in reasonings])

    # --- the sequence ---------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.record)

    @overload
    def __getitem__(self, index: int) -> ItemScore: ...

    @overload
    def __getitem__(self, index: slice) -> list[ItemScore]: ...

    def __getitem__(self, index: int | slice) -> ItemScore | list[ItemScore]:
        if isinstance(index, slice):
            return [self._item(i, self._starts(i)) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("item index out of range")
        return self._item(index, self._starts(index))

    def __iter__(self) -> Iterator[ItemScore]:
        return self.items()

    def items(self, criterion: str | None = None) -> Iterator[ItemScore]:
        """The item scores in plan order, rebuilt one at a time (``criterion``'s only)."""
        return (score for score, _ in self.with_records(criterion))

    def with_records(self, criterion: str | None = None) -> Iterator[tuple[ItemScore, int]]:
        """As :meth:`items`, each with its record's code: its position in the study's records
        when it is one of them (see :func:`collect_scores`)."""
        wanted = None if criterion is None else self.criteria.codes.get(criterion, -2)
        starts = [0, 0, 0, 0]
        for i in range(len(self)):
            if wanted is None or self.criterion[i] == wanted:
                yield self._item(i, tuple(starts)), self.record[i]
            for k, counts in enumerate(self.counts):
                starts[k] += counts[i]

    def _starts(self, index: int) -> tuple[int, ...]:
        if self._offsets is None:
            self._offsets = tuple(
                np.concatenate([[0], np.cumsum(np.frombuffer(c, dtype=np.uint16), dtype=np.int64)])
                for c in self.counts
            )
        return tuple(int(o[index]) for o in self._offsets)

    def _item(self, i: int, starts: tuple[int, ...]) -> ItemScore:
        held = self.held.get(i)
        if held is not None:
            return held
        a, r, why, thought = starts
        texts, ratings = self.texts.values, self.ratings.values
        n = [c[i] for c in self.counts]
        d, se, rubric = self.distribution[i], self.se[i], self.rubric[i]
        code = self.record[i]
        return ItemScore(
            record_id=self.record_ids[code],
            group=self.record_groups[code],
            condition=self.record_conditions[code],
            criterion=self.criteria.values[self.criterion[i]],
            status=STATUSES[self.status[i]],
            distribution=None if d < 0 else self.distributions.values[d],
            answers=tuple([texts[t] for t in self.text[a : a + n[0]]]),
            ratings=tuple([None if c < 0 else ratings[c] for c in self.rating[r : r + n[1]]]),
            reasons=tuple([None if c < 0 else REASONS[c] for c in self.reason[why : why + n[2]]]),
            reasonings=tuple(
                [None if c < 0 else texts[c] for c in self.reasoning[thought : thought + n[3]]]
            ),
            rubric=None if rubric < 0 else self.rubrics.values[rubric],
            se=None if se != se else se,
            served=self.served.values[self.served_code[i]],
        )

    # --- columns for the tables -----------------------------------------------------------

    def record_column(self, values: list[Any]) -> np.ndarray:
        """Per item, its record's entry of ``values`` (ids, groups or conditions)."""
        table = np.empty(len(values), dtype=object)
        table[:] = values
        return table[np.frombuffer(self.record, dtype=np.int32)]

    def criterion_column(self) -> np.ndarray:
        """Per item, its criterion's name."""
        table = np.empty(len(self.criteria.values), dtype=object)
        table[:] = self.criteria.values
        return table[np.frombuffer(self.criterion, dtype=np.int16)]

    def draw_matrix(
        self, criterion: str, draws: int, *, scored: bool = False
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The items of ``criterion`` with ratings (``scored``: only those scored) x their first
        ``draws`` ratings, NaN where invalid or absent, and their weighted scores; None when
        the criterion's items are rubric combinations (held as objects: read them instead)."""
        code = self.criteria.codes.get(criterion)
        crit = np.frombuffer(self.criterion, dtype=np.int16)
        if code is None:
            return np.empty((0, draws)), np.empty(0)
        if any(self.criterion[i] == code for i in self.held):
            return None
        counts = np.frombuffer(self.counts[1], dtype=np.uint16).astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        keep = (crit == code) & (counts > 0)
        if scored:
            keep &= np.frombuffer(self.status, dtype=np.int8) == _STATUS_CODES[ScoreStatus.SCORED]
        items = np.flatnonzero(keep)
        values = np.array(
            [np.nan if r is None else float(r) for r in self.ratings.values] + [np.nan]
        )[np.frombuffer(self.rating, dtype=np.int32)]
        matrix = np.full((len(items), draws), np.nan)
        for k in range(draws):
            has = counts[items] > k
            matrix[has, k] = values[starts[items][has] + k]
        codes = np.frombuffer(self.distribution, dtype=np.int32)[items]
        return matrix, self.weighted_scores()[codes]

    def distribution_texts(self) -> list[str]:
        """Each distinct distribution as the long table shows it (compact JSON of its probs)."""
        return [orjson.dumps(d.to_json()["probs"]).decode() for d in self.distributions.values]

    def weighted_scores(self) -> np.ndarray:
        """Each distinct distribution's weighted score (NaN: none), then a NaN for code -1."""
        found = [d.weighted_score for d in self.distributions.values]
        return np.array([np.nan if w is None else w for w in found] + [np.nan])

    @property
    def simple(self) -> bool:
        """Whether every item has as many ratings, reasons and reasoning fields as answers and
        none is a rubric criterion's combined item (then every answer is one row as it is)."""
        if self.held:
            return False
        first = np.frombuffer(self.counts[0], dtype=np.uint16)
        return all(np.array_equal(first, np.frombuffer(c, dtype=np.uint16)) for c in self.counts)


def collect_scores(study: Study, scores: Iterable[ItemScore]) -> ScoreColumns:
    """Hold ``scores`` (as :func:`~.scores.score_items` yields them) in columns."""
    records = study.records
    ids, groups, conditions = list(records.ids), list(records.groups), list(records.conditions)
    positions = {record_id: i for i, record_id in enumerate(ids)}
    columns = ScoreColumns(ids, groups, conditions)
    for score in scores:
        code = positions.get(score.record_id)
        if code is None or groups[code] != score.group or conditions[code] != score.condition:
            # Not one of the study's records as the index has it: a record of its own.
            code = positions[score.record_id] = len(ids)
            ids.append(score.record_id)
            groups.append(score.group)
            conditions.append(score.condition)
        columns.append(score, code)
    return columns


def as_columns(study: Study, scores: Sequence[ItemScore]) -> ScoreColumns:
    """``scores`` as columns (as they are when they already are)."""
    return scores if isinstance(scores, ScoreColumns) else collect_scores(study, scores)
