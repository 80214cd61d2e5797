"""The simulated judge's prompt cache, modelled on OpenAI's.

A prompt's start is kept once a request carrying it has been answered: the first 1,024
tokens, then every further 128-token block, per model and ``prompt_cache_key`` (OpenAI routes
a request by a hash of its start and that key, so a request routed elsewhere finds nothing).
A later request reads the longest kept start it begins with; that many tokens are reported as
``usage.prompt_tokens_details.cached_tokens``. Requests that arrive while the first one is
still being answered find nothing: the start is kept when the answer is made, not when the
request arrives. A start unused for ``cache_retention_minutes`` is gone (OpenAI keeps one 5
to 10 minutes idle).

Tokens are counted as :func:`~geval_async.sim.limits.prompt_tokens` counts them, four
characters a token: approximate, but the same for the same text every time.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .limits import message_text

__all__ = ["BLOCK_TOKENS", "MIN_TOKENS", "PromptCache"]

MIN_TOKENS = 1024
BLOCK_TOKENS = 128
_CHARS = 4  # characters a token, as sim.limits.prompt_tokens counts them


def _starts(model: str, key: str, messages: list[dict[str, Any]], tokens: int) -> list[bytes]:
    """The digests of the cacheable starts of a prompt of ``tokens`` tokens, shortest first:
    its first 1,024 tokens, then each further 128-token block."""
    text = "\x00".join(f"{m.get('role', '')}\x01{message_text(m)}" for m in messages)
    longest = min(tokens, len(text) // _CHARS)
    if longest < MIN_TOKENS:
        return []
    digest = hashlib.sha256(f"{model}\x00{key}\x00".encode())
    digest.update(text[: MIN_TOKENS * _CHARS].encode())
    starts = [digest.digest()]
    for end in range(MIN_TOKENS + BLOCK_TOKENS, longest + 1, BLOCK_TOKENS):
        digest.update(text[(end - BLOCK_TOKENS) * _CHARS : end * _CHARS].encode())
        starts.append(digest.digest())
    return starts


class PromptCache:
    """The starts of prompts answered lately, and when each was last used."""

    def __init__(self) -> None:
        self._used: dict[bytes, float] = {}

    def read(
        self,
        body: dict[str, Any],
        tokens: int,
        now: float,
        retention: float,
    ) -> tuple[int, list[bytes]]:
        """How many of the prompt's ``tokens`` are read from the cache at ``now`` (seconds),
        and the starts to keep once the answer is made (:meth:`keep`). ``retention``:
        seconds a start is kept unused."""
        model, key = str(body.get("model") or ""), str(body.get("prompt_cache_key") or "")
        starts = _starts(model, key, body["messages"], tokens)
        used = self._used
        for index in range(len(starts) - 1, -1, -1):
            last = used.get(starts[index])
            if last is not None and now - last <= retention:
                for start in starts[: index + 1]:
                    used[start] = now  # read: its idle time starts again
                return MIN_TOKENS + index * BLOCK_TOKENS, starts
        return 0, starts

    def keep(self, starts: list[bytes], now: float, retention: float) -> None:
        """Keep the starts of a prompt just answered (and forget the expired ones now and
        then, so that a long run holds only the last minutes' starts)."""
        used = self._used
        for start in starts:
            used[start] = now
        if len(used) > 100_000:
            for start in [s for s, last in used.items() if now - last > retention]:
                del used[start]

    def clear(self) -> None:
        self._used.clear()
