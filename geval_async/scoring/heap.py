"""Memory the scoring stage has freed, given back to the operating system between its steps.

``score`` of a million items makes large transient arrays step after step (the scoring pass's
heap, the invalid shares' keys, the group tables' cells). Freed, most of them stay resident:
glibc's allocator keeps freed blocks for reuse (a freed large block also raises the size above
which blocks are mapped on their own, so the next ones come from the heap), so each step's
transients add to the resident set the next step starts from. ``malloc_trim(0)`` returns the
free pages of every heap to the system (dask's workers trim their memory the same way); on
another C library it is not there and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache

__all__ = ["give_back_freed_memory"]


@cache
def _trim() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


def give_back_freed_memory() -> None:
    """Return the allocator's free pages to the system (glibc only; else nothing)."""
    trim = _trim()
    if trim is not None:
        trim(0)  # type: ignore[operator]
