"""How many draws each item of a round asks for, when draws are spent by need.

A study with ``[sampling] target_se`` or ``draws`` asks each item of its rated criteria for
``first_draws`` samples, then more in rounds (the rule that decides how many is
:mod:`geval_async.scoring.stats.adaptive`, read from the ratings the cache holds). A round is
the plan with an :class:`Allotment`: the draws each item is asked for. The draws asked are
always an item's first k samples in draw order, keyed as the fixed study keys them, so an
adaptive study is a prefix of the fixed one: raising the target or asking the full n later
pays only for the draws not yet drawn.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Allotment"]


@dataclass(frozen=True)
class Allotment:
    """The draws a round asks of each item of the adaptive ``criteria``.

    ``draws`` maps ``(criterion, record id)`` to the draws the item is asked for; an item of
    those criteria that it does not name is asked ``first`` (a round that opens the study),
    or is not part of the round at all when ``only`` is set (a later round asks only the
    items still drawing, and none of the other criteria's). Items of other criteria (rubrics,
    pairwise) are asked the study's n, in the opening round.
    """

    criteria: frozenset[str]
    first: int
    draws: Mapping[tuple[str, str], int] = field(default_factory=dict)
    only: bool = False

    def of(self, criterion: str, record_id: str, n: int) -> int | None:
        """The draws an item is asked for (``n``: the study's); None: not in this round."""
        if criterion not in self.criteria:
            return None if self.only else n
        asked = self.draws.get((criterion, record_id))
        if asked is not None:
            return asked
        return None if self.only else self.first

    def items_by_criterion(self) -> Counter[str]:
        """How many items of each criterion a later round (``only``) asks."""
        return Counter(criterion for criterion, _ in self.draws)
