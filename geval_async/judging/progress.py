"""Run counters and the progress line.

:class:`RunCounters` is what the runner updates and what the summary reports: per criterion,
items done (from the cache or newly answered), refused, failed and still missing; per run,
requests sent, tokens, 429s and retries by kind. :func:`render_progress` turns them into one
line: done / from cache / failed, requests and tokens per minute, 429s and the ETA.
"""

from __future__ import annotations

import time
from collections import Counter, deque
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
    requests_cached: int = 0
    tokens: int = 0
    rate_limited: int = 0
    retries: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0
    peak_in_flight: int = 0
    simulated: bool = False
    started: float = field(default_factory=time.monotonic)
    # Answers and tokens per second of the last minute: [second, answers, tokens] (a deque of
    # one entry per answer held 200,000 tuples at 3,500 answers a second).
    _recent: deque[list[int]] = field(default_factory=deque)

    def total(self) -> CriterionCounts:
        out = CriterionCounts()
        for c in self.criteria.values():
            out.items += c.items
            out.cached += c.cached
            out.answered += c.answered
            out.rejected += c.rejected
            out.failed += c.failed
        return out

    def record_answer(self, tokens: int) -> None:
        second = int(time.monotonic())
        self.requests_sent += 1
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


def render_progress(counters: RunCounters, *, width: int = 24) -> str:
    """One progress line, e.g. ``[######----] 812/1920 cached 400 failed 0 | 95 rpm ...``."""
    total = counters.total()
    finished = total.done + total.rejected + total.failed
    fraction = finished / total.items if total.items else 1.0
    bar = "#" * int(fraction * width) + "-" * (width - int(fraction * width))
    rpm, tpm = counters.rates()
    elapsed = time.monotonic() - counters.started
    new = total.answered + total.rejected + total.failed
    remaining = total.items - finished
    eta = "--"
    if new and remaining and elapsed > 0:
        eta = _clock(remaining * elapsed / new)
    elif not remaining:
        eta = "0s"
    return (
        f"[{bar}] {finished}/{total.items} items | new {total.answered} "
        f"cached {total.cached} failed {total.rejected + total.failed} | "
        f"{rpm:.0f} req/min {tpm:.0f} tok/min | 429s {counters.rate_limited} | "
        f"{_clock(elapsed)} ETA {eta}"
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

    @property
    def complete(self) -> bool:
        """Whether every item of the plan has all its answers."""
        total = self.counters.total()
        return total.done == total.items
