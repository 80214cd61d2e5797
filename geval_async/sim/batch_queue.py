"""The Batch API's enqueued-token limit, as OpenAI enforces it per model and organisation.

OpenAI limits how many input tokens a model may have queued in batches at once (the
enqueued-token limit of the account's tier). A batch counts from its creation until it ends
(completed, failed, expired or cancelled); a batch whose input would take the model's queued
tokens over the limit fails at validation, its ``errors.data[0]`` holding
``code: "token_limit_exceeded"`` and OpenAI's words ("Enqueued token limit reached for
gpt-4o-mini in organization org-... Limit: 2,000,000 enqueued tokens. Please try again once
some in_progress batches have been completed."), and queues nothing.

A batch's tokens are estimated as the online endpoint counts a prompt
(:func:`~geval_async.sim.limits.prompt_tokens`: four characters a token plus four per
message), summed over its lines; ``max_tokens`` does not count, as OpenAI's limit is on input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from .answers import MODEL
from .limits import prompt_tokens

ORGANIZATION = "org-sim"


def input_tokens(lines: list[dict[str, Any]]) -> tuple[str, int]:
    """The model a batch's lines ask for (the first line's) and their input tokens."""
    model = str(lines[0]["body"].get("model") or MODEL) if lines else MODEL
    tokens = 0
    for line in lines:
        body = line["body"]
        messages = body.get("messages", body.get("input"))  # chat's, or a Responses line's
        if isinstance(messages, list):  # a malformed line fails when answered, not here
            tokens += prompt_tokens([m for m in messages if isinstance(m, dict)])
    return model, tokens


def over_limit(model: str, limit: int) -> tuple[str, str]:
    """The message and code of a batch refused for the enqueued-token limit."""
    message = (
        f"Enqueued token limit reached for {model} in organization {ORGANIZATION}. "
        f"Limit: {limit:,} enqueued tokens. Please try again once some in_progress batches "
        "have been completed."
    )
    return message, "token_limit_exceeded"


def queued_tokens(batches: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Queued tokens per model, from (model, tokens) of the batches still queued."""
    queued: dict[str, int] = {}
    for model, tokens in batches:
        queued[model] = queued.get(model, 0) + tokens
    return queued


def request_digest(body: dict[str, Any]) -> str:
    """sha256 of a batch line's request body as compact JSON in the line's key order.

    That is the body's bytes as a client serialising compactly (orjson, or ``json.dumps``
    with ``separators=(",", ":")``) sends it online, so a batch line and the same request
    sent online have one digest (:attr:`~.settings.SimStats.answered`,
    :attr:`~.settings.SimStats.ratings`).
    """
    compact = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(compact.encode()).hexdigest()
