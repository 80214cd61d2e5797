"""The simulated OpenAI-compatible judge: a real HTTP server that stands in for the remote API.

Tests, benchmarks and the demo use it; no production path imports it (the CLI's ``sim`` and
``demo`` commands import it when they run).
"""

from .answers import FINGERPRINT, MODEL, ratings
from .certainty import CERTAINTIES, KINDS, LOGPROB_WIDTH, NOISE_SD, item_certainty, item_digest
from .profiles import PROFILES
from .server import SimServer, make_app, serve
from .settings import SimSettings, SimStats
from .steps import asks_for_steps

__all__ = [
    "CERTAINTIES",
    "FINGERPRINT",
    "KINDS",
    "LOGPROB_WIDTH",
    "MODEL",
    "NOISE_SD",
    "PROFILES",
    "SimServer",
    "SimSettings",
    "SimStats",
    "asks_for_steps",
    "item_certainty",
    "item_digest",
    "make_app",
    "ratings",
    "serve",
]
