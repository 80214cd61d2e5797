"""``batch export``: the input file of every request the cache lacks, for an engine elsewhere.

The lines are what a batch submit would send (:func:`~.files.input_line`, ``custom_id`` = the
cache key), chosen by the run's rule of what is left (:mod:`geval_async.judging.left`) for a
real engine: the simulated judge's answers are to send, refused items and the requests a live
batch job is asking for are not. The file is written whole or not at all.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import ConfigError
from ...study.plan import Study
from ..cache import JudgeCache
from ..left import what_is_left
from ..origin import ServerEntries
from .files import input_line
from .ledger import Ledger

__all__ = ["export_inputs"]


def export_inputs(study: Study, target: Path) -> int:
    """Write the input JSONL of every request left to send to ``target``; returns the lines.

    Raises:
        ConfigError: ``target`` cannot be written (nothing is left half-written).
    """
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    lines = 0
    with JudgeCache(study.config.cache_path, create=False) as cache:
        taken = Ledger(cache.directory).live_keys()
        try:
            with open(temporary, "wb") as handle:
                # For a real engine: the simulated judge's answers count as missing (..origin).
                for item in what_is_left(study, ServerEntries(cache, False)):
                    for request in item.to_send:
                        if request.key not in taken:  # a live batch's, or another item's twin
                            taken.add(request.key)
                            handle.write(input_line(request, study.config.judge))
                            lines += 1
            os.replace(temporary, target)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise ConfigError(f"{target}: cannot write the file ({exc})") from exc
    return lines
