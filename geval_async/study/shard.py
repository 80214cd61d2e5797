"""A shard: share I of K of a study's plan, for K machines judging one study together.

Each item belongs to exactly one shard, chosen from the cache key of its first draw (a digest,
so the shares are even up to chance, and the same on every machine with the same config).
The key does not hold n, so an item stays in its shard when n is raised; identical requests
have one key, so two shards never ask the same request and their caches merge without a clash.
"""

from __future__ import annotations

import re
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

    def holds(self, key: str) -> bool:
        """Whether the item whose first draw has cache key ``key`` is in this shard."""
        return int(key[-16:], 16) % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
