"""Claims on requests in flight, shared by every process that uses one cache folder.

Two runs of the same plan on one cache (two terminals, two notebook kernels, a job array)
would otherwise both send every request neither has stored yet. Before a worker sends a
request it claims the request's key with an atomic ``add`` in a small diskcache next to the
answers (``<cache>/claims``). A key another live process holds is not sent: the worker waits
for that process's answer to appear in the cache instead. A claim names its process and
host and lapses after a time-to-live that each attempt renews, so the claims of a killed run
never block the run that resumes it: a claim whose process is gone on this host is taken
over at once, and one from another host after it lapses.

The same claims make one run send a request once even when two items render the very same
request (identical records): the second waits for the first's answer.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path

import diskcache
import orjson

from ..errors import CacheError

_HOST = socket.gethostname()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


class Claims:
    """The claims folder of a cache. ``with Claims(cache_dir, ttl) as claims: ...``."""

    def __init__(self, cache_directory: Path, ttl: float) -> None:
        self.ttl = ttl
        self._mine = orjson.dumps({"pid": os.getpid(), "host": _HOST})
        self._held: set[str] = set()
        self.directory = Path(cache_directory) / "claims"
        try:
            # Claims are short-lived coordination, not results: no fsync on every change.
            self._cache = diskcache.Cache(str(self.directory), sqlite_synchronous=0, timeout=60)
        except (OSError, sqlite3.Error) as exc:
            raise self._error(exc) from exc

    def __enter__(self) -> Claims:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for key in list(self._held):
            self.release(key)
        self._cache.close()

    def claim(self, key: str) -> bool:
        """Claim ``key`` for this process; False when another live claim holds it."""
        try:
            if key in self._held:
                return False  # this process is already asking (an identical request)
            if self._cache.add(key, self._mine, expire=self.ttl):
                self._held.add(key)
                return True
            holder = self._cache.get(key)
            if holder is None:
                # It lapsed between add and get.
                taken = bool(self._cache.add(key, self._mine, expire=self.ttl))
            elif self._stale(holder):
                self._cache.set(key, self._mine, expire=self.ttl)
                taken = True
            else:
                taken = False
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            raise self._error(exc) from exc
        if taken:
            self._held.add(key)
        return taken

    def renew(self, key: str) -> None:
        """Extend this process's claim on ``key`` by the time-to-live (once per attempt)."""
        try:
            self._cache.touch(key, expire=self.ttl)
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            raise self._error(exc) from exc

    def release(self, key: str) -> None:
        """Give up the claim on ``key`` (its answer is stored, or this process gave up)."""
        self._held.discard(key)
        try:
            self._cache.delete(key)
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            raise self._error(exc) from exc

    def _error(self, exc: Exception) -> CacheError:
        return CacheError(
            f"{self.directory.parent}: cannot write to the cache ({exc}, in its claims folder); "
            "free space or fix permissions, then run again to resume"
        )

    @staticmethod
    def _stale(holder: object) -> bool:
        try:
            owner = orjson.loads(holder)  # type: ignore[arg-type]
            pid, host = int(owner["pid"]), owner["host"]
        except (TypeError, ValueError, KeyError, orjson.JSONDecodeError):
            return True  # unreadable: nobody can be relying on it
        return host == _HOST and not _alive(pid)
