"""The progress line a run prints: its counters (:class:`~geval_async.judging.run.progress.
RunCounters`) rendered for an 80-column terminal.

One line: done / from cache / failed, requests and tokens per minute, 429s, a pause a server
asked for or the retries with the last error, and the ETA; ``--quiet`` prints only the
retries, when they grow.
"""

from __future__ import annotations

import time

from ..judging.run.progress import RunCounters

__all__ = ["LINE_WIDTH", "render_progress", "render_retries", "waiting_text"]


def waiting_text(counters: RunCounters) -> str:
    """ "waiting 28 s: 429, Retry-After 30" while a pause of a second or more runs, else ""."""
    left = counters.wait_left()
    if left < 1.0:
        return ""
    return f"waiting {f'{left:.0f} s' if left < 60 else _clock(left)}: {counters.wait_reason}"


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
    if counters.round > 1:  # draws spent by need: the items still drawing, round by round
        head = f"round {counters.round}: {head}"
    parts = [head, f"{rpm:.0f} req/min", f"{_tokens(tpm)} tok/min", f"429s {counters.rate_limited}"]
    waiting = waiting_text(counters)
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
    waiting = waiting_text(counters)
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
