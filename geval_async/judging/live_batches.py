"""Where a batch job's live record is kept: the one fact of the batch ledger the claims need.

A claim that names a batch holds while the batch's record is in the ledger
(:mod:`geval_async.judging.batch.ledger`). The claims sit below the batch room, so the path
of that record is defined here, once, and both read it.
"""

from __future__ import annotations

from pathlib import Path

FOLDER = "batches"


def is_live(cache_directory: Path, name: str) -> bool:
    """Whether batch ``name`` has a live record in the ledger of ``cache_directory``."""
    return (Path(cache_directory) / FOLDER / f"{name}.json").exists()
