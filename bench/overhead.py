"""Benchmark 2, client overhead: geval-async against a bare aiohttp loop on two free servers.

Two zero-latency, unlimited servers: the project's simulated judge (``sim``) and an independent
plain aiohttp.web stub that answers every request with one fixed 10-choice body
(``bench/stub.py``, ``stub``). The plan is 8,000 requests (2,000 records x 4 criteria, n = 10,
about 2.5 kB a body) and an empty cache. geval-async (``run_study``, with its cache and
cross-process claims) and a bare aiohttp loop that POSTs the same pre-encoded bodies with the
same number of workers take turns, each in a fresh process against a fresh server, at 16 and
64 workers; the ratio of their requests per second is the figure (floor: 0.85). Client CPU
seconds per request are reported too: on 2 cores client and server share the machine, so CPU
per request is the steadier measure of what the client costs.

    .venv/bin/python bench/overhead.py [--quick] [--requests N] [--rounds R] [--workers 16,64]
        [--servers sim,stub] [--contenders bare,geval]

Two more knobs answer "what bounds the ratio": ``--servers stub+250`` is the stub spending 250
us of CPU on each request (``bench/stub.py --work-us``), a server a little less bare than the
fixed-body one; ``--contenders bare,geval,geval-nostore`` adds geval-async with its answer
store and claims turned off (analysis only, see bench/clients.py).

Before and after in one run: ``--baseline NAME=FOLDER`` (FOLDER holding another tree's
``geval_async``, e.g. ``git archive REV geval_async | tar -x -C FOLDER``) adds the contender
``geval-NAME``, geval run by the same bench/clients.py with that tree's package on its
``PYTHONPATH``; with ``geval-nostore`` among the contenders it adds ``geval-nostore-NAME`` too,
that tree's loop without its stores. They take their turns with the others, alternating, and the
floor is still computed against ``bare`` only:

    .venv/bin/python bench/overhead.py --servers stub+250 --workers 16,64 \
        --contenders bare,geval,geval-nostore --baseline base=/tmp/base

Where the client's CPU goes, in each row (and their medians in the summary), from the
contender's own report (bench/clients.py, bench/thread_clocks.py); per request, as
``cpu_ms_per_req``:

* ``loop_cpu_ms_per_req``: the event loop's thread (the main thread), aiohttp's parse included;
* ``writer_cpu_ms_per_req``: the ``geval-writer`` thread (sqlite commits of answers and claims);
* ``other_cpu_ms_per_req``: every other thread (the default executor: a host name's lookup);
* ``vcsw_per_req`` / ``ivcsw_per_req``: the process's voluntary context switches (a thread
  waits: an epoll with nothing ready, a thread hand-off) and involuntary ones (the kernel takes
  the core for another process) a request; ``loop_vcsw_per_req`` /
  ``loop_ivcsw_per_req`` the loop thread's own;
* ``first_request_s``: seconds from the contender's clock start to the server's first arrival,
  and ``after_last_s`` from the server's last answer to the clock's end (both on
  ``time.monotonic()``, which client and server processes share on Linux): the run's fixed
  costs inside the clock (for geval: preparing the study, opening the cache, the probe,
  claims, writer and connection setup; closing the writer, claims and capabilities).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    add_baseline,
    baseline_trees,
    client,
    plan_bodies,
    run_child,
    save,
    server,
    table,
    workdir,
    write_study,
)

FLOOR = 0.85  # against the free servers
WORKING_SERVER_FLOOR = 0.90  # against a stub that spends CPU a request (stub+W)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8_000)
    parser.add_argument("--workers", default="16,64")
    parser.add_argument("--servers", default="sim,stub")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--contenders",
        default="bare,geval",
        help="bare, geval, and geval-nostore (analysis: geval with its stores turned off)",
    )
    parser.add_argument("--quick", action="store_true", help="2,000 requests, one round")
    add_baseline(
        parser,
        "adds the contender geval-baseline (geval-NAME): geval with the geval_async package "
        "found in FOLDER (e.g. `git archive REV geval_async | tar -x -C FOLDER`), a before/after "
        "comparison in one run, and geval-nostore-NAME when geval-nostore is a contender; may be "
        "given more than once, each with its own NAME",
    )
    parser.add_argument(
        "--save-as",
        help="the results file's name under bench/results/ (default: overhead for the floor's "
        "servers and contenders, overhead_sweep for any other choice)",
    )
    args = parser.parse_args()
    if args.quick:
        args.requests, args.rounds = 2_000, 1
    criteria = ("coh", "con", "flu", "rel")
    contenders = args.contenders.split(",")
    if "bare" not in contenders:
        parser.error("--contenders: include bare, the loop every ratio is measured against")
    trees = {}  # contender -> (the folder of its geval_async, the client it runs)
    for label, tree in baseline_trees(parser, args.baseline).items():
        trees[f"geval-{label}"] = (tree, "geval")
        if "geval-nostore" in contenders:
            trees[f"geval-nostore-{label}"] = (tree, "geval-nostore")
    contenders += list(trees)
    records = -(-args.requests // len(criteria))

    rows = []
    with workdir("overhead") as folder:
        study = write_study(folder / "study", records, criteria=criteria)
        bodies = folder / "bodies.jsonl"
        plan = plan_bodies(study.config, bodies)
        for round_ in range(args.rounds):
            for kind in args.servers.split(","):
                for workers in (int(w) for w in args.workers.split(",")):
                    # Alternate who goes first, so a slow phase of the machine hits both.
                    order = contenders if round_ % 2 == 0 else contenders[::-1]
                    for name in order:
                        rows.append(
                            _one(name, kind, workers, round_, study, bodies, folder, plan, trees)
                        )
                        shown = [c for c in rows[-1] if c != "threads"]
                        print(table([rows[-1]], shown), flush=True)

    def median(name: str, kind: str, workers: int, column: str) -> float:
        values = [
            r[column]
            for r in rows
            if (r["contender"], r["server"], r["workers"]) == (name, kind, workers)
            and r[column] is not None
        ]
        return statistics.median(values) if values else None  # type: ignore[return-value]

    summary = []
    for kind in args.servers.split(","):
        floor = WORKING_SERVER_FLOOR if kind.startswith("stub+") else FLOOR
        for workers in (int(w) for w in args.workers.split(",")):
            bare = median("bare", kind, workers, "req_per_s")
            for name in (c for c in contenders if c != "bare"):
                geval = median(name, kind, workers, "req_per_s")
                # Per round too: the ratio of the two runs that went one after the other.
                pairs = [
                    g["req_per_s"] / b["req_per_s"]
                    for g in rows
                    for b in rows
                    if g["contender"] == name
                    and b["contender"] == "bare"
                    and (g["server"], g["workers"], g["round"]) == (kind, workers, b["round"])
                    and (b["server"], b["workers"]) == (kind, workers)
                ]
                summary.append(
                    {
                        "server": kind,
                        "workers": workers,
                        "contender": name,
                        "bare_req_per_s": bare,
                        "req_per_s": geval,
                        "ratio": geval / bare,
                        "ratio_per_round": [round(p, 3) for p in pairs],
                        "cpu_per_request_ratio": median(name, kind, workers, "cpu_ms_per_req")
                        / median("bare", kind, workers, "cpu_ms_per_req"),
                        "bare_cpu_ms": median("bare", kind, workers, "cpu_ms_per_req"),
                        "cpu_ms": median(name, kind, workers, "cpu_ms_per_req"),
                        "server_cpu_ms": median("bare", kind, workers, "server_cpu_ms_per_req"),
                        **{
                            column: median(name, kind, workers, column) for column in _WHERE_COLUMNS
                        },
                        "floor": floor,
                        "passed": geval / bare >= floor,
                    }
                )
    print()
    columns = [
        "round",
        "server",
        "workers",
        "contender",
        "wall_s",
        "req_per_s",
        "cpu_ms_per_req",
        "server_cpu_ms_per_req",
    ]
    print(table(rows, columns + ["maxrss_mb", "load_1m"]))
    print()
    print(table(rows, ["round", "server", "workers", "contender", *_WHERE_COLUMNS]))
    print()
    print(table(summary, [c for c in summary[0] if c not in ("ratio_per_round", *_WHERE_COLUMNS)]))
    print()
    print(table(summary, ["server", "workers", "contender", *_WHERE_COLUMNS]))
    # The floor's run keeps its file; another choice of servers or contenders gets its own.
    default = (args.servers, args.contenders) == ("sim,stub", "bare,geval")
    path = save(
        args.save_as or ("overhead" if default else "overhead_sweep"),
        {"settings": vars(args), "plan": plan, "runs": rows, "summary": summary},
    )
    print(f"wrote {path}")


# Where the client's CPU and wall go (see the module's docstring), per row and in the summary.
_WHERE_COLUMNS = (
    "loop_cpu_ms_per_req",
    "writer_cpu_ms_per_req",
    "other_cpu_ms_per_req",
    "vcsw_per_req",
    "ivcsw_per_req",
    "loop_vcsw_per_req",
    "loop_ivcsw_per_req",
    "first_request_s",
    "after_last_s",
)


def _where(report: dict, stats: dict, requests: int) -> dict:  # type: ignore[type-arg]
    """The columns of _WHERE_COLUMNS from a contender's report and the server's stats."""
    timeline = stats.get("timeline") or {}
    first, answered = timeline.get("first_arrival"), timeline.get("last_answered")
    return {
        "loop_cpu_ms_per_req": 1000 * report["loop_cpu"] / requests,
        "writer_cpu_ms_per_req": 1000 * report["writer_cpu"] / requests,
        "other_cpu_ms_per_req": 1000 * report["other_cpu"] / requests,
        "vcsw_per_req": report["voluntary_switches"] / requests,
        "ivcsw_per_req": report["involuntary_switches"] / requests,
        "loop_vcsw_per_req": report["loop_voluntary_switches"] / requests,
        "loop_ivcsw_per_req": report["loop_involuntary_switches"] / requests,
        "first_request_s": None if first is None else first - report["started_monotonic"],
        "after_last_s": None if answered is None else report["ended_monotonic"] - answered,
        "threads": report["threads"],
    }


def _one(name, kind, workers, round_, study, bodies, folder, plan, trees):  # type: ignore[no-untyped-def]
    with server(kind) as judge:
        spec = {
            "base_url": judge.base_url,
            "concurrency": workers,
            "bodies": bodies,
            "config": study.config,
            "cache": folder / f"cache-{name}-{kind}-{workers}-{round_}",
        }
        server_cpu = judge.cpu_seconds()
        if name in trees:
            tree, kind_of_client = trees[name]
            env = {"PYTHONPATH": tree, "PYTHONDONTWRITEBYTECODE": "1"}
            report = run_child(client(kind_of_client, **spec), env=env).report()
        else:
            report = run_child(client(name, **spec)).report()
        stats = judge.stats()
        if server_cpu is not None:
            server_cpu = judge.cpu_seconds() - server_cpu  # type: ignore[operator]
    assert stats["received"] == plan["requests"], (name, stats)
    assert report["failed"] == 0, report
    return {
        "round": round_,
        "server": kind,
        "workers": workers,
        "contender": name,
        "requests": plan["requests"],
        "wall_s": report["wall"],
        "req_per_s": plan["requests"] / report["wall"],
        "cpu_s": report["cpu"],
        "cpu_ms_per_req": 1000 * report["cpu"] / plan["requests"],
        "maxrss_mb": report["maxrss_mb"],
        "load_1m": round(os.getloadavg()[0], 2),  # the machine's, as the run ended
        **_where(report, stats, plan["requests"]),
        # What the server spent on the same requests: when it is less than the client's own
        # CPU per request, the client is what bounds the rate, bare loop included.
        "server_cpu_ms_per_req": None
        if server_cpu is None
        else 1000 * server_cpu / plan["requests"],
    }


if __name__ == "__main__":
    main()
