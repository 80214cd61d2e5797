"""A study's input files checked for what they are before they are opened.

A config, a prompt template, a part's file or a records file is read whole or line by line, so
a path that names anything but a regular file is refused before it is opened: a FIFO would
block the command on its ``open`` until something writes to it, and a device such as
``/dev/zero`` never ends, so reading it fills the memory before any check can see a byte.
"""

from __future__ import annotations

import stat
from pathlib import Path

__all__ = ["file_problem"]

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as an input file ("not found", "a FIFO (named pipe), not a
    file", "cannot be reached (permission denied)"), or None when it is a regular file."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "not found"
    except NotADirectoryError:
        return "not found (a folder on its path is a file)"
    except OSError as exc:
        return f"cannot be reached ({(exc.strerror or str(exc)).lower()})"
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"is {kind}, not a file"
