"""A batch session: what every batch step works with, opened together and closed on every path.

The study's cache (writable: the steps store answers and claim requests), its generated
evaluation steps (asked online first: every item's prompt holds them), the provider's client,
this process's claims and the interrupted submits attached (:meth:`~.control.BatchControl.
attach`). ``run --batch`` and ``batch submit|status|collect|cancel`` each run inside one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ...study.plan import Study
from ..run.evaluation_steps import generate_steps
from ..store.cache import JudgeCache
from ..store.claims import Claims
from ..store.origin import ServerEntries
from .control import BatchControl, server_is_simulated
from .provider import make_client

__all__ = ["batch_session"]

# Claims this process takes (while taking over a ledger record) lapse after this.
_CLAIM_TTL = 300.0


@asynccontextmanager
async def batch_session(
    study: Study, api_key: str | None
) -> AsyncIterator[tuple[BatchControl, Claims]]:
    """The study's batch control and this process's claims, ready for a batch step.

    Raises:
        CacheError: the cache folder cannot be written.
    """
    with JudgeCache(study.config.cache_path) as cache:
        cache.check_writable()
        simulated = await server_is_simulated(study, api_key)
        ready, _ = await generate_steps(study, ServerEntries(cache, simulated), api_key)
        async with make_client(ready, api_key) as client:
            control = BatchControl(ready, cache, client, simulated)
            with Claims(cache.directory, _CLAIM_TTL) as claims:
                await control.attach(claims)
                yield control, claims
