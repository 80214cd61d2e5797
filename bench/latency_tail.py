"""The latency tail of a paced run: how long after its last send a run ends, on paper.

A client that sends at exactly the limit's rate R sends its last request (N - 1) / R after its
first, and then waits for the slowest of the last answers. With the simulated judge's latency
(lognormal, median 300 ms, sigma 0.5) the run ends ``max over the last sends of (latency -
time between that send and the last one)`` after the last send. This script draws that tail
many times (numpy, no server, no client) for the sends of benchmark 1's requests-bind rows
(100 a second), so section 1 of docs/benchmarks.md can say how much of ``wall / bound`` no
pacing can remove, and what it would take to reach a ratio.

It also models hedging, the one client-side way to shorten the tail without sending faster
than R: after the last send, the free slots of the rate re-send the oldest unanswered request
(one every 1 / R), and the earlier of the two answers counts. The duplicates are requests the
server charges.

    .venv/bin/python bench/latency_tail.py [--rate 100] [--runs 20000] [--hedged-runs 4000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

MEDIAN_S, SIGMA = 0.3, 0.5
LAST_SENDS = 300  # 3 s of sends: an earlier one would need a latency above 3 s to matter


def tails(rng: np.random.Generator, rate: float, runs: int) -> np.ndarray:
    """The tail of ``runs`` endings: last answer minus last send, in seconds."""
    before_last = np.arange(LAST_SENDS)[::-1] / rate
    latency = np.exp(math.log(MEDIAN_S) + SIGMA * rng.standard_normal((runs, LAST_SENDS)))
    return (latency - before_last).max(axis=1)  # type: ignore[no-any-return]


def hedged_tail(rng: np.random.Generator, rate: float) -> tuple[float, int]:
    """One ending with hedging: (tail, duplicates sent)."""
    sent = -np.arange(LAST_SENDS)[::-1] / rate
    done = sent + np.exp(math.log(MEDIAN_S) + SIGMA * rng.standard_normal(LAST_SENDS))
    hedged = np.zeros(LAST_SENDS, dtype=bool)
    duplicates, slot = 0, 1 / rate
    while True:
        waiting = (done > slot) & ~hedged
        if not waiting.any():
            return float(done.max()), duplicates
        oldest = int(np.argmin(np.where(waiting, sent, np.inf)))
        again = slot + math.exp(math.log(MEDIAN_S) + SIGMA * rng.standard_normal())
        done[oldest] = min(done[oldest], again)
        hedged[oldest] = True
        duplicates += 1
        slot += 1 / rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="sends a second (6,000 RPM)")
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--hedged-runs", type=int, default=4_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--budgets",
        default="0.53,0.65",
        help="tails to compare with (s): 30.6 s (1.02 x 30 s) less the measured arrival span "
        "(29.94 s), start and end (0.13 s), and less the span and end alone",
    )
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    quantiles = (0.05, 0.25, 0.5, 0.75, 0.95)
    budgets = [float(b) for b in args.budgets.split(",")]

    plain = tails(rng, args.rate, args.runs)
    hedging = [hedged_tail(rng, args.rate) for _ in range(args.hedged_runs)]
    hedged = np.array([tail for tail, _ in hedging])
    duplicates = np.array([n for _, n in hedging])
    for name, sample in (("paced at the rate", plain), ("paced, then hedged", hedged)):
        shown = ", ".join(f"p{q * 100:.0f} {np.quantile(sample, q):.3f} s" for q in quantiles)
        print(f"{name}: tail {shown}")
        for budget in budgets:
            print(f"  P(tail <= {budget:.2f} s) = {np.mean(sample <= budget):.3f}")
    print(
        f"hedging sent {np.median(duplicates):.0f} duplicates (median; "
        f"p95 {np.quantile(duplicates, 0.95):.0f}) after the last send"
    )


if __name__ == "__main__":
    main()
