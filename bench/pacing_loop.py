"""The limiter alone, no HTTP: how evenly ``RateLimits.acquire`` lets sends go on this machine.

64 tasks take N sends through geval-async's ``RateLimits`` with the requests limit configured
(and, with ``--tpm``, the tokens limit, criteria of 520, 480, 190 and 530 tokens in turn), each
yielding once after its send as a POST would. Printed: the span of the sends over the bound,
the median and largest gap between two sends, and the CPU seconds. The largest gap is the
longest the process went without sending: on a loaded machine, the stall a limiter that keeps
to a one-second window cannot make up. Run it with ``PYTHONPATH=FOLDER --tree NAME`` to
measure another tree's limiter; each run is added to ``bench/results/pacing_loop_<R>rpm.json``.

    .venv/bin/python bench/pacing_loop.py [--rpm 30000] [--tpm 0] [--sends 3000] [--tree this]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, results_path, save

SIZES = (520, 480, 190, 530)


async def pace(rpm: int, tpm: int | None, sends: int, workers: int) -> dict[str, float]:
    from geval_async.judging.wire.limits import RateLimits

    limits = RateLimits(rpm, tpm)
    limits.replied()
    loop = asyncio.get_running_loop()
    times: list[float] = []
    queue = iter(range(sends))

    async def worker() -> None:
        for i in queue:
            await limits.acquire(SIZES[i % len(SIZES)])
            times.append(loop.time())
            await asyncio.sleep(0)

    cpu = time.process_time()
    await asyncio.gather(*(worker() for _ in range(workers)))
    tokens = sum(SIZES[i % len(SIZES)] for i in range(sends))
    bound = max(sends / rpm, tokens / tpm if tpm else 0.0) * 60
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False))
    return {
        "span/bound": (times[-1] - times[0]) / bound,
        "median_gap_ms": gaps[len(gaps) // 2] * 1e3,
        "largest_gap_ms": gaps[-1] * 1e3,
        "cpu_s": time.process_time() - cpu,
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=int, default=30_000)
    parser.add_argument("--tpm", type=int, default=0, help="0: no tokens limit")
    parser.add_argument("--sends", type=int, default=3_000)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--tree", default="this", help="the name of the tree measured")
    args = parser.parse_args()
    figures = asyncio.run(pace(args.rpm, args.tpm or None, args.sends, args.workers))
    print("  ".join(f"{name} {value:.3f}" for name, value in figures.items()))
    name = f"pacing_loop_{args.rpm}rpm"
    path = results_path(name, False)
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    runs.append({**vars(args), **figures, "when": time.strftime("%Y-%m-%dT%H:%M:%S")})
    RESULTS.mkdir(exist_ok=True)
    save(name, {"runs": runs})


if __name__ == "__main__":
    main()
