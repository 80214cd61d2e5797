"""Benchmark 6, peers side by side: the same plan, the same simulated judge, the same limits.

The judge enforces 6,000 requests/min (tokens loose) over a 2 s bucket and answers after a
lognormal latency (median 300 ms, sigma 0.5); the plan is 3,000 requests (750 records x 4
criteria, n = 10). Contenders, each in a fresh process against a fresh server:

* geval-async with the limits configured, and with none (learned from the headers);
* ``gather``: ``asyncio.gather`` over ``openai.AsyncOpenAI`` under ``asyncio.Semaphore(64)``,
  the SDK's default retries (what most people write today);
* ``sequential``: the original G-Eval loop (one request at a time, 0.5 s pause after each,
  2 s pause and retry on a rate-limit error). It needs ~0.85 s per request, so it runs on a
  slice (default 100 requests) and its time and CPU are extrapolated linearly to the plan.

Reported: wall time, 429s the server sent, items without an answer, client CPU seconds (the
work only, imports excluded). With ``--buckets 2,60`` the sim's default 60 s bucket is added:
there the first minute may burst, so a client that ignores the limit can finish this plan
sooner than the limit allows on average; the 2 s bucket is the fair comparison.

    .venv/bin/python bench/peers.py [--quick] [--slice 100] [--buckets 2,60]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    SimProcess,
    bounds,
    client,
    plan_bodies,
    run_child,
    save,
    server_429s,
    table,
    workdir,
    write_study,
)

LATENCY_MS, SIGMA = 300, 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3_000)
    parser.add_argument("--rpm", type=int, default=6_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--slice", type=int, default=100, help="requests the sequential loop is timed on"
    )
    parser.add_argument("--buckets", default="2,60")
    parser.add_argument("--quick", action="store_true", help="600 requests, slice 10, 2 s bucket")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.slice, args.buckets = 600, 10, "2"
    criteria = ("coh", "con", "flu", "rel")

    rows: list[dict[str, Any]] = []
    with workdir("peers") as folder:
        study = write_study(folder / "study", -(-args.requests // len(criteria)), criteria=criteria)
        bodies = folder / "bodies.jsonl"
        plan = plan_bodies(study.config, bodies)
        # Tokens loose (they would take 0.6 x the requests' time): the requests limit binds.
        tpm = int(plan["tokens"] / (0.6 * plan["requests"] / args.rpm))
        bound, _ = bounds(plan, args.rpm, tpm)
        for bucket in (float(b) for b in args.buckets.split(",")):
            contenders = [
                ("geval-async (limits configured)", "geval", {"rpm": args.rpm, "tpm": tpm}),
                ("geval-async (limits learned)", "geval", {}),
                ("asyncio.gather + AsyncOpenAI", "gather", {}),
            ]
            if bucket == float(args.buckets.split(",")[0]):
                contenders.append(("original G-Eval loop", "sequential", {"limit": args.slice}))
            for label, name, extra in contenders:
                with SimProcess(
                    latency_ms=LATENCY_MS,
                    latency_sigma=SIGMA,
                    rpm=args.rpm,
                    tpm=tpm,
                    bucket_seconds=bucket,
                ) as sim:
                    spec = {
                        "config": study.config,
                        "base_url": sim.base_url,
                        "bodies": bodies,
                        "concurrency": args.concurrency,
                        "cache": folder / f"cache-{len(rows)}",
                        "output": folder / f"out-{len(rows)}.json",
                        **extra,
                    }
                    report = run_child(client(name, **spec), timeout=7200).report()
                    stats = sim.stats()
                sent = report["sent"] if name != "geval" else plan["requests"]
                scale = plan["requests"] / sent
                row = {
                    "bucket_s": bucket,
                    "contender": label,
                    "measured_on": sent,
                    "wall_s": report["wall"] * scale,
                    "wall/bound": report["wall"] * scale / bound,
                    "429s": int(server_429s(stats) * scale),
                    "failed_items": int(report["failed"] * scale),
                    "answered": int((sent - report["failed"]) * scale),
                    "cpu_s": report["cpu"] * scale,
                    "extrapolated": scale != 1,
                }
                rows.append(row)
                print(table([row], list(row)), flush=True)

    ours = {r["bucket_s"]: r for r in rows if r["contender"] == "geval-async (limits configured)"}
    for row in rows:
        base = ours[row["bucket_s"]]
        row["wall_x_geval"] = row["wall_s"] / base["wall_s"]
        row["cpu_x_geval"] = row["cpu_s"] / base["cpu_s"] if base["cpu_s"] else None
    columns = [
        "bucket_s",
        "contender",
        "measured_on",
        "wall_s",
        "wall/bound",
        "wall_x_geval",
        "429s",
        "answered",
        "failed_items",
        "cpu_s",
        "cpu_x_geval",
        "extrapolated",
    ]
    print()
    print(
        f"plan: {plan['requests']} requests, {plan['tokens']} tokens; limits {args.rpm} rpm, "
        f"{tpm} tpm; bound {bound:.1f} s"
    )
    print(table(rows, columns))
    path = save(
        "peers",
        {
            "settings": {
                **vars(args),
                "tpm": tpm,
                "latency_ms": LATENCY_MS,
                "latency_sigma": SIGMA,
            },
            "plan": plan,
            "bound_s": bound,
            "runs": rows,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
