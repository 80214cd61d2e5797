"""Benchmark 2, client overhead: geval-async against a bare aiohttp loop on a free server.

A zero-latency, unlimited simulated judge; a 20,000-request plan (5,000 records x 4
criteria, n = 10) and an empty cache. geval-async (``run_study``) and a bare aiohttp loop that
POSTs the same pre-encoded bodies with the same number of workers take turns, each in a fresh
process against a fresh server; the ratio of their requests per second is the figure (floor:
0.5). Client CPU seconds per request are reported too: on 2 cores client and server share the
machine, so CPU per request is the steadier measure of what the client costs.

    .venv/bin/python bench/overhead.py [--quick] [--requests N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import SimProcess, client, plan_bodies, run_child, save, table, workdir, write_study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="2,000 requests, one round")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.rounds = 2_000, 1
    criteria = ("coh", "con", "flu", "rel")
    records = -(-args.requests // len(criteria))

    rows = []
    with workdir("overhead") as folder:
        study = write_study(folder / "study", records, criteria=criteria)
        bodies = folder / "bodies.jsonl"
        plan = plan_bodies(study.config, bodies)
        for round_ in range(args.rounds):
            # Alternate who goes first, so a slow phase of the machine hits both.
            order = ("bare", "geval") if round_ % 2 == 0 else ("geval", "bare")
            for name in order:
                with SimProcess() as sim:
                    spec = {
                        "base_url": sim.base_url,
                        "concurrency": args.concurrency,
                        "bodies": bodies,
                        "config": study.config,
                        "cache": folder / f"cache-{round_}",
                    }
                    child = run_child(client(name, **spec))
                    report = child.report()
                    stats = sim.stats()
                assert stats["received"] == plan["requests"], (name, stats)
                assert report["failed"] == 0, report
                rows.append(
                    {
                        "round": round_,
                        "contender": name,
                        "requests": plan["requests"],
                        "wall_s": report["wall"],
                        "req_per_s": plan["requests"] / report["wall"],
                        "cpu_s": report["cpu"],
                        "cpu_ms_per_req": 1000 * report["cpu"] / plan["requests"],
                        "maxrss_mb": report["maxrss_mb"],
                    }
                )
                print(table([rows[-1]], list(rows[-1])), flush=True)

    def median(name: str, column: str) -> float:
        return statistics.median(r[column] for r in rows if r["contender"] == name)

    ratio = median("geval", "req_per_s") / median("bare", "req_per_s")
    cpu_ratio = median("geval", "cpu_ms_per_req") / median("bare", "cpu_ms_per_req")
    summary = {
        "throughput_ratio": ratio,
        "floor": 0.5,
        "passed": ratio >= 0.5,
        "cpu_per_request_ratio": cpu_ratio,
        "geval_req_per_s": median("geval", "req_per_s"),
        "bare_req_per_s": median("bare", "req_per_s"),
    }
    print()
    print(
        table(
            rows,
            [
                "round",
                "contender",
                "requests",
                "wall_s",
                "req_per_s",
                "cpu_ms_per_req",
                "maxrss_mb",
            ],
        )
    )
    print(
        f"\ngeval-async / bare aiohttp throughput: {ratio:.2f} (floor 0.5); "
        f"client CPU per request: {cpu_ratio:.2f} x bare"
    )
    path = save(
        "overhead", {"settings": vars(args), "plan": plan, "runs": rows, "summary": summary}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
