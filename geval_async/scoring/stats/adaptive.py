"""How many draws an item needs: the stopping rule and the budget's allotment.

G-Eval's score of an item is the mean of its sampled ratings; its standard error (the one
``scores/*_long.csv`` reports) says how far the mean may be from what more draws would give.
An item whose first ratings agree has a small standard error at once; one split between 2
and 4 needs many draws. Both rules here read an item's ratings in draw order (None for an
answer without a rating) and are pure: the judge stage asks what they say is missing, and
the scoring stage replays them on the same ratings to know which draws count, so a study
scored later, or with more draws in its cache, reads exactly the draws its rule chose.

- **A target** (``target_se``): an item stops at the first round whose standard error is at
  most the target and that holds at least ``first`` ratings, or at n. Each round asks about
  as many draws as the target needs from the spread seen so far, at least one more and at
  most twice as many as the item has (a spread read from three ratings is rough).
- **A budget** (``draws``): every item gets ``first`` draws; the rest of the budget goes in
  rounds to the items whose means are least sure (the largest s^2 / k, in units of each
  criterion's scale span), one draw at a time; no item more than doubles in a round, and what
  that holds back waits for the next round, which reads the new ratings first. This
  minimises the largest standard error for a given cost, where an even spread gives the
  sure items draws they do not need.

An early stop sees agreement more often than it is (three equal ratings stop an item whose
fourth would have differed): the bias this puts on a mean is measured in docs/benchmarks.md.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import NamedTuple

from ..reading.distributions import standard_error

__all__ = ["Stop", "allot_budget", "next_draws", "stopping_point"]

Ratings = Sequence[float | None]


class Stop(NamedTuple):
    """Where an item stands: the draws it is asked for (``draws``), and whether the rule is
    done with it (``settled``: its first ``draws`` ratings are its score)."""

    draws: int
    settled: bool


def _valid(ratings: Ratings) -> list[float]:
    return [float(r) for r in ratings if r is not None and math.isfinite(r)]


def next_draws(ratings: Ratings, n: int, target: float) -> int:
    """The draws the next round asks of an item whose first ``len(ratings)`` miss the target."""
    k = len(ratings)
    valid = _valid(ratings)
    se = standard_error(valid)
    if se is None or not valid:  # the spread is unknown: double
        wanted = 2 * k
    else:
        # m valid ratings of spread s reach the target at (s / target)^2; the invalid share
        # seen so far is asked on top.
        s = se * math.sqrt(len(valid))
        wanted = math.ceil((s / target) ** 2 * k / len(valid))
    return min(n, max(k + 1, min(wanted, 2 * k)))


def stopping_point(ratings: Ratings, n: int, first: int, target: float) -> Stop:
    """Where an item with ``ratings`` (its draws so far, in draw order) stands under a target
    standard error: settled at the first round that meets it (or at n), or asked for the
    draws of its next round."""
    k = min(first, n)
    while True:
        if len(ratings) < k:
            return Stop(k, False)
        if k >= n:
            return Stop(n, True)
        # A stop rests on at least first_draws ratings: two that agree among answers that
        # hold none are no sign that the judge is sure.
        se = standard_error(ratings[:k])
        if se is not None and se <= target and len(_valid(ratings[:k])) >= first:
            return Stop(k, True)
        k = next_draws(ratings[:k], n, target)


def allot_budget(
    items: Sequence[Ratings], spans: Sequence[float], n: int, first: int, budget: int
) -> list[Stop]:
    """Each item's draws under a budget of ``budget`` draws for all ``items`` (each its
    ratings so far, in draw order; ``spans`` the width of its criterion's scale).

    The rounds are replayed from the ratings: a round is decided only once every item has
    the draws the rounds before gave it; until then the items lacking draws are asked for
    them and none is settled.
    """
    k = [min(first, n)] * len(items)
    left = budget - sum(k)
    while True:
        lacking = [i for i, ratings in enumerate(items) if len(ratings) < k[i]]
        if lacking:
            return [Stop(k[i], False) for i in range(len(items))]
        given = _one_round(items, spans, k, n, left)
        if not given:
            return [Stop(draws, True) for draws in k]
        left -= given


def _one_round(
    items: Sequence[Ratings], spans: Sequence[float], k: list[int], n: int, left: int
) -> int:
    """One round of the budget: the ``left`` draws shared out as the spreads seen so far ask
    (one at a time to the item whose mean is least sure, the largest s^2 / k), then each item
    given its share but at most as many draws as it has (``k`` is raised in place); what the
    cap holds back waits for the next round, which reads the new ratings first. The draws
    given."""
    variances: list[float | None] = []
    for ratings, draws, span in zip(items, k, spans, strict=True):
        se = standard_error(ratings[:draws])
        valid = len(_valid(ratings[:draws]))
        variances.append(None if se is None else se * se * valid / (span * span or 1.0))
    known = [v for v in variances if v is not None]
    unknown = max(known, default=1.0) or 1.0  # a spread not seen yet: as the widest seen
    share = list(k)
    heap = []
    for i, v in enumerate(variances):
        variance = unknown if v is None else v
        if variance > 0 and k[i] < n:
            heap.append((-variance / k[i], i, variance))
    heapq.heapify(heap)
    for _ in range(left):
        if not heap:
            break
        _, i, variance = heapq.heappop(heap)
        share[i] += 1
        if share[i] < n:
            heapq.heappush(heap, (-variance / share[i], i, variance))
    given = 0
    for i, wanted in enumerate(share):
        grant = min(wanted, 2 * k[i]) - k[i]
        k[i] += grant
        given += grant
    return given
