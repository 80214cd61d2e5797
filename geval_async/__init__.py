"""geval-async: concurrent, rate-limited, resumable G-Eval judge runs with offline scoring.

The names below are imported on first use (PEP 562), so ``geval-async run`` does not pay for
pandas and scipy, which only the scoring stage needs.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.3.0"

_EXPORTS = {
    "CacheError": "errors",
    "CachedResponse": "judging.cache",
    "ConfigError": "errors",
    "EvalConfig": "study.config",
    "GevalError": "errors",
    "JudgeCache": "judging.cache",
    "JudgeFile": "study.settings",
    "PanelResults": "scoring.panel_results",
    "RateLimited": "errors",
    "RatingDistribution": "scoring.ratings",
    "RatingParser": "scoring.ratings",
    "Reading": "scoring.ratings",
    "Reason": "scoring.ratings",
    "Rejected": "errors",
    "PanelRunResult": "judging.panel_run",
    "RunResult": "judging.runner",
    "RunStopped": "errors",
    "Scale": "scoring.ratings",
    "Study": "study.plan",
    "StudyResults": "scoring.results",
    "Transient": "errors",
    "TransportError": "errors",
    "apply_overrides": "study.config",
    "html_report": "api",
    "judge": "api",
    "load_config": "study.config",
    "load_panel": "scoring.panel_results",
    "load_results": "api",
    "meta_evaluate": "meta.evaluate",
    "prepare_study": "study.prepare",
    "read_answers": "api",
    "run_study": "judging.runner",
    "shipped": "study.shipped",
    "write_html_report": "scoring.outputs",
    "write_outputs": "scoring.outputs",
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
