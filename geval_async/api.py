"""The library's front door for notebooks: judge a study, then load its results.

    >>> import geval_async as ga
    >>> run = await ga.judge("examples/ueq/config.toml", base_url="http://127.0.0.1:8000/v1")
    >>> results = ga.load_results("examples/ueq/config.toml")
    >>> results.table("con"), results.composite(), results.comparisons()

``judge`` is a coroutine, so it runs inside the notebook's own event loop (top-level ``await``);
a script calls ``asyncio.run(ga.judge(...))``. The scoring side is plain synchronous Python.
"""

from __future__ import annotations

import os
from typing import Any

from .errors import ConfigError
from .judging.cache import JudgeCache
from .judging.plan import prepare_study
from .judging.runner import RunResult, run_study
from .study.config import EvalConfig, apply_overrides, load_config


async def judge(
    config: EvalConfig | str | os.PathLike[str], *, retry_failed: bool = False, **overrides: Any
) -> RunResult:
    """Run the judge stage of a study: every request the cache lacks is sent and stored.

    Args:
        config: a loaded config or the path of its TOML file.
        retry_failed: ask again for requests the cache holds as refused.
        overrides: as on the command line (base_url, model, cache, concurrency, rpm, tpm, n,
            mode, criteria, limit, ...).
    """
    if not isinstance(config, EvalConfig):
        config = load_config(config)
    config = apply_overrides(config, **overrides)
    study = prepare_study(config)
    key = config.judge.api_key()
    if key is None and not config.judge.is_local:
        raise ConfigError(f"no API key: set the environment variable {config.judge.api_key_env}")
    with JudgeCache(config.cache_path) as cache:
        return await run_study(study, cache, api_key=key, retry_failed=retry_failed)
