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
from typing import Protocol, TypeVar

from .cache import CachedResponse, EntryHead, JudgeCache

__all__ = ["EntrySource", "Heads", "ServerEntries"]

_E = TypeVar("_E", CachedResponse, EntryHead)
_E_co = TypeVar("_E_co", CachedResponse, EntryHead, covariant=True)


class EntrySource(Protocol[_E_co]):
    """Anything entries are read from by key (a :class:`JudgeCache` or a view of one); ``get``
    gives whole entries (:class:`CachedResponse`) or, from :class:`Heads`, their heads."""

    def get(self, key: str) -> _E_co | None: ...

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
        return self._seen(key, self.cache.get(key))

    def head(self, key: str) -> EntryHead | None:
        """What a lookup needs of the entry, under the same rule as :meth:`get`."""
        return self._seen(key, self.cache.head(key))

    def heads(self, keys: Sequence[str]) -> list[EntryHead | None]:
        """:meth:`head` of each of ``keys``, found together (:meth:`~.cache.JudgeCache.heads`)."""
        found = self.cache.heads(keys)
        # A handful of distinct heads (shared objects): the rule is asked of each once, not of
        # each key, and told apart by identity (a dataclass's hash is a Python call).
        distinct = dict(zip(map(id, found), found, strict=True))
        kinds = [head for head in distinct.values() if head is not None]
        if self.simulated is not None and any(h.simulated != self.simulated for h in kinds):
            for index, head in enumerate(found):
                if head is not None and head.simulated != self.simulated:
                    self.hidden.add(keys[index])
                    found[index] = None
        shown = (h for h in kinds if self.simulated is None or h.simulated == self.simulated)
        self.origins.update(h.simulated for h in shown if h.ok)
        return found

    def scan_heads(self, planned: int) -> bool:
        return self.cache.scan_heads(planned)

    def _seen(self, key: str, entry: _E | None) -> _E | None:
        if entry is None:
            return None
        if self.simulated is not None and entry.simulated != self.simulated:
            self.hidden.add(key)
            return None
        if entry.ok:
            self.origins.add(entry.simulated)
        return entry


class Heads:
    """A cache, or a server's view of one, read as entry heads: for walks that only decide
    what is answered and what is missing (a run's lookups, ``status``). Whether the cache is
    read whole first is the walk's call (:meth:`~.cache.JudgeCache.scan_heads`).
    """

    def __init__(self, source: JudgeCache | ServerEntries) -> None:
        self.source = source
        self.get = source.head  # the walk's hot path: one call per lookup

    def keys(self, prefix: str = "") -> Iterator[str]:
        return self.source.keys(prefix)

    def prefetch(self, keys: Sequence[str]) -> None:
        self.source.prefetch(keys)
