"""geval-async: concurrent, rate-limited, resumable G-Eval judge runs with offline scoring.

The names below are imported on first use (PEP 562), so ``geval-async run`` does not pay for
pandas and scipy, which only the scoring stage needs.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "CacheError": "errors",
    "CachedResponse": "cache",
    "ConfigError": "errors",
    "EvalConfig": "config",
    "GevalError": "errors",
    "JudgeCache": "cache",
    "RateLimited": "errors",
    "RatingDistribution": "ratings",
    "RatingParser": "ratings",
    "Rejected": "errors",
    "RunResult": "runner",
    "RunStopped": "errors",
    "Scale": "ratings",
    "Study": "plan",
    "StudyResults": "results",
    "Transient": "errors",
    "TransportError": "errors",
    "apply_overrides": "config",
    "judge": "api",
    "load_config": "config",
    "load_results": "results",
    "meta_evaluate": "meta",
    "prepare_study": "plan",
    "run_study": "runner",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'geval_async' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
