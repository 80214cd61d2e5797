"""Canonical JSON and the content-addressed key of a draw.

An item's samples are drawn in chunks: the chunk that starts at sample ``draw`` asks the judge
for the rest of the item's n (``n`` in the body). Its key is a tagged digest of the canonical
JSON of what decides the answers: the model, the messages, the sampling parameters and the draw
index, but not ``n``, the chunk's size, which is stored in the entry instead (``n`` asked,
``received``). Samples are independent, so the first k of a chunk of 20 are k samples of the
same request: a study that raises n from 5 to 20 keeps its 5 and asks for 15 from draw 5 on, one
that lowers it reads the first samples of what is there, and two runs with different n that
reach the same draw ask for it once (:mod:`geval_async.judging.store.claims`).

What cannot change the answer stays out of the key: the API key, the base URL, concurrency,
retries and timeouts. So the same study run against the same model reuses every answer, and
editing one prompt file changes exactly the keys of that criterion. Keys of the earlier scheme
(``g1``, where n was part of the key) are moved to these once by ``geval-async cache migrate``
(:mod:`geval_async.judging.store.migrations`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

KEY_VERSION = "g2"
# Stands for the prompt text while a KeyFrame is made: a NUL-framed word no request holds.
_TEXT_MARK = orjson.dumps("\x00geval-async prompt text\x00")


def canonical_json(value: Any) -> bytes:
    """Compact JSON with sorted keys: equal values give equal bytes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def request_key(body: Mapping[str, Any], draw: int) -> str:
    """The cache key of the chunk of an item that starts at sample ``draw``.

    ``body`` is the request as sent; its ``n`` (how many samples the chunk asks for) is left
    out, so the key does not depend on the item's total n.
    """
    asked = {name: value for name, value in body.items() if name != "n"}
    digest = hashlib.sha256(canonical_json({"body": asked, "draw": draw})).hexdigest()
    return f"{KEY_VERSION}-{digest}"


_PREFIX = f"{KEY_VERSION}-"  # what every key starts with


class KeyFrame:
    """The key of many requests that differ only in their prompt text, each hashed fast.

    The requests of one criterion (one model, sampling, role and draw) differ only in their
    one message's text: the canonical JSON before and after that text is the same for all,
    so it is made once, and each key is one SHA-256 over that prefix, the text as a JSON
    string and that suffix. These are the very bytes :func:`request_key` hashes (a JSON
    string's encoding does not depend on what surrounds it), so the keys are the same.
    """

    def __init__(self, before: bytes, after: bytes) -> None:
        self._before = hashlib.sha256(before)
        self._after = after

    @classmethod
    def around(cls, body: Mapping[str, Any], draw: int) -> KeyFrame | None:
        """The frame of ``body``'s requests (its message's text left out); None when the
        body has not exactly one message, or holds the mark used to find the text."""
        messages = body["messages"]
        if len(messages) != 1 or _TEXT_MARK in canonical_json(body):
            return None
        text = orjson.loads(_TEXT_MARK)
        asked = {name: value for name, value in body.items() if name != "n"}
        asked["messages"] = [{**messages[0], "content": text}]
        before, _, after = canonical_json({"body": asked, "draw": draw}).partition(_TEXT_MARK)
        return cls(before, after)

    def key(self, text: str) -> str:
        """The key of the request whose message's text is ``text``."""
        digest = self._before.copy()
        digest.update(orjson.dumps(text))
        digest.update(self._after)
        return _PREFIX + digest.hexdigest()

    def keys(self, texts: list[str]) -> list[str]:
        """:meth:`key` of each of ``texts``, in one loop (a rerun keys every item)."""
        start, after, dumps = self._before.copy, self._after, orjson.dumps
        keys: list[str] = []
        add = keys.append
        for text in texts:
            digest = start()
            digest.update(dumps(text))
            digest.update(after)
            add(_PREFIX + digest.hexdigest())
        return keys

    def keys_filled(self, literals: Sequence[str], values: Sequence[Sequence[bytes]]) -> list[str]:
        """:meth:`key` of each text ``literals[0] + values[0][i] + literals[1] + ... +
        literals[-1]``, each of ``values`` a column already JSON-escaped (:func:`escaped`).

        The text's JSON is the JSON of its pieces end to end (a JSON string escapes each
        character alone), so the keys are those of the texts, made without the texts: each
        record's field escaped once for every criterion that inserts it, the template's text
        once for all (a rerun keys every item).
        """
        if not values or len(literals) != len(values) + 1:
            raise ValueError("a literal before, between and after the values")
        opening = self._before.copy()
        opening.update(b'"' + escaped(literals[0]))
        closing = [escaped(literal) for literal in literals[1:]]
        closing[-1] += b'"' + self._after
        start = opening.copy
        keys: list[str] = []
        add = keys.append
        if len(values) == 1:
            (column,), (last,) = values, closing
            for value in column:
                digest = start()
                digest.update(value)
                digest.update(last)
                add(_PREFIX + digest.hexdigest())
        elif len(values) == 2:
            (first, second), (middle, last) = values, closing
            for value, other in zip(first, second, strict=True):
                digest = start()
                digest.update(value)
                digest.update(middle)
                digest.update(other)
                digest.update(last)
                add(_PREFIX + digest.hexdigest())
        else:
            for row in zip(*values, strict=True):
                digest = start()
                for value, after in zip(row, closing, strict=True):
                    digest.update(value)
                    digest.update(after)
                add(_PREFIX + digest.hexdigest())
        return keys


def escaped(text: str) -> bytes:
    """``text`` as a JSON string writes it, without the quotes (UTF-8)."""
    return orjson.dumps(text)[1:-1]
