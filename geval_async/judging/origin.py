"""Which server an answer came from: the simulated judge's never stand in for a real one's.

The cache key leaves the server out (by design: the same request to another deployment of the
same model is the same question), so a cache that served the simulated judge holds answers
under exactly the keys a real run asks for. Every entry records ``simulated`` (the simulated
judge marks its answers with an ``x-geval-simulated`` header), and :class:`ServerEntries` is
the cache as one server sees it: a run against a real server reads the simulated judge's
entries as missing, and asks again (the answer replaces the synthetic one), and the reverse.
The scoring stage uses it to notice a study whose answers mix the two.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from .cache import CachedResponse, JudgeCache

__all__ = ["EntrySource", "ServerEntries"]


class EntrySource(Protocol):
    """Anything entries are read from by key (a :class:`JudgeCache` or a view of one)."""

    def get(self, key: str) -> CachedResponse | None: ...

    def keys(self, prefix: str = "") -> Iterator[str]: ...

    def prefetch(self, keys: Sequence[str]) -> None: ...


class ServerEntries:
    """The cache as a run against one server sees it.

    Args:
        cache: the open cache.
        simulated: whether the server is the simulated judge; None (unknown) hides nothing.
    """

    def __init__(self, cache: JudgeCache, simulated: bool | None) -> None:
        self.cache = cache
        self.simulated = simulated
        self.hidden: set[str] = set()  # keys holding another server's entry
        self.origins: set[bool] = set()  # ``simulated`` of every answer served

    def keys(self, prefix: str = "") -> Iterator[str]:
        return self.cache.keys(prefix)

    def prefetch(self, keys: Sequence[str]) -> None:
        self.cache.prefetch(keys)

    def get(self, key: str) -> CachedResponse | None:
        entry = self.cache.get(key)
        if entry is None:
            return None
        if self.simulated is not None and entry.simulated != self.simulated:
            self.hidden.add(key)
            return None
        if entry.ok:
            self.origins.add(entry.simulated)
        return entry
