"""Is this a cache folder? The check of every command and function that only reads one.

A folder opened to read only (``JudgeCache(..., create=False)``) reads as an empty cache when it
is missing, which is right for a run's dry run (nothing judged yet) and for ``steps`` (no step
generated yet), and wrong for everything that reports on what a cache holds: read as empty, a
mistyped ``--cache`` would report every item missing. Those (``status``, the scoring stage and
``load_results``, ``answers``, the ``cache`` commands) refuse it with one line, here.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ..errors import ConfigError

__all__ = ["existing_cache"]


def existing_cache(path: Path, source: Path | None = None) -> Path:
    """``path``, when it is a cache folder; else ConfigError saying what is there instead
    (``source``: the study config whose cache it is, named in the command that fills it)."""
    path = Path(path)
    try:
        return _cache_folder(path, source)
    except PermissionError as exc:  # a folder on the way that this user may not search
        raise ConfigError(
            f"{path}: cannot look into the cache folder ({exc.strerror}): ask for read and "
            "search (x) permission on it and on the folders above it, or check --cache"
        ) from exc


def _cache_folder(path: Path, source: Path | None) -> Path:
    if not path.exists():
        config = "CONFIG" if source is None else shlex.quote(str(source))
        raise ConfigError(
            f"{path}: no cache folder there: check --cache (or [cache] path), or run "
            f"`geval-async run {config}` first to fill it"
        )
    if not path.is_dir():
        raise ConfigError(f"{path}: a file, not a cache folder: check --cache (or [cache] path)")
    if not (path / "cache.db").is_file():
        raise ConfigError(f"{path}: not a cache folder (no cache.db); check the path")
    return path
