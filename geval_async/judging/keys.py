"""Canonical JSON and the content-addressed request key.

A key is a tagged digest of the canonical JSON of exactly what decides the judge's answer: the
model, the messages, the sampling parameters, how many choices were asked for and the draw index.
What cannot change the answer stays out of it: the API key, the base URL, concurrency, retries and
timeouts. So the same study run against the same model reuses every answer, and editing one
prompt file changes exactly the keys of that criterion.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

KEY_VERSION = "g1"


def canonical_json(value: Any) -> bytes:
    """Compact JSON with sorted keys: equal values give equal bytes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def request_key(body: Mapping[str, Any], draw: int) -> str:
    """The cache key of a chat-completions request body sent as draw ``draw`` of its item."""
    digest = hashlib.sha256(canonical_json({"body": body, "draw": draw})).hexdigest()
    return f"{KEY_VERSION}-{digest}"
