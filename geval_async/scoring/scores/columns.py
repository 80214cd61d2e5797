"""A study's item scores held as numbers in columns, not as one object per item.

:func:`~.scores.score_items` yields an :class:`~.scores.ItemScore` per record and criterion;
a study of 250,000 records x 4 criteria would hold a million of them (about 2 kB each, with
their tuples of answers and their distribution). :class:`ScoreColumns` keeps, per item, a few
codes and numbers (the record's position, the criterion, the status, the standard error, the
distribution's code) and, per answer, the codes of its text, rating, reason and reasoning
field, each column packed as narrowly as its values allow (:mod:`.packed`: one byte a code, no
storage at all for a column that keeps its default, such as the standard error with one draw):
about 12 bytes an item and 3 an answer. What repeats is stored once and coded: each distinct
distribution, answer text, rating and server model name (a study's "4" and ``{4: 1.0}`` recur
a million times). Rubric criteria's combined items (whose parts are item scores themselves)
are few and stay objects. A panel's pooled items (:class:`~.scores.PanelItemScore`) add their
own columns (:class:`~.panel_columns.PanelColumns`: the pooled score, every judge's samples,
who scored).

It is a ``Sequence[ItemScore]``: ``columns[i]`` and iteration rebuild each item as it was
scored (equal to it), one at a time, so the raw exports and the HTML report read it as
before while the tables (:func:`~.tables.long_frame`, the group tables a criterion at a time)
and the invalid-sample counts (:func:`~.readings.share_counts`) are made from the columns
directly. Pure and sync: numpy only.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np
import orjson

from ...options import Reason, ScoreStatus
from ...study.plan import Study
from ..reading.distributions import RatingDistribution
from .packed import Coded, PackedColumn, objects
from .scores import CriterionTally, ItemScore, PanelItemScore, count_item
from .shares import ShareCounts

__all__ = ["PanelColumns", "ScoreColumns", "collect_scores"]

STATUSES = list(ScoreStatus)
REASONS = list(Reason)
_STATUS_CODES = {s: i for i, s in enumerate(STATUSES)}
_REASON_CODES = {r: i for i, r in enumerate(REASONS)}
# The columns of one number per item or answer (and the four counts per item).
_COLUMNS: tuple[str, ...] = ("record", "criterion", "status", "distribution", "se", "rubric")
_COLUMNS += ("served_code", "text", "rating", "reason", "reasoning")


def _distribution_key(d: RatingDistribution) -> Hashable:
    # Types kept apart: a rating 3 and a rating 3.0 are written differently.
    probs = tuple((type(v), v, p) for v, p in d.probs.items())
    return (probs, d.valid, d.invalid, d.valid_mass, d.reason)


def _rating_key(value: object) -> Hashable:
    return (type(value), value)


class ScoreColumns(Sequence[ItemScore]):
    """Every item score of a study, in plan order, as columns (see the module docstring).

    Built by :func:`collect_scores`; read like the list of :class:`ItemScore` it replaces.
    A panel's pooled items (:class:`~.scores.PanelItemScore`) add :attr:`panel`'s columns.
    """

    def __init__(self, record_ids: list[str], groups: list[Any], conditions: list[Any]) -> None:
        # The records the items name, by code (a study's own, in file order, then any other).
        self.record_ids, self.record_groups, self.record_conditions = (
            record_ids,
            groups,
            conditions,
        )
        self.criteria: Coded[str] = Coded()
        self.rubrics: Coded[str] = Coded()
        self.distributions: Coded[RatingDistribution] = Coded()
        self.texts: Coded[str] = Coded()
        self.ratings: Coded[float] = Coded()
        self.served: Coded[tuple[str, ...]] = Coded()
        self.tallies: dict[str, CriterionTally] = {}
        # Per item (each column as narrow as its values: .packed).
        self.record = PackedColumn(0)
        self.criterion = PackedColumn(0)
        self.status = PackedColumn(0)
        self.distribution = PackedColumn(-1)  # -1: none
        self.se = PackedColumn(np.nan, "d")  # NaN: none
        self.rubric = PackedColumn(-1)  # -1: none
        self.served_code = PackedColumn(0)
        # Per item, how many answers, ratings, reasons and reasoning fields it has (equal but
        # for a logprobs item without choices, which has one reason and no answer).
        self.counts = tuple(PackedColumn(0) for _ in range(4))
        # Per answer, in item order.
        self.text = PackedColumn(0)
        self.rating = PackedColumn(-1)  # -1: invalid
        self.reason = PackedColumn(-1)  # -1: valid
        self.reasoning = PackedColumn(-1)  # -1: none (into texts)
        self.held: dict[int, ItemScore] = {}  # rubric criteria's combined items
        self.panel: PanelColumns | None = None  # a panel's pooled items
        # The answers' invalid shares when they are not those of the answers held here (a
        # panel's: its judges'); else counted from the codes when first asked for.
        self.shares: ShareCounts | None = None
        self._offsets: tuple[np.ndarray, ...] | None = None
        self._read: dict[str, Sequence[Any]] | None = None
        # The records' codes in the order the items first name them, and which they have.
        self._first_named = array("i")
        self._named = bytearray(len(record_ids))

    # --- building -------------------------------------------------------------------------

    def append(self, score: ItemScore, record: int) -> None:
        """Add one item score (``record``: its record's code)."""
        index = len(self.record)
        self._read = None
        if isinstance(score, PanelItemScore):
            if self.panel is None:
                if index:
                    raise ValueError("a panel's pooled item among one judge's item scores")
                self.panel = PanelColumns()
            self.panel.append(score)
        elif self.panel is not None:
            raise ValueError("one judge's item score among a panel's pooled items")
        count_item(self.tallies, score)
        self.record.append(record)
        if record >= len(self._named):
            self._named.extend(bytes(record + 1 - len(self._named)))
        if not self._named[record]:
            self._named[record] = 1
            self._first_named.append(record)
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
        read = self._readers()
        criteria, records = read["criterion"], read["record"]
        counts = [read[f"count{k}"] for k in range(4)]
        starts = [0, 0, 0, 0]
        for i in range(len(self)):
            if wanted is None or criteria[i] == wanted:
                yield self._item(i, tuple(starts)), records[i]
            for k, column in enumerate(counts):
                starts[k] += column[i]

    def _starts(self, index: int) -> tuple[int, ...]:
        if self._offsets is None:
            self._offsets = tuple(
                np.concatenate([[0], np.cumsum(c.numbers(), dtype=np.int64)]) for c in self.counts
            )
        return tuple(int(o[index]) for o in self._offsets)

    def _readers(self) -> dict[str, Sequence[Any]]:
        """Each column's fastest reader by index (made again after an item is added)."""
        if self._read is None:
            read: dict[str, Sequence[Any]] = {n: getattr(self, n).reader() for n in _COLUMNS}
            for k, counts in enumerate(self.counts):
                read[f"count{k}"] = counts.reader()
            if self.panel is not None:
                for name in ("pooled", "valid", "invalid", "scored", "missing"):
                    read[f"panel_{name}"] = getattr(self.panel, name).reader()
            self._read = read
        return self._read

    def _item(self, i: int, starts: tuple[int, ...]) -> ItemScore:
        held = self.held.get(i)
        if held is not None:
            return held
        read = self._readers()
        a, r, why, thought = starts
        texts, ratings = self.texts.values, self.ratings.values
        n = [read[f"count{k}"][i] for k in range(4)]
        d, se, rubric = read["distribution"][i], read["se"][i], read["rubric"][i]
        code = read["record"][i]
        fields: dict[str, Any] = dict(
            record_id=self.record_ids[code],
            group=self.record_groups[code],
            condition=self.record_conditions[code],
            criterion=self.criteria.values[read["criterion"][i]],
            status=STATUSES[read["status"][i]],
            distribution=None if d < 0 else self.distributions.values[d],
            answers=tuple([texts[t] for t in read["text"][a : a + n[0]]]),
            ratings=tuple([None if c < 0 else ratings[c] for c in read["rating"][r : r + n[1]]]),
            reasons=tuple(
                [None if c < 0 else REASONS[c] for c in read["reason"][why : why + n[2]]]
            ),
            reasonings=tuple(
                [None if c < 0 else texts[c] for c in read["reasoning"][thought : thought + n[3]]]
            ),
            rubric=None if rubric < 0 else self.rubrics.values[rubric],
            se=None if se != se else se,
            served=self.served.values[read["served_code"][i]],
        )
        if self.panel is None:
            return ItemScore(**fields)
        pooled, judges = read["panel_pooled"][i], self.panel.judges.values
        return PanelItemScore(
            **fields,
            pooled=None if pooled != pooled else pooled,
            judges_scored=judges[read["panel_scored"][i]],
            judges_missing=judges[read["panel_missing"][i]],
            member_valid=read["panel_valid"][i],
            member_invalid=read["panel_invalid"][i],
        )

    # --- columns for the tables -----------------------------------------------------------

    def criterion_column(self, rows: slice | np.ndarray = slice(None)) -> np.ndarray:
        """Per item (of ``rows``), its criterion's name."""
        return objects(self.criteria.values)[self.criterion.numbers()[rows]]

    def records_present(self) -> np.ndarray:
        """The codes of the records the items name, each once, in the order they first do."""
        return np.array(self._first_named, dtype=np.int32)

    def score_column(self, rows: slice | np.ndarray = slice(None)) -> np.ndarray:
        """Per item (of ``rows``), its score (NaN: none): the weighted score, a rubric item's
        combined one, a panel's pooled score."""
        if self.panel is not None:
            return self.panel.pooled.numbers()[rows].astype(np.float64)
        scores = self.weighted_scores()[self.distribution.numbers()[rows]]
        if self.held:  # rubric criteria's combined items, where they are among the rows
            positions = np.arange(len(self))[rows]
            at = np.searchsorted(positions, list(self.held))
            for k, (i, held) in zip(at, self.held.items(), strict=True):
                if k < len(positions) and positions[k] == i:
                    value = held.weighted_score
                    scores[k] = np.nan if value is None else value
        return scores

    def draw_matrix(
        self, criterion: str, draws: int, *, scored: bool = False
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The items of ``criterion`` with ratings (``scored``: only those scored) x their first
        ``draws`` ratings, NaN where invalid or absent, and their weighted scores; None when
        the criterion's items are rubric combinations (held as objects: read them instead)."""
        code = self.criteria.codes.get(criterion)
        crit = self.criterion.numbers()
        if code is None:
            return np.empty((0, draws)), np.empty(0)
        if any(self.criterion[i] == code for i in self.held):
            return None
        counts = self.counts[1].numbers().astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        keep = (crit == code) & (counts > 0)
        if scored:
            keep &= self.status.numbers() == _STATUS_CODES[ScoreStatus.SCORED]
        items = np.flatnonzero(keep)
        values = np.array(
            [np.nan if r is None else float(r) for r in self.ratings.values] + [np.nan]
        )[self.rating.numbers()]
        matrix = np.full((len(items), draws), np.nan)
        for k in range(draws):
            has = counts[items] > k
            matrix[has, k] = values[starts[items][has] + k]
        codes = self.distribution.numbers()[items]
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
        first = self.counts[0].numbers()
        return all(np.array_equal(first, c.numbers()) for c in self.counts)


def collect_scores(study: Study, scores: Iterable[ItemScore]) -> ScoreColumns:
    """Hold ``scores`` (as :func:`~.scores.score_items` yields them) in columns."""
    records = study.records
    # Each a new list, made from the index when asked for: ours to extend (no copy).
    ids, groups, conditions = records.ids, records.groups, records.conditions
    columns = ScoreColumns(ids, groups, conditions)
    # Items come in the plan's order: each names the record of the one before or the next
    # (the first again at a criterion's start), so a map of every id (about 70 bytes a record)
    # is made only for an item that does not.
    positions: dict[str, int] | None = None
    last = -1
    for score in scores:
        named = (score.record_id, score.group, score.condition)
        for code in (last, last + 1, 0):
            if 0 <= code < len(ids) and (ids[code], groups[code], conditions[code]) == named:
                break
        else:
            if positions is None:
                positions = {record_id: i for i, record_id in enumerate(ids)}
            code = positions.get(score.record_id, -1)
            if code < 0 or (ids[code], groups[code], conditions[code]) != named:
                # Not one of the study's records as the index has it: a record of its own.
                code = positions[score.record_id] = len(ids)
                ids.append(score.record_id)
                groups.append(score.group)
                conditions.append(score.condition)
        columns.append(score, code)
        last = code
    return columns


class PanelColumns:
    """A panel's own numbers per pooled item (:class:`~.scores.PanelItemScore`): the pooled
    score, every judge's valid and invalid samples, and the judges that scored it and those
    left out (codes of name tuples), the long table's ``judges_scored`` and ``judges_missing``.
    """

    def __init__(self) -> None:
        self.judges: Coded[tuple[str, ...]] = Coded()
        self.pooled = PackedColumn(np.nan, "d")  # NaN: none
        self.valid = PackedColumn(0)
        self.invalid = PackedColumn(0)
        self.scored = PackedColumn(0)
        self.missing = PackedColumn(0)

    def append(self, score: PanelItemScore) -> None:
        self.pooled.append(np.nan if score.pooled is None else score.pooled)
        self.valid.append(score.member_valid)
        self.invalid.append(score.member_invalid)
        self.scored.append(self.judges.code(score.judges_scored))
        self.missing.append(self.judges.code(score.judges_missing))

    def judges_scored(self) -> np.ndarray:
        """Per item, how many judges scored it."""
        counts = np.array([len(names) for names in self.judges.values], dtype=np.int64)
        return counts[self.scored.numbers()]

    def judges_missing(self) -> np.ndarray:
        """Per item, the judges left out, comma-separated ("" for none)."""
        return objects([",".join(names) for names in self.judges.values])[self.missing.numbers()]
