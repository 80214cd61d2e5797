"""The figure of judging/wire/limits.py: pacing as the server records it, against a window server.

The same bare aiohttp loop (bench/clients.py ``paced``) sends the same plan to the independent
stub (``bench/stub.py --rpm R``: at most R/60 arrivals in any sliding second, 429 with
``retry-after-ms`` beyond; ``--tpm T`` adds a bucket of one second's worth of tokens), each
POST first waiting for one of three pacers:

* ``geval``: geval-async's ``RateLimits`` with the limits configured (judging/wire/limits.py),
  once for this tree and once for each ``--baseline NAME=FOLDER`` (that folder's
  ``geval_async`` package, e.g. ``git archive REV geval_async | tar -x -C FOLDER``), the
  trees taking turns variant by variant;
* ``aiolimiter``: one ``aiolimiter.AsyncLimiter(R / 60, 1.0)`` a limit (a second's worth of
  capacity, the limiter's documented use) and its public ``acquire(cost)`` only;
* ``aiolimiter-spaced``: ``AsyncLimiter(1, 60 / R)`` for requests (room for one: exact spacing)
  and, for tokens, room for the largest request (``acquire`` refuses a cost above the capacity).

A 429 waits out the stub's ``retry-after-ms`` and the request goes again. Reported: 429s, the
stub's first-to-last admitted arrival over the bound (``arrival_span/bound``, the floor's
figure) and the wall. Results go to ``bench/results/pacers_<R>rpm.json``.

    .venv/bin/python bench/pacers.py [--quick] [--requests 240] [--rpm 600] [--workers 64]
        [--pacers geval] [--baseline NAME=FOLDER] [--rounds 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    StubProcess,
    add_baseline,
    baseline_trees,
    bounds,
    client,
    plan_bodies,
    run_child,
    save,
    table,
    workdir,
    write_study,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=240)
    parser.add_argument("--rpm", type=int, default=600)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--pacers", default="geval")
    parser.add_argument("--rounds", type=int, default=1, help="each row this many times")
    add_baseline(parser, "the geval pacer also from the geval_async package in FOLDER")
    parser.add_argument("--quick", action="store_true", help="80 requests")
    args = parser.parse_args()
    trees = {"this": None, **baseline_trees(parser, args.baseline)}
    contenders = [
        (pacer, tree)
        for pacer in args.pacers.split(",")
        for tree in (trees if pacer == "geval" else ["this"])
    ]
    if args.quick:
        args.requests = 80
    rows = []
    with workdir("pacers") as folder:
        study = write_study(folder / "study", -(-args.requests // 4))
        bodies = folder / "bodies.jsonl"
        plan = plan_bodies(study.config, bodies)
        requests_bound = plan["requests"] / args.rpm * 60
        # T tight: tokens take 1.5 x the requests' time (as bench/rate_limits.py's stub rows).
        variants = {
            "requests bind": None,
            "tokens bind": int(plan["tokens"] / (1.5 * requests_bound) * 60),
        }
        for variant, tpm in variants.items():
            bound = requests_bound if tpm is None else bounds(plan, args.rpm, tpm)[0]
            for pacer, tree in contenders * args.rounds:
                folder_of_tree = trees[tree]
                env = None
                if folder_of_tree is not None:
                    env = {"PYTHONPATH": folder_of_tree, "PYTHONDONTWRITEBYTECODE": "1"}
                with StubProcess(rpm=args.rpm, tpm=tpm, headers="full") as stub:
                    spec = {
                        "base_url": stub.base_url,
                        "bodies": bodies,
                        "criteria": 4,
                        "concurrency": args.workers,
                        "rpm": args.rpm,
                        "tpm": tpm,
                        "pacer": pacer,
                    }
                    report = run_child(client("paced", **spec), env=env).report()
                    stats = stub.stats()
                limited = int(stats["by_status"].get("429", 0))
                rows.append(
                    {
                        "variant": variant,
                        "pacer": pacer,
                        "tree": tree,
                        "workers": args.workers,
                        "requests": plan["requests"],
                        "rpm": args.rpm,
                        "tpm": tpm,
                        "bound_s": round(bound, 3),
                        "wall_s": round(report["wall"], 3),
                        "wall/bound": round(report["wall"] / bound, 4),
                        "arrival_span/bound": round(stats["last_at"] / bound, 4),
                        "429s": limited,
                        "failed": report["failed"],
                        "client_cpu_s": round(report["cpu"], 3),
                    }
                )
                print(table([rows[-1]], list(rows[-1])), flush=True)
    print()
    print(table(rows, list(rows[0])))
    payload = {"settings": vars(args), "trees": trees, "plan": plan, "runs": rows}
    print(f"wrote {save(f'pacers_{args.rpm}rpm', payload)}")


if __name__ == "__main__":
    main()
