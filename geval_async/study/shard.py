"""A shard: share I of K of a study's plan, for K machines judging one study together.

Each item belongs to exactly one shard, chosen from the cache key of its first draw. The plan's
keys, read as numbers (their last 16 hex digits) and sorted, are cut into K runs whose sizes
differ by at most one, and shard I holds the I-th run: the shares are balanced to within one
item, and the same on every machine with the same config. The key does not hold n, so an item
stays in its shard when n is raised; identical requests have one key, so two shards never ask
the same request and their caches merge without a clash (identical requests count once).

Adding records adds keys at random places in that order, so the cuts move a little: an item
near a cut (about as many per cut as records were added) can move to the next shard; every
other item stays where it was. A merged cache does not care: an answer is under its key,
whichever shard asked for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_SHAPE = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True, slots=True)
class Shard:
    """Share ``index`` (1-based) of ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard | None:
        """``"2/3"`` -> Shard(2, 3); None when the text is not I/K with 1 <= I <= K."""
        match = _SHAPE.fullmatch(text)
        if match is None or not 1 <= int(match[1]) <= int(match[2]):
            return None
        return cls(int(match[1]), int(match[2]))

    def cut(self, keys: Iterable[str]) -> Share:
        """This shard's run of the plan whose first draws have cache keys ``keys``."""
        ordered = sorted({position(key) for key in keys})
        total, index = len(ordered), self.index - 1
        start, end = index * total // self.count, (index + 1) * total // self.count
        return Share(
            ordered[start] if start < total else _END, ordered[end] if end < total else _END
        )

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


_END = 1 << 64  # past every position


def position(key: str) -> int:
    """Where a cache key falls in the order shards are cut from: its last 16 hex digits."""
    return int(key[-16:], 16)


@dataclass(frozen=True, slots=True)
class Share:
    """The positions ``[low, high)`` of the plan's keys one shard holds."""

    low: int
    high: int

    def holds(self, key: str) -> bool:
        """Whether the item whose first draw has cache key ``key`` is in this share."""
        return self.low <= position(key) < self.high
