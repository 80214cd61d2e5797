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
from collections.abc import Mapping
from typing import Any

import orjson

KEY_VERSION = "g2"


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
