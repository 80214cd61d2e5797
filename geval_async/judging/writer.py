"""Write-behind for the hot path: the cache and claim writes of one loop turn share a commit.

At thousands of answers a second, one sqlite transaction per answer (plus one to take and one
to let go of its claim) was most of the client's time. The :class:`Writer` collects what the
workers hand it during one turn of the event loop and, at the end of that turn, does it all
at once: the answers in one cache transaction, then the claims to let go and to take in one
claims transaction (:mod:`.rows`: a few statements for the whole batch).

The order is what makes it crash-safe. A worker waits for :meth:`Writer.release` of its
request, which resolves only after that request's answer (handed over before, with
:meth:`Writer.put`) is committed and the claim is let go. So an answer is on disk before its
item counts as done, before its worker sends anything else, and before another process may ask
for it again; a SIGKILL loses at most the answers of the batch being committed, which were
neither counted nor released (the claims of a dead process are taken over at once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from .cache import CachedResponse, JudgeCache
from .claims import Claims


class Writer:
    """Batches cache puts, claim releases and claims; one per run, made inside the loop."""

    def __init__(self, cache: JudgeCache, claims: Claims) -> None:
        self.cache, self.claims = cache, claims
        self._loop = asyncio.get_running_loop()
        self._puts: list[tuple[CachedResponse, bool]] = []
        self._releases: list[tuple[str, asyncio.Future[None]]] = []
        self._claims: list[tuple[str, asyncio.Future[tuple[bool, bool]]]] = []
        self._scheduled = False
        self._error: BaseException | None = None
        self.batches = 0

    def put(self, entry: CachedResponse, *, overwrite: bool) -> None:
        """Store ``entry`` in the next commit (await :meth:`release` of its key to know)."""
        self._puts.append((entry, overwrite))
        self._schedule()

    def release(self, key: str) -> asyncio.Future[None]:
        """Let go of the claim on ``key`` once everything put before is committed.

        The future raises the commit's CacheError if the answers could not be written.
        """
        done: asyncio.Future[None] = self._loop.create_future()
        self._releases.append((key, done))
        self._schedule()
        return done

    async def claim(self, key: str) -> tuple[bool, bool]:
        """Claim ``key`` (see :meth:`Claims.claim`), with the other claims of this loop turn.

        Returns whether the claim was taken, and whether the cache holds an entry under
        ``key`` by then (a holder may have stored the answer just before it let go).
        """
        taken: asyncio.Future[tuple[bool, bool]] = self._loop.create_future()
        self._claims.append((key, taken))
        self._schedule()
        return await taken

    def claim_now(self, keys: Sequence[str]) -> list[tuple[bool, bool]]:
        """Claim ``keys`` at once, in one transaction, as :meth:`claim` does for one key."""
        taken = self.claims.claim_many(keys)
        stored = self.cache.stored([key for key, held in zip(keys, taken, strict=True) if held])
        return [(held, key in stored) for key, held in zip(keys, taken, strict=True)]

    def flush(self) -> None:
        """Commit everything handed over so far (also called when the run ends)."""
        self._scheduled = False
        puts, self._puts = self._puts, []
        releases, self._releases = self._releases, []
        claims, self._claims = self._claims, []
        if not (puts or releases or claims):
            return
        self.batches += 1
        # A failed commit fails every later waiter too: nothing after it is known to be stored.
        error = self._error
        if puts:
            try:
                self.cache.put_many(puts)
            except Exception as exc:  # noqa: BLE001 - handed to every waiter of this batch
                error = self._error = exc
        # One claims transaction: let go (even when the write failed: nobody should wait on
        # an answer not coming), then take.
        try:
            taken = self.claims.settle([key for key, _ in releases], [key for key, _ in claims])
            stored = self.cache.stored([k for (k, _), t in zip(claims, taken, strict=True) if t])
        except Exception as exc:  # noqa: BLE001
            error = error or exc
            taken, stored = [], set()
        for _, done in releases:
            _settle(done, error, None)
        for index, (key, future) in enumerate(claims):
            if index >= len(taken):
                _settle(future, error, None)
            elif future.done():
                if taken[index]:  # its worker is gone (cancelled): do not keep the claim
                    self.claims.release(key)
            else:
                future.set_result((taken[index], key in stored))

    def _schedule(self) -> None:
        # call_soon runs after every callback already due in this turn: the workers woken by
        # the answers that arrived together all hand over their writes before the commit.
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)


def _settle(future: asyncio.Future[Any], error: BaseException | None, result: Any) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(result)
        return
    future.set_exception(error)
    # Whoever awaits it still gets the error; a waiter that was cancelled meanwhile does not
    # leave a "Future exception was never retrieved" (the run fails with the first one).
    future.exception()
