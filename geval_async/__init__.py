"""geval-async: concurrent, rate-limited, resumable G-Eval judge runs with offline scoring."""

__version__ = "0.1.0"

__all__ = ["__version__"]
