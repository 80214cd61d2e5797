"""A stored judge answer: the :class:`CachedResponse` record, and its bytes in a cache folder.

An entry is written as a mark, a checksum, a small header, the metadata as one line of JSON
and then the response body's bytes as received, deflated when that makes them smaller::

    b"\\x00entry2\\n" | crc32 (4 bytes) | ok, simulated, received (6 bytes) | {"key": ...}\\n | body
    b"\\x00entry3\\n" | crc32 | ok, simulated, received | {"key": ...}\\n | the body deflated

The mark says which (``entry3``: the body as raw DEFLATE, zlib level 1); both are the current
form, and a reader restores the body's exact bytes. An answer's n choices repeat each other,
so its body deflates to a third of itself or less, and a row that small is cheaper to write
and to read back. A refusal's few bytes stay as they are.

The CRC-32 covers everything after itself, so a damaged entry (a cut or changed body, a
changed byte anywhere) is found without parsing the body, and the header repeats what a
lookup needs (answered or refused, how many choices, which server), so a rerun, which looks
up each entry of its plan, reads an :class:`EntryHead` without parsing any JSON. This is the
one form the read path knows: caches written before, which held each entry's JSON, are moved
to it once by ``geval-async cache migrate`` (:mod:`.schema`, :mod:`.legacy`). The fields
alone (an archive's lines) become an entry through :meth:`CachedResponse.from_fields`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import MISSING, dataclass, fields
from itertools import islice
from operator import attrgetter
from typing import Any

import orjson

from ...options import EntryStatus
from ...study.responses_api import answer_choices

__all__ = [
    "DEFLATED",
    "ENTRY_VERSION",
    "MARKS",
    "PACKED",
    "CachedResponse",
    "EntryHead",
    "checked_heads",
    "decode_head",
    "decode_heads",
    "stored_under",
]

# The version of the fields (an archive holds them as JSON): unchanged by how they are stored.
ENTRY_VERSION = 1
PACKED = b"\x00entry2\n"  # the body as received
DEFLATED = b"\x00entry3\n"  # the body deflated (raw DEFLATE: the checksum covers it already)
MARKS = (PACKED, DEFLATED)
_CRC = struct.Struct("<I")  # the CRC-32 of everything after it
_HEADER = struct.Struct("<BBI")  # ok, simulated, received
_SUMMED = len(PACKED) + _CRC.size  # where the checksummed part starts
_META = _SUMMED + _HEADER.size  # where the metadata's JSON starts
_STATUSES = frozenset(EntryStatus)


@dataclass(frozen=True, slots=True)
class EntryHead:
    """What looking an entry up needs: answered or refused, its choices, its server."""

    ok: bool
    received: int
    simulated: bool


@dataclass(frozen=True)
class CachedResponse:
    """One stored judge answer (``status == "ok"``) or permanent refusal (``"rejected"``)."""

    key: str
    status: EntryStatus
    http_status: int
    body: str
    time: float
    latency_ms: float
    attempts: int
    n: int
    draw: int
    model: str
    record_id: str
    criterion: str
    received: int = 0
    usage: dict[str, Any] | None = None
    error: str | None = None
    simulated: bool = False
    v: int = ENTRY_VERSION

    @property
    def ok(self) -> bool:
        return self.status == EntryStatus.OK

    @property
    def head(self) -> EntryHead:
        return EntryHead(self.ok, self.received, self.simulated)

    def choices(self) -> list[dict[str, Any]]:
        """The choices of the stored response body ([] for a refusal)."""
        return self.answer()[0]

    def answer(self) -> tuple[list[dict[str, Any]], str | None]:
        """The body's choices (a Responses answer's: the one its output items make,
        :func:`~geval_async.study.responses_api.answer_choices`) and the ``model`` the server
        says it served (None: it named none), read in one parse ([] and None for a refusal)."""
        if not self.ok:
            return [], None
        parsed = orjson.loads(self.body)
        if not isinstance(parsed, dict):
            return [], None
        served = parsed.get("model")
        return answer_choices(parsed), served if isinstance(served, str) else None

    def encode(self) -> bytes:
        """The entry's bytes in a cache folder (the one way an entry is written)."""
        # On the event loop for every answer: one copy of the body, the checksum run over
        # the parts.
        head = b"%b%b\n" % (
            _HEADER.pack(self.ok, self.simulated, self.received),
            orjson.dumps(dict(zip(_META_FIELDS, _meta(self), strict=True))),
        )
        body = self.body.encode()
        mark, deflated = PACKED, zlib.compress(body, 1, -zlib.MAX_WBITS)
        if len(deflated) < len(body):
            mark, body = DEFLATED, deflated
        crc = _CRC.pack(zlib.crc32(body, zlib.crc32(head)))
        return b"".join((mark, crc, head, body))

    @classmethod
    def decode(cls, raw: Any) -> CachedResponse:
        """Decode a stored value; raises ValueError when it is not a valid entry."""
        if not isinstance(raw, bytes | bytearray):
            raise ValueError("entry is not bytes")
        if not raw.startswith(MARKS):
            raise ValueError("entry is not in the packed form")
        _check(raw)
        end = raw.index(b"\n", _META)
        data = orjson.loads(memoryview(raw)[_META:end])
        if not isinstance(data, dict):
            raise ValueError("entry has no metadata")
        body = raw[end + 1 :]
        if raw.startswith(DEFLATED):
            try:
                body = zlib.decompress(body, -zlib.MAX_WBITS)
            except zlib.error as exc:
                raise ValueError("entry's body does not inflate: damaged") from exc
        data["body"] = body.decode()
        return cls._build(data)

    @classmethod
    def from_fields(cls, data: Any) -> CachedResponse:
        """The entry whose fields ``data`` holds (a dict, as an archive's line holds them);
        raises ValueError when they are not a valid entry's, or an answer's body is not JSON."""
        if not isinstance(data, dict):
            raise ValueError("entry is not an object")
        entry = cls._build(dict(data))
        if entry.ok:
            # The body was checked when it arrived; failing now means the entry was damaged.
            orjson.loads(entry.body)
        return entry

    @classmethod
    def _build(cls, data: dict[str, Any]) -> CachedResponse:
        if data.get("v") != ENTRY_VERSION:
            raise ValueError("entry has no known version")
        # As cls(**data), without the frozen dataclass's field-by-field __init__: every field
        # present once, no other key. The status stays the stored str (equal to its
        # EntryStatus member): no copy per read.
        values = dict(_TEMPLATE)  # the fields in their order: orjson writes them so
        values.update(data)
        if len(values) != len(_TEMPLATE) or MISSING in values.values():
            raise ValueError("entry has unknown or missing fields")
        entry = object.__new__(cls)
        entry.__dict__.update(values)
        if entry.status not in _STATUSES or not isinstance(entry.body, str):
            raise ValueError("entry has an unknown status")
        if entry.ok and entry.received < 1:
            # An answer always has a choice; without one the next draw would start here again.
            raise ValueError("entry has no choices")
        return entry


def decode_head(raw: Any) -> EntryHead:
    """The head of a stored value, checked whole; raises ValueError when it is not valid."""
    if (
        type(raw) is bytes  # the usual case, checked as decode_heads does: one per lookup
        and raw[: len(PACKED)] in MARKS
        and len(raw) >= _META
        and zlib.crc32(raw[_SUMMED:]) == _CRC.unpack_from(raw, len(PACKED))[0]
    ):
        head = _HEADS.get(raw[_SUMMED:_META])
        if head is not None:
            return head
    if isinstance(raw, bytes | bytearray) and raw.startswith(MARKS):
        _check(raw)
        header = bytes(raw[_SUMMED:_META])
        head = _HEADS.get(header)
        return _head(header) if head is None else head
    return CachedResponse.decode(raw).head


def decode_heads(rows: Iterable[tuple[str, Any]]) -> tuple[dict[str, EntryHead], list[str]]:
    """The heads of many ``(key, value)`` rows, each entry checked whole as by
    :func:`decode_head`; and the keys of the rest (damaged, kept in a file, not bytes), for the
    cache to read and judge one at a time."""
    heads: dict[str, EntryHead] = {}
    others: list[str] = []
    for keys, checked, rest in checked_heads(rows):
        heads.update(zip(keys, checked, strict=True))
        others += rest
    return heads, others


def checked_heads(
    rows: Iterable[tuple[str, Any]], size: int = 4096
) -> Iterator[tuple[list[str], list[EntryHead], list[str]]]:
    """Many ``(key, value)`` rows' heads, each entry checked whole as by :func:`decode_head`,
    ``size`` rows at a time: their keys and heads (in two lists, in order), and the keys of
    the rest (damaged, kept in a file, not bytes), for the cache to read and judge one at a
    time."""
    crc32, stored_crc, known, marks = zlib.crc32, _CRC.unpack_from, _HEADS, MARKS
    marked = len(PACKED)
    rows = iter(rows)
    while batch := list(islice(rows, size)):
        keys: list[str] = []
        heads: list[EntryHead] = []
        others: list[str] = []
        add_key, add_head = keys.append, heads.append
        # One loop, no call per entry but the checksum's: a rerun reads every entry of its plan.
        for key, raw in batch:
            if (
                type(raw) is bytes
                and raw[:marked] in marks
                and len(raw) >= _META
                and crc32(raw[_SUMMED:]) == stored_crc(raw, marked)[0]
            ):
                head = known.get(raw[_SUMMED:_META])
                if head is not None:
                    add_key(key)
                    add_head(head)
                    continue
            if type(raw) is bytes:  # a header not met yet, or damaged (then left over)
                try:
                    head = decode_head(raw)
                except ValueError:
                    pass
                else:
                    add_key(key)
                    add_head(head)
                    continue
            others.append(key)
        yield keys, heads, others


def _head(header: bytes) -> EntryHead:
    """The head of a checked entry's header; equal headers share one (immutable) head."""
    ok, simulated, received = _HEADER.unpack(header)
    if ok > 1 or simulated > 1 or (ok and received < 1):
        raise ValueError("entry has an invalid header")
    head = EntryHead(ok == 1, received, simulated == 1)
    if len(_HEADS) < 256:  # a handful in practice: answered or refused, n, server
        _HEADS[header] = head
    return head


def intact(raw: bytes) -> bool:
    """Whether ``raw`` is an entry as it was written: its checksum matches and its body reads
    under its mark (the mark is outside the checksum, and one flipped bit turns the packed
    form's mark into the deflated form's)."""
    try:
        CachedResponse.decode(raw)
    except ValueError:
        return False
    return True


def _check(raw: bytes | bytearray) -> tuple[int, int, int]:
    """The header's fields, once the checksum shows the entry is as it was written."""
    if len(raw) < _META:
        raise ValueError("entry is cut short")
    if zlib.crc32(memoryview(raw)[_SUMMED:]) != _CRC.unpack_from(raw, len(PACKED))[0]:
        raise ValueError("entry does not match its checksum: damaged")
    ok, simulated, received = _HEADER.unpack_from(raw, _SUMMED)
    return ok, simulated, received


_HEADS: dict[bytes, EntryHead] = {}
_TEMPLATE: dict[str, Any] = {f.name: f.default for f in fields(CachedResponse)}
_META_FIELDS = tuple(name for name in _TEMPLATE if name != "body")
_meta = attrgetter(*_META_FIELDS)
_KEY_FIRST = b'{"key":'  # the metadata's JSON opens with the key, the first field


def stored_under(raw: Any, key: str) -> bool:
    """Whether the stored value ``raw`` is the entry of ``key`` (its metadata opens with it).

    A cache folder is input: a row copied under another key (by hand, or by a tool that
    copies rows) holds the answer to another request, which would then count for an item it
    does not belong to, or twice for its own. Such a row reads as damaged, as ``cache verify``
    lists it, so that every command agrees and a run asks it again.
    """
    return type(raw) is bytes and raw.startswith(_KEY_FIRST + orjson.dumps(key), _META)
