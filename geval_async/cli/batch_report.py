"""What the batch commands print: batches submitted and collected, the table of live batch
jobs with the queue's files and tokens, the progress line of ``run --batch``, and the coverage
with its exit code. Printing only; :mod:`geval_async.cli.batch` parses and runs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping

from ..judging.batch.control import BatchControl
from ..judging.batch.ledger import BatchRecord
from ..judging.batch.queue import QueueLimit, file_stage, queued_tokens
from ..judging.batch.store import Stored
from ..judging.store.coverage import Coverage
from ..study.plan import Study
from .summary import coverage_table, table

EXIT_OK, EXIT_INCOMPLETE = 0, 1


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def report_submitted(records: list[BatchRecord], held_back: int) -> None:
    for record in records:
        print(f"submitted batch {record.label}: {record.requests} requests, {record.tokens} tokens")
    if held_back:
        print(f"budget: {held_back} requests held back by --max-cost; raise it to submit them")


def report_collected(records: list[BatchRecord], stored: Stored) -> None:
    for record in records:
        if record.queue_refusal is not None:
            print(
                f"batch {record.label} refused for the queue limit: {record.requests} requests "
                "back in line (submitted again when room frees up, by `run --batch` or "
                "`batch submit`)"
            )
            continue
        print(
            f"batch {record.label} {record.status}: "
            + ", ".join(f"{count} {what}" for what, count in record.outcome.items() if count)
        )
        if record.errors:
            print(f"batch {record.label} failed validation: {record.errors[0]}")
    if records:
        report_stored(stored, "batches")


def report_stored(stored: Stored, source: str) -> None:
    print(
        f"stored from {source}: {stored.answered} answers, {stored.refused} refusals; "
        f"{stored.already} already in the cache; {stored.missing} left missing"
        + (
            ""
            if not stored.reasons
            else " ("
            + ", ".join(f"{reason} {count}" for reason, count in stored.reasons.most_common(4))
            + ")"
        )
    )


def report_too_large(control: BatchControl) -> None:
    if control.too_large:
        print(
            f"{control.too_large} requests are larger than the whole batch queue "
            f"({control.queue().describe()}): judge them online with `geval-async run "
            f"{control.study.config.source}`"
        )


def batch_table(records: list[BatchRecord]) -> str:
    rows: list[list[object]] = [
        [r.label, file_stage(r), r.status or r.state, r.requests, r.tokens, r.completed, r.failed]
        for r in records
    ]
    header = ["batch", "file", "status", "requests", "tokens", "completed", "failed"]
    return table(header, rows)


def queue_line(records: list[BatchRecord], queue: QueueLimit, collected: int) -> str:
    """Files queued, running and finished, and the tokens queued against the limit."""
    stages = [file_stage(r) for r in records]
    return (
        f"files: {stages.count('queued')} queued, {stages.count('running')} running, "
        f"{stages.count('finished')} finished, {collected} collected; "
        f"tokens queued: {queued_tokens(records):,}, {queue.describe()}"
    )


def progress_printer(*, quiet: bool, started: float) -> Callable[[list[BatchRecord]], None]:
    interactive = sys.stderr.isatty()

    def show(records: list[BatchRecord]) -> None:
        if quiet:
            return
        live = [r for r in records if not r.ended]
        done = sum(r.completed + r.failed for r in records)
        total = sum(r.requests for r in records)
        statuses = ", ".join(sorted({str(r.status) for r in live})) or "ended"
        elapsed = int(time.monotonic() - started)
        line = (
            f"batches: {len(live)} live ({statuses}) | {done}/{total} requests done | "
            f"{queued_tokens(records):,} tokens queued | "
            f"{elapsed // 60}m{elapsed % 60:02d}s"
        )
        if interactive:
            print("\r\033[K" + line, end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    return show


def coverage_exit(study: Study, counts: Mapping[str, Coverage], held_back: int) -> int:
    """Print the coverage (as the batch's server sees the cache); the exit code it makes."""
    print(coverage_table(counts))
    missing = sum(c.missing for c in counts.values())
    refused = sum(c.refused for c in counts.values())
    in_batch = sum(c.in_batch for c in counts.values())
    if missing or held_back:
        say(
            f"{missing} items have no answer yet: finish them online with `geval-async run "
            f"{study.config.source}` or in another batch with `run --batch`"
        )
    if in_batch:
        say(f"{in_batch} items are in live batch jobs")
    return EXIT_OK if not (missing or refused or in_batch) else EXIT_INCOMPLETE
