"""Generated evaluation steps as the cache holds them: read, never asked for, here.

The judge stage asks for a criterion's steps once (:mod:`geval_async.judging.run.evaluation_steps`)
and stores
the answer like any other; every later reader (a rerun, a shard, ``status``, the scoring
stage, ``geval-async steps``) finds it under the same key
(:mod:`geval_async.study.evaluation_steps`) and
renders the criterion's form with it.
"""

from __future__ import annotations

from typing import Protocol

from ...errors import ConfigError
from ...options import StepsOrigin
from ...study.definition import Steps
from ...study.evaluation_steps import StepsRequest, answer_steps, steps_requests, with_steps
from ...study.plan import Study
from .stored import CachedResponse

__all__ = ["read_steps", "require_steps"]


class _Entries(Protocol):
    def get(self, key: str) -> CachedResponse | None: ...


def read_steps(study: Study, entries: _Entries) -> tuple[Study, list[StepsRequest]]:
    """The study with every generated step the cache holds in place, and the steps requests
    still to send (none answered, or refused: a refusal is asked again)."""
    found: dict[str, Steps] = {}
    missing = []
    for request in steps_requests(study):
        entry = entries.get(request.key)
        text = answer_steps(entry.body) if entry is not None and entry.ok else None
        if entry is None or text is None:
            missing.append(request)
            continue
        found[request.criterion] = Steps(
            StepsOrigin.GENERATED,
            text,
            key=request.key,
            time=entry.time,
            simulated=entry.simulated,
        )
    return with_steps(study, found), missing


def require_steps(study: Study, entries: _Entries) -> Study:
    """The study with its generated steps read from the cache.

    Raises:
        ConfigError: a criterion's steps are not in the cache (say to run ``run`` first).
    """
    filled, missing = read_steps(study, entries)
    if missing:
        config = study.config
        raise ConfigError(
            f"{config.source}: criterion {missing[0].criterion!r} has no evaluation steps in "
            f"the cache {config.cache_path}: run `geval-async run {config.source}` first "
            "(it asks the judge for them once)"
        )
    return filled
