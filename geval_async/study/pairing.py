"""Pairwise criteria: which texts a judge compares, in which order, under which names.

A criterion of ``kind = "pairwise"`` compares, within each group, the texts of two conditions
(each user's two questionnaires; two systems' summaries of one document). Its prompt receives
the fields the two records share once, under their own names (``fields``, e.g. the document),
and each compared field twice (``compare``): ``{{<field>_a}}`` is the text shown first and
``{{<field>_b}}`` the text shown second. With more than two conditions every pair of them is
compared, or the pairs ``pairs`` names.

Both orders are asked by default (``orders = "both"``): each pair is two requests, the text of
either condition shown first once, each with its own cache key, so the judge's preference for
the first position can be told apart from its preference for a condition. ``orders =
"random"`` asks one order per pair, drawn from ``seed`` and the pair alone (the same order on
every run, whatever else the study holds).

A pair asked in one order is an item like any other of the plan: its record is a
:class:`PairRecord`, made from the two records, whose fields are what the template inserts.
The judge stage sends it as it sends a rating; the scoring stage reads its verdict.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from ..errors import ConfigError
from ..options import PairOrders
from .record_index import Record
from .records import Records

__all__ = [
    "FIRST",
    "SECOND",
    "PairRecord",
    "PairSlot",
    "Pairing",
    "check_shared",
    "pair_records",
    "pair_slots",
    "parse_pairing",
]

# The suffixes of a compared field's two placeholders: shown first, shown second.
FIRST = "_a"
SECOND = "_b"
PAIRING_KEYS = ("compare", "pairs", "orders", "seed")


@dataclass(frozen=True)
class Pairing:
    """What a pairwise criterion compares and how it asks.

    Attributes:
        shared: record fields the two texts share, inserted once under their own names.
        compare: record fields compared, inserted as ``<field>_a`` (shown first) and
            ``<field>_b`` (shown second).
        pairs: the pairs of conditions compared, as named (empty: every pair of the
            conditions present).
        orders: both orders of each pair, or one drawn at random.
        seed: what the random order is drawn from.
    """

    shared: tuple[str, ...]
    compare: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...] = ()
    orders: PairOrders = PairOrders.BOTH
    seed: int = 0

    @property
    def placeholders(self) -> dict[str, str]:
        """Placeholder -> the pair record's field that fills it."""
        names = {name: name for name in self.shared}
        for name in self.compare:
            names[name + FIRST] = name + FIRST
            names[name + SECOND] = name + SECOND
        return names

    @property
    def record_fields(self) -> tuple[str, ...]:
        """The fields every record compared must have."""
        return (*self.shared, *self.compare)

    def conditions_compared(self, present: Sequence[str]) -> list[tuple[str, str]]:
        """The pairs compared, given the conditions ``present`` (in the order they first
        appear, the configured ones first): the named pairs, else every pair."""
        if self.pairs:
            return list(self.pairs)
        return list(combinations(present, 2))

    def first_shown(self, group: str, a: str, b: str) -> tuple[str, ...]:
        """The conditions shown first, one request each: ``(a, b)`` for both orders, else
        the one drawn for this pair."""
        if self.orders == PairOrders.BOTH:
            return (a, b)
        digest = hashlib.sha256(f"{self.seed}\x00{group}\x00{a}\x00{b}".encode()).digest()
        return (a,) if digest[0] & 1 else (b,)


def parse_pairing(t: Any, shared: dict[str, str]) -> Pairing:
    """A pairwise criterion's ``compare``, ``pairs``, ``orders`` and ``seed`` (``t`` a
    :class:`~.reader.TableReader` of its table; ``shared`` its ``fields``)."""
    compare = t.get("compare", list)
    if not compare or not all(isinstance(f, str) and f for f in compare):
        raise t.error(
            "kind = 'pairwise' needs 'compare' = [...], the record fields whose two texts "
            'are compared (e.g. compare = ["summary"]: the prompt inserts {{summary_a}} and '
            "{{summary_b}})"
        )
    if any(placeholder != source for placeholder, source in shared.items()):
        raise t.error("a pairwise criterion's 'fields' is a list of shared record fields")
    both = sorted(set(compare) & set(shared))
    if both:
        raise t.error(
            f"field {both[0]!r} is both shared ('fields') and compared ('compare'): a field "
            "is inserted once or twice, not both"
        )
    pairs = []
    for pair in t.get("pairs", list, []):
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(c, str) for c in pair)
            or pair[0] == pair[1]
        ):
            raise t.error(
                "'pairs' must list pairs of two different conditions, e.g. "
                f'pairs = [["A", "B"], ["A", "C"]], not {pair!r}'
            )
        pairs.append((pair[0], pair[1]))
    unordered = [frozenset(p) for p in pairs]
    if len(set(unordered)) != len(unordered):
        raise t.error("'pairs' names a pair of conditions twice (in either order)")
    return Pairing(
        shared=tuple(shared),
        compare=tuple(compare),
        pairs=tuple(pairs),
        orders=t.choice("orders", PairOrders, PairOrders.BOTH),
        seed=t.get("seed", int, 0),
    )


@dataclass(frozen=True, slots=True)
class PairRecord(Record):
    """Two records of one group in one order, as the judge sees them: ``fields`` holds the
    shared fields and each compared field twice (``<field>_a`` from the record of ``first``).

    ``a`` and ``b`` name the pair as the config orders it, whichever is shown first.
    """

    a: str = ""
    b: str = ""
    first: str = ""

    @property
    def second(self) -> str:
        """The condition shown second."""
        return self.b if self.first == self.a else self.a


@dataclass(frozen=True, slots=True)
class PairSlot:
    """One request's pair, before its texts are read: the group, the pair and which is
    shown first, with the two records' places in the records file."""

    group: str
    a: str
    b: str
    first: str
    first_at: int
    second_at: int

    @property
    def second(self) -> str:
        return self.b if self.first == self.a else self.a


def pair_slots(
    records: Records, pairing: Pairing, named: Sequence[str], where: str
) -> list[PairSlot]:
    """Every request of a pairwise criterion, group by group (in the order groups first
    appear), pair by pair, from the records' index alone (no text is read).

    Args:
        records: the study's records in the plan.
        pairing: the criterion's pairing.
        named: conditions to put first in the default order (``[stats] conditions``).
        where: what to name in an error (the criterion and its config).

    Raises:
        ConfigError: a group holds two records of one condition, or a named pair names a
            condition no record has.
    """
    at: dict[str, dict[str, int]] = {}
    seen: list[str] = []
    for position, (group, condition) in enumerate(
        zip(records.groups, records.conditions, strict=True)
    ):
        if group is None or condition is None:
            continue
        if condition not in seen:
            seen.append(condition)
        places = at.setdefault(group, {})
        if condition in places:
            raise ConfigError(
                f"{records.path}: group {group!r} has two records of condition {condition!r} "
                f"({where} compares one text of each condition per group): give each its own "
                "group, or keep one"
            )
        places[condition] = position
    present = [c for c in named if c in seen] + [c for c in seen if c not in named]
    for pair in pairing.pairs:
        for condition in pair:
            if condition not in seen:
                shown = ", ".join(seen[:5]) or "nothing"
                raise ConfigError(
                    f"{where}: 'pairs' names condition {condition!r}, which no record of "
                    f"{records.path} has (its conditions: {shown})"
                )
    slots = []
    compared = pairing.conditions_compared(present)
    for group, places in at.items():
        for a, b in compared:
            if a not in places or b not in places:
                continue  # a group without both texts has no pair
            for first in pairing.first_shown(group, a, b):
                second = b if first == a else a
                slots.append(PairSlot(group, a, b, first, places[first], places[second]))
    return slots


def check_shared(records: Records, slots: Iterable[PairSlot], pairing: Pairing, where: str) -> None:
    """Every shared field holds the same value in both records of each pair compared.

    A shared field is shown once, from the record shown first: where the two records differ
    in it, each order would show the judge a different document, and the verdicts would
    compare something other than the compared texts.

    Raises:
        ConfigError: naming the two records and the field that differs.
    """
    if not pairing.shared:
        return
    checked: set[tuple[int, int]] = set()
    with records.reader() as reader:
        for slot in slots:
            places = (min(slot.first_at, slot.second_at), max(slot.first_at, slot.second_at))
            if places in checked:
                continue  # the pair's other order: the same two records
            checked.add(places)
            one, other = reader[places[0]], reader[places[1]]
            for name in pairing.shared:
                if one.fields[name] != other.fields[name]:
                    raise ConfigError(
                        f"{records.path}: records {one.id!r} ({one.where}) and {other.id!r} "
                        f"({other.where}) of group {slot.group!r} differ in field {name!r}, "
                        f"which {where} shows once as shared ('fields'): make it the same in "
                        "both, or compare it (list it in 'compare')"
                    )


def pair_records(
    records: Records, slots: Iterable[PairSlot], pairing: Pairing
) -> Iterable[PairRecord]:
    """The pair record of each slot, its two records read from the file as needed."""
    with records.reader() as reader:
        for slot in slots:
            first, second = reader[slot.first_at], reader[slot.second_at]
            fields: dict[str, Any] = {name: first.fields[name] for name in pairing.shared}
            for name in pairing.compare:
                fields[name + FIRST] = first.fields[name]
                fields[name + SECOND] = second.fields[name]
            yield PairRecord(
                id=f"{slot.group}: {slot.first} | {slot.second}",
                group=slot.group,
                condition=slot.first,
                fields=fields,
                where=f"{first.where} and {second.where}",
                a=slot.a,
                b=slot.b,
                first=slot.first,
            )
