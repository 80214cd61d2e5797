"""How sure the simulated judge is of an item: how its draws scatter around the hidden score.

Under ``certainty = "even"`` every rated item's draws are its hidden score plus Gaussian noise
of the same width (``NOISE_SD["even"]``), and in logprobs mode its first token spreads the same
way (``LOGPROB_WIDTH["even"]``). Under ``"varied"`` each item is, from a hash of its messages
and the seed, one of three kinds in about equal shares, as real judges are sure of some texts
and torn on others:

- ``"sure"``: every draw is the same rating, the hidden score rounded;
- ``"leaning"``: mostly the rounded hidden score (about four draws in five), sometimes a
  neighbour;
- ``"spread"``: ratings across the scale, centred halfway between the hidden score and the
  scale's middle, so they scatter both ways instead of piling up at an end.

Tests and benchmarks ask :func:`item_certainty` which kind an item is, and the judge counts
the draws it answered for each item under :func:`item_digest`, so a study that spends fewer
draws where ratings settle can be measured where the truth is known. The kinds apply to
rated prompts only: a yes/no question, a pairwise prompt and a request for evaluation steps
are drawn as under ``"even"``.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from .settings import SimSettings

EVEN = "even"
VARIED = "varied"
CERTAINTIES = (EVEN, VARIED)
SURE = "sure"
LEANING = "leaning"
SPREAD = "spread"
KINDS = (SURE, LEANING, SPREAD)
# The standard deviation of a draw's Gaussian noise, in rating points, by kind. A leaning
# item's 0.4 keeps about 79% of its draws on its rating; a spread item's 1.5 gives a 1-5
# item a standard deviation of about 1.2 to 1.3 once the scale's ends cut it.
NOISE_SD = {EVEN: 0.7, SURE: 0.0, LEANING: 0.4, SPREAD: 1.5}
# The width of the first token's distribution over the ratings in logprobs mode, by kind (a
# sure item's 0.2 leaves its neighbours under a millionth of the mass).
LOGPROB_WIDTH = {EVEN: 0.6, SURE: 0.2, LEANING: 0.4, SPREAD: 1.5}


def check_certainty(settings: SimSettings) -> None:
    """Raise ValueError naming the choices when ``settings.certainty`` is unknown."""
    if settings.certainty not in CERTAINTIES:
        known = ", ".join(CERTAINTIES)
        raise ValueError(f"unknown certainty {settings.certainty!r}; known: {known}")


def item_certainty(messages: list[dict[str, Any]], settings: SimSettings) -> str:
    """How sure the judge is of the item asked in ``messages``: "sure", "leaning" or
    "spread" under ``certainty = "varied"``, "even" otherwise.

    A pure function of the messages and the seed, like the hidden score: every draw of an
    item, in whatever request, has the same kind.
    """
    if settings.certainty != VARIED:
        return EVEN
    text = json.dumps(
        [settings.seed, "certainty", messages],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    unit = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64
    return KINDS[int(unit * len(KINDS))]


def item_digest(messages: list[dict[str, Any]]) -> str:
    """The item asked in ``messages``, as the judge counts its draws (``SimStats.item_draws``):
    the sha256 of their canonical JSON. Every request for the item carries the same messages,
    whatever its n, seed or round, so the count is the draws the item was given in all."""
    text = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def rating_centre(kind: str, hidden: float, top: int) -> float:
    """Where an item's draws centre on a 1..``top`` scale, given its hidden score."""
    if kind in (SURE, LEANING):
        return float(min(top, max(1, math.floor(hidden + 0.5))))
    if kind == SPREAD:
        middle = (1 + top) / 2
        return middle + (hidden - middle) / 2
    return hidden
