"""Every entry's head from one pass over a cache's table, held in a few sorted arrays.

A rerun of a large plan looks up the head of every entry of it (:mod:`.left`). Asked for by
key, ``IN (...)`` 900 keys a query, the 1,000,000 lookups of issue 22's rerun cost 11.9 CPU s:
each key reads a leaf page of the key index and one of the table, all over the 1.1 GB file.
One pass over the table in the file's order costs 1.8 s, but held in a dict the heads cost
about 150 bytes an entry (400,000 took a rerun's peak from 118 to 175 MB). Here each key of
the usual form (``g2-`` and 64 lowercase hex digits, :mod:`geval_async.study.keys`) is kept as
its 32-byte digest, in one sorted array per distinct head (answered with k choices by one
server, refused: a handful), and a chunk of keys is found with one ``searchsorted`` per array:
33 bytes an entry, no Python object per entry, and the keys exactly (no prefix of the digest
stands for them). Keys of another form, few if any, are kept in a dict.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ...study.keys import KEY_VERSION
from .stored import EntryHead, checked_heads

__all__ = ["HeadTable"]

_PREFIX = f"{KEY_VERSION}-"
_HEX = 64  # hex digits of a SHA-256 digest
_DIGEST = _HEX // 2
_FORM = len(_PREFIX) + _HEX
_BATCH = 4096  # rows checked, and their keys packed, at a time (about 3 MB of values)
_KINDS = 256  # distinct heads held in arrays (each entry's kind is one byte)


class HeadTable:
    """The heads of a cache's entries by key, read in one pass (:meth:`read`).

    ``unread``: the keys whose entry the pass could not judge (damaged, kept in a file, not
    an entry), for the cache to read and judge one at a time.
    """

    def __init__(
        self,
        sorted_digests: list[tuple[EntryHead, np.ndarray[Any, Any]]],
        odd: dict[str, EntryHead],
        unread: set[str],
    ) -> None:
        # Each array searched by its digests' first 8 bytes (as integers, in the same order:
        # a fast search), each place found checked against the whole digest.
        self._arrays = [
            (head, digests, _prefixes(digests)) for head, digests in sorted_digests if len(digests)
        ]
        self._odd = odd
        self.unread = unread

    @classmethod
    def read(cls, rows: Iterable[tuple[str, Any]], expected: int = 0) -> HeadTable:
        """Check and pack every ``(key, value)`` row's head (:func:`~.stored.checked_heads`);
        ``expected``: about how many rows there are (their digests' room is made at once: a
        bytearray grown a batch at a time would be copied as it grows, twice its size at a
        time)."""
        digests = bytearray(_DIGEST * expected)  # of the usual keys, in the file's order
        filled = 0
        kinds = bytearray()  # the place of each one's head in ``heads``
        heads: list[EntryHead] = []
        # Heads are a handful of shared objects, told apart by identity (a dataclass's hash
        # is a Python call, and this loop meets every entry).
        place: dict[int, int] = {}
        odd: dict[str, EntryHead] = {}
        unread: set[str] = set()
        for keys, checked, others in checked_heads(rows, _BATCH):
            unread.update(others)
            raw = _digests_of(keys)
            if raw is None:  # not all of the usual form: sorted out one at a time
                usual = [i for i, key in enumerate(keys) if _digests_of([key]) is not None]
                odd.update(zip(keys, checked, strict=True))
                for i in usual:
                    del odd[keys[i]]
                keys, checked = [keys[i] for i in usual], [checked[i] for i in usual]
                raw = _digests_of(keys) or b""
            distinct = dict(zip(map(id, checked), checked, strict=True))
            new = [head for ident, head in distinct.items() if ident not in place]
            if len(heads) + len(new) > _KINDS:  # never in practice: kept apart, by key
                odd.update(zip(keys, checked, strict=True))
                continue
            for head in new:
                place[id(head)] = len(heads)
                heads.append(head)
            digests[filled : filled + len(raw)] = raw  # in place while there is room
            filled += len(raw)
            if len(distinct) == 1:
                kinds += bytes([place[id(checked[0])]]) * len(checked)
            else:
                kinds += bytes(map(place.__getitem__, map(id, checked)))
        del digests[filled:]
        everything = np.frombuffer(digests, dtype=f"S{_DIGEST}")
        if len(heads) == 1:  # the usual cache: sorted where it lies, no copy
            everything.sort()
            arrays = [(heads[0], everything)]
        else:
            of_kind = np.frombuffer(kinds, dtype=np.uint8)
            arrays = [(head, np.sort(everything[of_kind == i])) for i, head in enumerate(heads)]
        return cls(arrays, odd, unread)

    def __len__(self) -> int:
        return sum(len(digests) for _, digests, _ in self._arrays) + len(self._odd)

    def get(self, key: str) -> EntryHead | None:
        """The head of ``key``'s entry; None when the pass did not judge one (see ``unread``)."""
        return self.find([key])[0]

    def find(self, keys: Sequence[str]) -> list[EntryHead | None]:
        """The head of each key's entry, in order (None: none judged, see ``unread``)."""
        found: list[EntryHead | None] = [None] * len(keys)
        digests = _digests(keys)
        if digests is None:  # not all of the usual form: one at a time
            for index, key in enumerate(keys):
                found[index] = self._one(key)
            return found
        wanted = _prefixes(digests)
        # Sought in their order, each search starts where the last one ended: the few
        # pages of the array that hold them, not twenty cache misses a key all over it.
        order = np.argsort(wanted)
        for head, stored, prefixes in self._arrays:
            places = np.empty_like(order)
            places[order] = np.searchsorted(prefixes, wanted[order])
            np.minimum(places, len(stored) - 1, out=places)
            hit = stored[places] == digests
            if hit.all():  # a rerun's chunk: every key found in this array
                return [head] * len(keys)
            for index in np.flatnonzero(hit).tolist():
                found[index] = head
            # Another digest with the same first 8 bytes (about 1 in 10**7 caches of a
            # million entries) is sought whole.
            tied = np.flatnonzero(~hit & (prefixes[places] == wanted)).tolist()
            for index in tied:
                if self._holds(stored, digests[index]):
                    found[index] = head
        return found

    def _one(self, key: str) -> EntryHead | None:
        digests = _digests([key])
        if digests is None:
            return self._odd.get(key)
        for head, stored, _ in self._arrays:
            if self._holds(stored, digests[0]):
                return head
        return None

    @staticmethod
    def _holds(stored: np.ndarray[Any, Any], digest: Any) -> bool:
        place = int(np.searchsorted(stored, digest))
        return place < len(stored) and bool(stored[place] == digest)


def _prefixes(digests: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The first 8 bytes of each digest as an integer (big-endian: in the digests' order)."""
    return np.ascontiguousarray(digests).view(">u8")[::4].astype(np.uint64)


def _digests(keys: Sequence[str]) -> np.ndarray[Any, Any] | None:
    """The keys' digests, when every key is of the usual form; None otherwise."""
    raw = _digests_of(keys)
    return None if raw is None else np.frombuffer(raw, dtype=f"S{_DIGEST}")


def _digests_of(keys: Sequence[str]) -> bytes | None:
    """The keys' digests, 32 bytes each, when every key is ``g2-`` and 64 lowercase hex
    digits; None otherwise (bytes.fromhex alone takes capitals and skips spaces)."""
    if not keys:
        return b""
    if set(map(len, keys)) != {_FORM}:
        return None
    text, count = "".join(keys), len(keys)
    starts = (text[place::_FORM] == char * count for place, char in enumerate(_PREFIX))
    if not all(starts) or text != text.lower():
        return None
    # "g2-" starts each key, and no hex digit is a "g": removed, only the digits are left.
    try:
        raw = bytes.fromhex(text.replace(_PREFIX, ""))
    except ValueError:
        return None
    return raw if len(raw) == _DIGEST * len(keys) else None
