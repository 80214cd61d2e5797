"""``batch export`` and ``batch import``: files for an engine elsewhere (vLLM ``run-batch``,
another provider's batch service).

:func:`export_inputs` writes what a batch submit would send (:func:`~.files.input_line`,
``custom_id`` = the cache key), chosen by the run's rule of what is left
(:mod:`geval_async.judging.store.left`) for a real engine: the simulated judge's answers are
to send, refused items and the requests a live batch job is asking for are not. The file is written
whole or not at all. :func:`import_outputs` stores such an engine's output file as a collected
batch is stored (:mod:`.store`), after every line has been read: a bad line stores nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import ConfigError
from ...options import JudgeApi
from ...study.plan import JudgeRequest, Study
from ..store.cache import JudgeCache
from ..store.coverage import Coverage
from ..store.left import coverage, what_is_left
from ..store.origin import ServerEntries
from .files import endpoint, input_line, read_output
from .ledger import Ledger
from .store import Stored, one_choice_chunks, requests_by_key, store_lines

__all__ = ["export_inputs", "import_outputs"]


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
                    for request in _lines_of(item.to_send, study):
                        if request.key not in taken:  # a live batch's, or another item's twin
                            taken.add(request.key)
                            handle.write(input_line(request, study.config.judge))
                            lines += 1
            os.replace(temporary, target)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise ConfigError(f"{target}: cannot write the file ({exc})") from exc
    return lines


def _lines_of(to_send: list[JudgeRequest], study: Study) -> list[JudgeRequest]:
    """The requests an item's input lines ask: its next chunk, or on the Responses API (one
    answer a request) every draw it lacks, one line each, as a batch submit sends them."""
    if study.config.judge.api is not JudgeApi.RESPONSES:
        return to_send
    return [c for request in to_send for c in one_choice_chunks(request, study.config)]


def import_outputs(study: Study, source: Path) -> tuple[Stored, dict[str, Coverage]]:
    """Store the answers of an output JSONL produced elsewhere; what storing did, line by line,
    and the study's coverage after it, as a real engine's answers see the cache.

    Raises:
        ConfigError: the file cannot be read, or a line is not an output line (nothing stored).
        CacheError: the cache cannot be written.
    """
    try:
        # Read every line first: a bad line fails before anything is stored.
        parsed = list(read_output(source.read_bytes().splitlines(), str(source)))
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the output file ({exc})") from exc
    with JudgeCache(study.config.cache_path) as cache:
        cache.check_writable()
        # A file from elsewhere holds real answers: simulated entries give way (..origin).
        entries = ServerEntries(cache, False)
        config = study.config
        requests = requests_by_key(
            study,
            entries,
            {line.custom_id for line in parsed},
            one_choice=config.judge.api is JudgeApi.RESPONSES,
        )
        stored = store_lines(
            parsed,
            requests,
            cache,
            url=endpoint(config.judge),
            judge=config.judge_entry,
            sampling=config.sampling_entry,
        )
        return stored, coverage(study, entries, Ledger(cache.directory).live_keys())
