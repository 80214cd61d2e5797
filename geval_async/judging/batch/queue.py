"""The Batch API's queue: how many tokens the judge model may have queued in batches at once.

OpenAI limits the input tokens a model may have queued in batches (the enqueued-token limit
of the account's tier); a batch created over it ends ``failed`` with the error code
``token_limit_exceeded`` and words such as "Enqueued token limit reached for gpt-4o-mini in
organization org-... Limit: 2,000,000 enqueued tokens. ...". Such a batch ran nothing: its
requests are not failures, they go back in line and are submitted when room frees up.

The limit is ``[limits] batch_queue_tokens`` when the config sets it, else learned from a batch
that failed for it: the number OpenAI's message states, or, where it states none (or where the
tokens this client had queued were under the stated number: other batches of the organisation
share the queue), half of what was queued. A learned limit is kept per model in
``<cache>/batches/queue.limits`` (so the next command starts from it); the lower of the two
applies. A batch's tokens are estimated as the online limiter counts a request (four
characters a token, four a message, plus the answer's ``max_tokens``): on the safe side of the
provider's count of input tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from ...errors import CacheError
from .ledger import FOLDER, BatchRecord, write_atomic

# The provider's error code of a batch over the enqueued-token limit.
QUEUE_FULL = "token_limit_exceeded"
_LIMIT = re.compile(r"Limit:\s*([\d,_ ]*\d)\s*enqueued tokens", re.IGNORECASE)
_RUNNING = ("in_progress", "finalizing", "cancelling")


def stated_limit(message: str | None) -> int | None:
    """The enqueued-token limit a provider's message states ("Limit: 2,000,000 enqueued
    tokens"), or None."""
    found = _LIMIT.search(message or "")
    if found is None:
        return None
    digits = re.sub(r"\D", "", found.group(1))
    return int(digits) if digits and int(digits) > 0 else None


def queued_tokens(records: Iterable[BatchRecord]) -> int:
    """The tokens the live batches hold in the provider's queue (an ended batch holds none,
    nor one refused for the limit)."""
    return sum(r.tokens for r in records if not r.ended and r.queue_refusal is None)


def file_stage(record: BatchRecord) -> str:
    """``queued`` (waiting at the provider, or being submitted), ``running`` or ``finished``."""
    if record.ended:
        return "finished"
    return "running" if record.status in _RUNNING else "queued"


@dataclass
class QueueLimit:
    """The enqueued-token limit of one model: set in the config, learned, or unknown."""

    model: str
    configured: int | None
    learned: int | None

    @property
    def tokens(self) -> int | None:
        """The limit that applies (the lower of the two), None when unknown."""
        known = [t for t in (self.configured, self.learned) if t is not None]
        return min(known) if known else None

    def room(self, live: Iterable[BatchRecord]) -> int | None:
        """How many tokens may still be queued (None: no known limit)."""
        limit = self.tokens
        return None if limit is None else max(0, limit - queued_tokens(live))

    def describe(self) -> str:
        if self.tokens is None:
            return "no known limit (learned from the first batch refused for it)"
        if self.configured is not None and self.tokens == self.configured:
            return f"limit {self.tokens:,} ([limits] batch_queue_tokens)"
        return f"limit {self.tokens:,} (learned from a batch the provider refused for it)"


class QueueLimits:
    """The learned limits of a cache's ledger, per model (``batches/queue.limits``)."""

    def __init__(self, cache_directory: Path) -> None:
        self.path = Path(cache_directory) / FOLDER / "queue.limits"

    def read(self) -> dict[str, int]:
        try:
            data = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise CacheError(
                f"{self.path}: cannot read the learned batch queue limits ({exc}); delete the "
                "file to learn them again"
            ) from exc
        if not isinstance(data, dict):
            return {}
        return {str(k): int(v) for k, v in data.items() if isinstance(v, int) and v > 0}

    def limit(self, model: str, configured: int | None) -> QueueLimit:
        return QueueLimit(model, configured, self.read().get(model))

    def learn(self, model: str, refused: BatchRecord, others: Iterable[BatchRecord]) -> int | None:
        """Learn the limit from a batch the provider refused for it; returns the limit now
        known (None when nothing could be learned: the batch's tokens were not recorded).

        ``others`` are the other live batches: what was queued besides the refused one.
        """
        queued = refused.tokens + queued_tokens(o for o in others if o.name != refused.name)
        stated = stated_limit(refused.queue_refusal)
        limits = self.read()
        if stated is not None and queued > stated:
            limits[model] = stated  # the provider's word, even where it is above the old one
        elif queued > 0:
            limits[model] = min(max(1, queued // 2), limits.get(model, queued))
        else:
            return limits.get(model)
        write_atomic(self.path, orjson.dumps(limits))
        return limits[model]
