"""A batch run in rounds: submit what the queue has room for, poll, collect what ended, and
submit the next files as earlier ones finish, until nothing is left to submit or wait for.

A round is: submit (when the queue had no room for everything, or a batch came back refused
for the queue limit, and something ended since), poll every live batch, collect each one that
ended (:meth:`~.control.BatchControl.collect`: a refused one is put back in line and teaches
the limit, :mod:`.queue`), then sleep. Every step is written to the ledger first, so a SIGKILL
anywhere leaves a run that the next command picks up where it stopped: the live batches are
polled and collected, and only requests in no live batch are submitted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from ...study.pricing import Budget
from ..store.claims import Claims
from .control import BatchControl
from .ledger import BatchRecord
from .store import Stored


@dataclass
class BatchRun:
    """What a batch run did: the batches collected, what was stored, what the budget held
    back (each submit's batches go to ``on_submitted`` as they are made; the requests too
    large for the queue are :attr:`BatchControl.too_large`)."""

    collected: list[BatchRecord] = field(default_factory=list)
    stored: Stored = field(default_factory=Stored)
    held_back: int = 0  # by the budget, at the last submit


async def run_batches(
    control: BatchControl,
    claims: Claims,
    *,
    poll_seconds: float,
    budget: Callable[[], Budget | None],
    on_submitted: Callable[[list[BatchRecord], int], None] | None = None,
    on_progress: Callable[[list[BatchRecord]], None] | None = None,
) -> BatchRun:
    """Submit, wait and collect in rounds until no batch is live and nothing fits or waits.

    Args:
        control: the batch control of the study.
        claims: the claims of this process.
        poll_seconds: the sleep between rounds in which nothing ended.
        budget: a fresh budget for each submit (what the study's spend leaves).
        on_submitted: told the batches each submit made and how many the budget held back.
        on_progress: told the live batches after each poll.
    """
    run = BatchRun()
    submit = True
    while True:
        if submit:
            records, run.held_back = await control.submit(claims, budget=budget())
            if on_submitted is not None:
                on_submitted(records, run.held_back)
        requeued, resend = run.stored.requeued, run.stored.resend
        records = await control.poll()
        if on_progress is not None:
            on_progress(records)
        ended = [record for record in records if record.ended]
        for record in ended:
            run.stored.add(await control.collect(record, claims))
            run.collected.append(record)
        if run.stored.stopped is not None:
            return run  # a setting every request gets wrong: no more batches (see .store)
        # Room freed up (or the limit became known), or lines refused for what the endpoint
        # has now taught (the budget's name, n = 1): the next files go in now.
        freed = control.queue_full or run.stored.requeued > requeued
        submit = bool(ended) and (freed or run.stored.resend > resend)
        if not submit and all(record.ended for record in records):
            return run
        if not ended:
            await asyncio.sleep(poll_seconds)
