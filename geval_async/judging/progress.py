"""Run counters and the progress line.

:class:`RunCounters` is what the runner updates and what the summary reports: per criterion,
items done (from the cache or newly answered), refused, failed and still missing; per run,
requests sent, tokens, 429s and retries by kind. :func:`render_progress` turns them into one
line that fits an 80-column terminal: done / from cache / failed, requests and tokens per
minute, 429s, retries with the last error, and the ETA.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class CriterionCounts:
    """Per-criterion item outcomes of one run."""

    items: int = 0
    cached: int = 0
    answered: int = 0
    rejected: int = 0
    failed: int = 0

    @property
    def done(self) -> int:
        return self.cached + self.answered

    @property
    def missing(self) -> int:
        return self.items - self.done - self.rejected - self.failed


@dataclass
class RunCounters:
    """Everything a run counts; the source of the progress line and the summary."""

    criteria: dict[str, CriterionCounts] = field(default_factory=dict)
    requests_sent: int = 0
    tokens: int = 0
    rate_limited: int = 0
    retries: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0
    peak_in_flight: int = 0
    simulated: bool = False
    last_retry: str = ""  # the failure of the latest retry, e.g. "connection refused"
    # The latest pause a failure asked for: until when (time.monotonic()) and why.
    wait_until: float = 0.0
    wait_reason: str = ""
    # Choices of this run's answers that hold no rating to read, by why ("content null"),
    # and the ones that hold something: "every answer unusable" is said, not scored as 0.
    unusable: Counter[str] = field(default_factory=Counter)
    usable: int = 0
    # Answers whose body names a model other than the one asked (not a dated snapshot of
    # it), by the name served.
    served: Counter[str] = field(default_factory=Counter)
    asked_model: str = ""
    in_batch: int = 0  # items skipped because a live batch job holds their requests
    started: float = field(default_factory=time.monotonic)
    # Answers and tokens per second of the last minute: [second, answers, tokens] (a deque of
    # one entry per answer held 200,000 tuples at 3,500 answers a second).
    _recent: deque[list[int]] = field(default_factory=deque, repr=False)  # a minute of sends

    def total(self) -> CriterionCounts:
        out = CriterionCounts()
        for c in self.criteria.values():
            out.items += c.items
            out.cached += c.cached
            out.answered += c.answered
            out.rejected += c.rejected
            out.failed += c.failed
        return out

    def note_retry(self, label: str) -> None:
        """Count a retry of kind ``label`` ("429", "http 503", "connection refused", ...)."""
        self.retries[label] += 1
        self.last_retry = label

    def note_wait(self, seconds: float, reason: str) -> None:
        """A pause of ``seconds`` begins now, for ``reason`` ("429, Retry-After 30")."""
        until = time.monotonic() + seconds
        if until >= self.wait_until or self.wait_left() == 0:
            self.wait_until, self.wait_reason = until, reason

    def wait_left(self) -> float:
        """Seconds left in the latest pause (0: none)."""
        return max(0.0, self.wait_until - time.monotonic())

    def waiting(self) -> str:
        """ "waiting 28 s: 429, Retry-After 30" while a pause of a second or more runs, else ""."""
        left = self.wait_left()
        if left < 1.0:
            return ""
        return f"waiting {f'{left:.0f} s' if left < 60 else _clock(left)}: {self.wait_reason}"

    def every_answer_unusable(self) -> str:
        """ "8 x content null, 2 x no logprobs" when no answer of this run had anything to
        read, else ""."""
        if self.usable or not self.unusable:
            return ""
        return ", ".join(f"{count} x {why}" for why, count in self.unusable.most_common())

    @property
    def retried(self) -> int:
        return sum(self.retries.values())

    def record_answer(self, tokens: int) -> None:
        """Count an answer (the request was counted in ``requests_sent`` when it went out)."""
        second = int(time.monotonic())
        self.tokens += tokens
        recent = self._recent
        if recent and recent[-1][0] == second:
            recent[-1][1] += 1
            recent[-1][2] += tokens
        else:
            recent.append([second, 1, tokens])
            # A one-minute window gives rates a user can compare with their RPM/TPM limits.
            while recent[0][0] < second - 60:
                recent.popleft()

    def rates(self) -> tuple[float, float]:
        """Requests and tokens per minute over the last minute (or since the start)."""
        now = time.monotonic()
        recent = [r for r in self._recent if r[0] >= now - 60.0]
        if not recent:
            return 0.0, 0.0
        span = min(60.0, max(1.0, now - self.started))
        per_minute = 60.0 / span
        return (
            sum(r[1] for r in recent) * per_minute,
            sum(r[2] for r in recent) * per_minute,
        )


# The line is printed with "\r" on a terminal: wider than this, it wraps and scrolls.
LINE_WIDTH = 79


def render_progress(counters: RunCounters, *, width: int = LINE_WIDTH) -> str:
    """One progress line of at most ``width`` characters, e.g.
    ``[####----] 812/1920 new 400 cached 412 failed 0 | 95 req/min | 429s 0 | 1m02s ETA 2m``.

    While requests are being retried it says how many retries and the last error.
    """
    total = counters.total()
    finished = total.done + total.rejected + total.failed
    fraction = finished / total.items if total.items else 1.0
    rpm, tpm = counters.rates()
    elapsed = time.monotonic() - counters.started
    new = total.answered + total.rejected + total.failed
    remaining = total.items - finished
    eta = "--"
    if new and remaining and elapsed > 0:
        eta = _clock(remaining * elapsed / new)
    elif not remaining:
        eta = "0s"
    head = (
        f"{finished}/{total.items} new {total.answered} cached {total.cached} "
        f"failed {total.rejected + total.failed}"
    )
    parts = [head, f"{rpm:.0f} req/min", f"{_tokens(tpm)} tok/min", f"429s {counters.rate_limited}"]
    waiting = counters.waiting()
    if waiting:  # why nothing moves says more than the retries so far
        parts.append(waiting)
    elif counters.retried:
        parts.append(f"retries {counters.retried} (last: {counters.last_retry})")
    parts.append(f"{_clock(elapsed)} ETA {eta}")
    # Drop what matters least until the line fits: tokens, (while waiting, the request
    # rate), then the 429s, then the bar.
    for drop in (2, 1, 3) if waiting else (2, 3):
        if len(" | ".join(parts)) + 12 <= width:
            break
        parts[drop] = ""
    line = " | ".join(p for p in parts if p)
    bar_width = min(24, width - len(line) - 3)
    if bar_width >= 5:
        filled = int(fraction * bar_width)
        line = f"[{'#' * filled}{'-' * (bar_width - filled)}] {line}"
    return line[:width]


def _tokens(per_minute: float) -> str:
    if per_minute >= 10_000:
        return f"{per_minute / 1000:.0f}k"
    return f"{per_minute:.0f}"


def render_retries(counters: RunCounters) -> str:
    """The retry part of the progress line on its own (for ``--quiet``)."""
    total = counters.total()
    finished = total.done + total.rejected + total.failed
    waiting = counters.waiting()
    return (
        f"retrying: {counters.retried} retries so far (last: {counters.last_retry}); "
        f"{finished}/{total.items} items done" + (f"; {waiting}" if waiting else "")
    )


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


@dataclass
class RunResult:
    """What a run did: counts, why it stopped early (if it did) and sample failures."""

    counters: RunCounters
    stopped: str | None = None
    interrupted: bool = False
    failures: Counter[str] = field(default_factory=Counter)
    elapsed: float = 0.0
    endpoint: str | None = None  # what the endpoint accepts, as learned ("gpt-5-mini at ...")
    billed: float | None = None  # USD the answers' usage reported (None: the model has no price)
    warnings: list[str] = field(default_factory=list)  # lines said during the run (on_warning)

    @property
    def complete(self) -> bool:
        """Whether every item of the plan has all its answers."""
        total = self.counters.total()
        return total.done == total.items


async def report_progress(
    counters: RunCounters,
    on_progress: Callable[[str], None] | None,
    on_retries: Callable[[str], None] | None,
    interval: float,
) -> None:
    """Every ``interval`` seconds: the progress line, or (quiet) a line when retries grew."""
    reported = 0
    while True:
        await asyncio.sleep(interval)
        if on_progress is not None:
            on_progress(render_progress(counters))
        elif on_retries is not None and counters.retried > reported:
            reported = counters.retried
            on_retries(render_retries(counters))
