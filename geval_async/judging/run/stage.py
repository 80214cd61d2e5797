"""The judge stage's entry points: a study, or a panel's studies, judged with the cache opened
and closed here.

The command line and the library (:func:`geval_async.judge`) both come in here, so neither
opens the cache: they hand over the prepared study and print (or return) the result, which
says what the cache held that did not decode (``corrupted``) besides what the run did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError
from ...study.config import EvalConfig
from ...study.plan import Study
from ..store.cache import JudgeCache
from .panel import PanelRunResult, run_panel
from .runner import RunResult, run_study

__all__ = ["judge_panel", "judge_study", "panel_api_keys"]


async def judge_study(study: Study, *, api_key: str | None, **options: Any) -> RunResult:
    """Judge every item of ``study`` its cache lacks (:func:`~.runner.run_study`, whose
    keyword options ``options`` are), in its cache folder (created if need be)."""
    with JudgeCache(study.config.cache_path) as cache:
        result = await run_study(study, cache, api_key=api_key, **options)
        result.corrupted = len(cache.corrupted)
    return result


async def judge_panel(
    studies: Mapping[str, Study],
    *,
    api_keys: Mapping[str, str | None | ConfigError],
    **options: Any,
) -> PanelRunResult:
    """Judge with every judge of a panel at once (:func:`~.panel_run.run_panel`, whose keyword
    options ``options`` are), in the panel's one cache folder (created if need be)."""
    first = next(iter(studies.values())).config
    with JudgeCache(first.cache_path) as cache:
        result = await run_panel(studies, cache, api_keys=api_keys, **options)
        result.corrupted = len(cache.corrupted)
    return result


def panel_api_keys(config: EvalConfig) -> dict[str, str | None | ConfigError]:
    """Each panel judge's API key (None: a local judge without one), or the ConfigError that
    says it is missing: that judge is not run, and says why; the others are."""
    keys: dict[str, str | None | ConfigError] = {}
    for name, member in zip(config.judge_names, config.members(), strict=True):
        try:
            keys[name] = member.required_api_key()
        except ConfigError as exc:
            keys[name] = exc
    return keys
