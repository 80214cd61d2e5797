"""Provider prompt caches: the prefix a criterion's requests share, and its routing key.

OpenAI (and several providers after it) keeps the computed start of a prompt for a few
minutes once it is 1,024 tokens or longer, in blocks of 128 tokens, and bills a later request
that starts with the same tokens at the cached-input price (a tenth of the input price or less
on recent models). A criterion's requests share the text of its template before the first
record field (its instructions, scale, rubric and evaluation steps): that is what every item
of the criterion can read from the cache, once one request carrying it has been answered. The
draws of one item, sent one answer a request to an endpoint that refuses ``n``, share their
whole prompt.

``prompt_cache_key`` helps the provider route requests with the same prefix to the same
machine: one key per criterion and model. It goes on the wire only
(:meth:`~geval_async.judging.wire.capabilities.Capabilities.wire`), never into a request's
cache key: it cannot change an answer.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from .requests import CHARS_PER_TOKEN, PlannedCriterion

__all__ = [
    "CACHE_BLOCK_TOKENS",
    "CACHE_MIN_TOKENS",
    "PrefixShare",
    "cacheable_tokens",
    "prefix_share",
    "prompt_cache_key",
    "shared_prefix",
]

# OpenAI caches a prefix of this many tokens or more, in blocks of CACHE_BLOCK_TOKENS.
CACHE_MIN_TOKENS = 1024
CACHE_BLOCK_TOKENS = 128


def cacheable_tokens(shared: int) -> int:
    """How many of ``shared`` leading tokens a provider's prompt cache can hold: none below
    1,024, else the whole 128-token blocks."""
    if shared < CACHE_MIN_TOKENS:
        return 0
    return shared - (shared - CACHE_MIN_TOKENS) % CACHE_BLOCK_TOKENS


def shared_prefix(criterion: PlannedCriterion) -> str:
    """The text every request of ``criterion`` starts with: its template before the first
    record field (of every rubric's text, the part they have in common)."""
    template = criterion.template
    texts = [
        template.parts[0] if rubric is None else template.fill({"rubric": rubric.text}).parts[0]
        for rubric in criterion.rubrics
    ]
    return os.path.commonprefix(texts) if len(texts) > 1 else texts[0]


@dataclass(frozen=True)
class PrefixShare:
    """How much of a criterion's prompt its requests share, in estimated tokens."""

    criterion: str
    shared: int  # tokens before the first record field, common to every request

    @property
    def cacheable(self) -> int:
        """The shared tokens a provider's prompt cache can hold (0: below 1,024)."""
        return cacheable_tokens(self.shared)

    def line(self) -> str:
        """What ``--dry-run`` says of it."""
        if self.cacheable:
            return (
                f"{self.criterion}: about {self.shared:,} prompt tokens shared by all its "
                f"requests, {self.cacheable:,} of them cacheable (billed at the cached-input "
                "price once one request carrying them is answered)"
            )
        return (
            f"{self.criterion}: about {self.shared:,} prompt tokens shared by all its "
            f"requests, below the {CACHE_MIN_TOKENS:,} a provider caches: none cacheable "
            "across its items"
        )


def prefix_share(criterion: PlannedCriterion) -> PrefixShare:
    """The estimated tokens every request of ``criterion`` shares (as requests estimate
    them: four characters a token)."""
    return PrefixShare(criterion.name, len(shared_prefix(criterion)) // CHARS_PER_TOKEN)


def prompt_cache_key(model: str, criterion: PlannedCriterion) -> str:
    """The ``prompt_cache_key`` of a criterion's requests to ``model``: its name and a digest
    of the model and its shared prefix, so that an edited prompt is routed afresh."""
    digest = hashlib.sha256(f"{model}\0{shared_prefix(criterion)}".encode()).hexdigest()
    return f"geval-{criterion.name[:32]}-{digest[:16]}"
