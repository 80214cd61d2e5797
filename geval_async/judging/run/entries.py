"""The cache entry of an answered or refused request: the raw body plus small metadata."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ...errors import TransportError
from ...options import EntryStatus
from ...study.plan import JudgeRequest
from ..store.cache import CachedResponse
from ..store.stored import ENTRY_VERSION

if TYPE_CHECKING:
    from ..wire.transport import JudgeAnswer

__all__ = ["answer_entry", "refusal_entry"]

_OK = EntryStatus.OK  # an enum's member read from its class is a lookup each time


def _origin(request: JudgeRequest) -> dict[str, object]:
    return {
        "key": request.key,
        "time": time.time(),
        "n": request.n,
        "draw": request.draw,
        "model": request.model,
        "record_id": request.item.record.id,
        "criterion": request.item.criterion.name,
    }


def answer_entry(request: JudgeRequest, answer: JudgeAnswer, attempts: int) -> CachedResponse:
    """The entry of a request the judge answered, its body stored as received."""
    usage = answer.parsed.get("usage")
    item = request.item
    # One a request on the event loop's thread: made as CachedResponse(**fields) makes it,
    # without the frozen dataclass's field-by-field __init__, its fields' dict made once and
    # handed over, not copied (a third of the cost; every field is given, tests/test_engine.py
    # compares it with the dataclass's own).
    entry = object.__new__(CachedResponse)
    object.__setattr__(
        entry,
        "__dict__",
        {
            "key": request.key,
            "status": _OK,
            "http_status": answer.status,
            "body": answer.body.decode("utf-8", "replace"),
            "time": time.time(),
            "latency_ms": answer.latency_ms,  # to the microsecond (transport.py)
            "attempts": attempts,
            "n": request.n,
            "draw": request.draw,
            # request.model, criterion.name and answer.simulated, without their properties
            "model": request.config.judge.model,
            "record_id": item.record.id,
            "criterion": item.criterion.config.name,
            "received": len(answer.parsed["choices"]),
            "usage": usage if isinstance(usage, dict) else None,
            "error": None,
            "simulated": answer.headers.get("x-geval-simulated", "") == "true",
            "v": ENTRY_VERSION,
        },
    )
    return entry


def refusal_entry(
    request: JudgeRequest, exc: TransportError, attempts: int, reason: str | None = None
) -> CachedResponse:
    """The entry of a request the judge refused for good (a 4xx no retry fixes)."""
    return CachedResponse(
        **_origin(request),  # type: ignore[arg-type]
        status=EntryStatus.REJECTED,
        http_status=exc.status or 0,
        body=exc.body.decode("utf-8", "replace"),
        latency_ms=0.0,
        attempts=attempts,
        error=reason or str(exc),
        simulated=exc.headers.get("x-geval-simulated", "") == "true",
    )
