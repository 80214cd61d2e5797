"""geval-async: concurrent, rate-limited, resumable G-Eval judge runs with offline scoring."""

from .api import judge
from .cache import CachedResponse, JudgeCache
from .config import EvalConfig, apply_overrides, load_config
from .errors import (
    CacheError,
    ConfigError,
    GevalError,
    RateLimited,
    Rejected,
    RunStopped,
    Transient,
    TransportError,
)
from .plan import Study, prepare_study
from .ratings import RatingDistribution, RatingParser, Scale
from .results import StudyResults, load_results
from .runner import RunResult, run_study

__version__ = "0.1.0"

__all__ = [
    "CacheError",
    "CachedResponse",
    "ConfigError",
    "EvalConfig",
    "GevalError",
    "JudgeCache",
    "RateLimited",
    "RatingDistribution",
    "RatingParser",
    "Rejected",
    "RunResult",
    "RunStopped",
    "Scale",
    "Study",
    "StudyResults",
    "Transient",
    "TransportError",
    "__version__",
    "apply_overrides",
    "judge",
    "load_config",
    "load_results",
    "prepare_study",
    "run_study",
]
