"""Output files written whole or not at all: a temporary file beside each, renamed into place.

A file is given as its bytes or, when it is large (the raw exports of a study of many records),
as what writes it while it is rendered; those are staged in their temporary files before any
file is renamed, so a failure while rendering leaves every output as it was.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ...errors import ConfigError
from ..scores.results import give_back_freed_memory

__all__ = ["Output", "write_atomic", "write_files"]


@dataclass(frozen=True)
class Output:
    """One file to write: where, and its whole content, or what writes it (``write``: a
    large file, the raw exports of many records, written as it is rendered)."""

    path: Path
    data: bytes = b""
    write: Callable[[BinaryIO], None] | None = None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes | Callable[[BinaryIO], object]) -> Path:
    """Write ``data`` (or what the writer ``data`` writes) to ``path`` via a temporary file in
    the same folder and a rename.

    The file gets the permissions any new file of the user gets (0666 less the umask), not
    the 0600 of a temporary file: colleagues on a shared server can read the results.
    """
    return _stage(path, data)()


def _stage(path: Path, data: bytes | Callable[[BinaryIO], object]) -> Callable[[], Path]:
    """Fill a temporary file beside ``path``; what renames it into place (or, called with
    ``keep=False``, removes it)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data) if isinstance(data, bytes) else data(file)
            os.chmod(temporary, 0o666 & ~_umask())
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        raise _unwritable(path, exc) from exc

    def commit(keep: bool = True) -> Path:
        try:
            os.replace(temporary, path) if keep else os.unlink(temporary)
        except OSError as exc:
            raise _unwritable(path, exc) from exc
        return path

    return commit


def _unwritable(path: Path, exc: OSError) -> ConfigError:
    return ConfigError(
        f"{path}: cannot write the output file ({exc.strerror}); "
        "check [output] path or pass --output"
    )


def write_files(outputs: Iterable[Output]) -> list[Path]:
    """Write rendered outputs, each atomically; returns their paths. Those written as they
    are rendered (``write``) are staged first: a failure in one leaves every file as it was."""
    outputs = list(outputs)
    staged: dict[int, Callable[..., Path]] = {}
    try:
        for number, output in enumerate(outputs):
            if output.write is not None:
                staged[number] = _stage(output.path, output.write)
                give_back_freed_memory()  # what rendering it left, before the next (.heap)
        return [
            staged.pop(i)() if i in staged else write_atomic(o.path, o.data)
            for i, o in enumerate(outputs)
        ]
    finally:
        for commit in staged.values():
            commit(keep=False)
