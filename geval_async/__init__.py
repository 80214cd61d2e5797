"""geval-async: concurrent, rate-limited, resumable G-Eval judge runs with offline scoring.

The names below are imported on first use (PEP 562), so ``geval-async run`` does not pay for
pandas and scipy, which only the scoring stage needs.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.3.0"

# The whole public API: judge a study, read its results, report, meta-evaluate, and the errors
# a caller catches. Everything else is imported from its own module.
_EXPORTS = {
    "ConfigError": "errors",
    "Criterion": "notebook",
    "GevalError": "errors",
    "RunResult": "judging.run.runner",
    "StudyResults": "scoring.scores.results",
    "aevaluate": "notebook",
    "evaluate": "notebook",
    "html_report": "api",
    "judge": "api",
    "load_results": "api",
    "meta_evaluate": "meta.evaluate",
    "read_answers": "api",
    "write_outputs": "scoring.output.writer",
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
