"""Benchmark 1, rate-limit efficiency: how close a run gets to the time the limits allow.

On the project's simulated judge: it enforces R requests/min and T tokens/min (two token
buckets, a request costing its prompt tokens plus ``max_tokens x n``), answers after a
lognormal latency (median 300 ms, sigma 0.5) and advertises its limits in ``x-ratelimit-*``
headers. The plan is 3,000 requests (750 records x 4 G-Eval criteria, n = 10). No client can
finish sooner than

    bound = max(requests / R, tokens / T)

without going over the limits, so wall / bound is the figure. Two variants: R = 6,000 with T
loose (requests bind, bound 30 s) and T tight (tokens bind, bound 45 s). Each is run with the
limits configured in the client (floor: wall <= 1.02 x bound) and with no limits configured,
so the client must learn them from the headers (floor: <= 1.10 x bound); 429s <= 1 % of the
requests in both. The fluency prompt carries no source text, so it is cheaper in tokens; the
client sends the plan record by record (criteria interleaved), so the plain bound is the one
to meet (``in_order_bound_s``, the bound of a client sending criterion by criterion, is
reported for comparison). 64 workers: at 300 ms a request, 16 could not reach 100 a second.

On the independent stub (``bench/stub.py``): 600 requests/min enforced over any one second
(at most 10 arrivals in a sliding second), zero latency, ``x-ratelimit-limit/remaining/reset``
headers, 240 requests, at 16 and 64 workers, limits learned and configured; requests bind (no
tokens limit, bound 24 s) and tokens bind (a bucket of one second's worth of T tokens/min,
T such that tokens take 1.5 x the requests' time: bound 36 s). This is where the start and
any burst show: a client that sends a full pool before it has read a header, or two requests
where the limit leaves room for one, meets 429s at once. ``arrival_span/bound`` is the stub's
own clock, first arrival to last admitted: the pacing without the client's start and end.

On the simulated judge, both processes read one monotonic clock, so the wall splits at the
server's first and last admitted arrivals and its last answer: ``start_s`` (the client's
setup and first send), ``arrival_span/bound`` (the limiter's pace, as on the stub), ``tail_s``
(the server's latency after the last send, which no client pacing at the limit can remove)
and ``end_s``. One more run, requests binding and limits configured, has a 60 s bound (6,000
requests, ``--long-requests``): the same pace, the start and the tail weigh half. It is
reported beside the 30 s row, not judged in its place.

The simulated server's bucket holds ``bucket_seconds`` of quota. With 60 s the first minute
may burst; OpenAI enforces its per-minute limits over much shorter windows, so the runs use a
2 s bucket (``--buckets 2,60`` adds the 60 s bucket, reported but not judged).

    .venv/bin/python bench/rate_limits.py [--quick] [--buckets 2] [--concurrency 64]
        [--servers sim,stub] [--long-requests 6000]
        [--stub-rpm 600] [--stub-requests 240] [--stub-workers 16,64] [--baseline-tree FOLDER]

A run of the stub alone writes ``rate_limits_stub_<R>rpm.json`` (``..._side_by_side.json`` with
``--baseline-tree``, whose tree takes turns with this one row by row).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    ROOT,
    SimProcess,
    StubProcess,
    StudyFiles,
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
    parser.add_argument("--buckets", default="2", help="server bucket sizes in seconds")
    parser.add_argument("--servers", default="sim,stub")
    parser.add_argument("--stub-requests", type=int, default=240)
    parser.add_argument("--stub-rpm", type=int, default=600)
    parser.add_argument("--stub-workers", default="16,64")
    parser.add_argument(
        "--long-requests",
        type=int,
        default=6_000,
        help="one more run, requests binding, limits configured, of this many requests "
        "(a 60 s bound at 6,000 RPM; 0: none): how the ratio depends on the run's length",
    )
    parser.add_argument(
        "--baseline-tree",
        metavar="FOLDER",
        help="the stub rows also run, each right after its own, with the geval_async package "
        "found in FOLDER (e.g. `git archive REV geval_async | tar -x -C FOLDER`): a "
        "before/after comparison side by side",
    )
    parser.add_argument("--quick", action="store_true", help="600 requests, 2 s bucket only")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="compare the configured variant with geval_async/limits.py as of "
        "git revision REV; "
        "writes results/rate_limits_baseline.json",
    )
    args = parser.parse_args()
    if args.quick:
        args.requests, args.buckets, args.stub_requests = 600, "2", 120
        args.long_requests = min(args.long_requests, 1_200)
    buckets = [float(b) for b in args.buckets.split(",")]
    criteria = ("coh", "con", "flu", "rel")

    modes = ["configured", "learned"]
    rows: list[dict[str, Any]] = []
    with workdir("rate") as folder:
        old_limits: tuple[Path, str] | None = None
        if args.baseline:
            source, package = _old_limits(args.baseline)
            old_limits = (folder / "limits_baseline.py", package)
            old_limits[0].write_bytes(source)
            modes = ["configured", f"configured, limits.py@{args.baseline}"]
        study = write_study(folder / "study", -(-args.requests // len(criteria)), criteria=criteria)
        plan = plan_bodies(study.config, folder / "bodies.jsonl")
        requests_bound = plan["requests"] / args.rpm * 60
        variants = {
            # T loose: tokens would take 0.6 x the requests' time.
            "requests bind": int(plan["tokens"] / (0.6 * requests_bound) * 60),
            # T tight: tokens take 1.5 x the requests' time.
            "tokens bind": int(plan["tokens"] / (1.5 * requests_bound) * 60),
        }
        for bucket in buckets if "sim" in args.servers else []:
            for variant, tpm in variants.items():
                for mode in modes:
                    rows.append(
                        _sim_row(
                            args,
                            study,
                            plan,
                            folder / f"cache-{len(rows)}",
                            bucket,
                            variant,
                            tpm,
                            mode,
                            old_limits,
                        )
                    )
        if args.long_requests and "sim" in args.servers and not args.baseline:
            # The same pace for twice as long: the start and the latency tail weigh half.
            long_study = write_study(
                folder / "long-study", -(-args.long_requests // len(criteria)), criteria=criteria
            )
            long_plan = plan_bodies(long_study.config, folder / "long-bodies.jsonl")
            long_bound = long_plan["requests"] / args.rpm * 60
            tpm = int(long_plan["tokens"] / (0.6 * long_bound) * 60)
            row = _sim_row(
                args,
                long_study,
                long_plan,
                folder / "cache-long",
                buckets[0],
                "requests bind",
                tpm,
                "configured",
                None,
            )
            row["variant"] = f"requests bind, {long_bound:.0f} s run"
            row["passed"] = None  # reported beside the 30 s row, not in its place
            rows.append(row)

        if not args.baseline and "stub" in args.servers:
            rows += _stub_runs(args, folder)

    columns = [
        "server",
        "tree",
        "workers",
        "bucket_s",
        "variant",
        "client_limits",
        "bound_s",
        "in_order_bound_s",
        "wall_s",
        "wall/bound",
        "wall/in_order",
        "setup_s",
        "run/bound",
        "start_s",
        "arrival_span/bound",
        "tail_s",
        "tail/bound",
        "end_s",
        "floor",
        "429s",
        "429_pct",
        "failed",
        "peak_in_flight",
        "passed",
    ]
    print()
    print(table(rows, columns))
    # A run of one server does not replace the file of both (rate_limits_sim.json).
    servers = sorted(set(args.servers.split(",")))
    name = "rate_limits" if servers == ["sim", "stub"] else "_".join(["rate_limits", *servers])
    if servers == ["stub"]:
        name += f"_{args.stub_rpm}rpm"
    if args.baseline_tree:
        name += "_side_by_side"
    path = save(
        "rate_limits_baseline" if args.baseline else name,
        {
            "settings": {**vars(args), "latency_ms": LATENCY_MS, "latency_sigma": SIGMA},
            "plan": plan,
            "runs": rows,
        },
    )
    print(f"wrote {path}")


def _sim_row(
    args: argparse.Namespace,
    study: StudyFiles,
    plan: dict[str, Any],
    cache: Path,
    bucket: float,
    variant: str,
    tpm: int,
    mode: str,
    old_limits: tuple[Path, str] | None,  # limits.py of another revision, and its package
) -> dict[str, Any]:
    """One run against the simulated judge: its figures, split at the server's arrivals."""
    bound, in_order = bounds(plan, args.rpm, tpm)
    configured = mode.startswith("configured")
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
            "cache": cache,
            "concurrency": args.concurrency,
            "rpm": args.rpm if configured else None,
            "tpm": tpm if configured else None,
            "limits_module": old_limits[0] if old_limits and "@" in mode else None,
            "limits_package": old_limits[1] if old_limits else None,
        }
        report = run_child(client("geval", **spec)).report()
        stats = sim.stats()
    limited = server_429s(stats)
    floor = 1.02 if configured else 1.10
    ratio = report["wall"] / bound
    row = {
        "server": "sim",
        "workers": args.concurrency,
        "bucket_s": bucket,
        "variant": variant,
        "client_limits": mode,
        "requests": plan["requests"],
        "tokens": plan["tokens"],
        "rpm": args.rpm,
        "tpm": tpm,
        "bound_s": bound,
        "in_order_bound_s": in_order,
        "wall_s": report["wall"],
        "wall/bound": ratio,
        "wall/in_order": report["wall"] / in_order,
        # Before run_study: reading the study and making the plan.
        "setup_s": report["wall"] - report["run_elapsed"],
        "run/bound": report["run_elapsed"] / bound,
        **_phases(report, stats["timeline"], bound),
        "floor": floor,
        "429s": limited,
        "429_pct": 100 * limited / plan["requests"],
        "failed": report["failed"],
        "peak_in_flight": report["peak_in_flight"],
        "client_cpu_s": report["cpu"],
    }
    row["passed"] = (
        (ratio <= floor and report["complete"] and row["429_pct"] <= 1.0) if bucket < 60 else None
    )  # the 60 s bucket is reported, not judged
    print(table([row], list(row)), flush=True)
    return row


def _phases(report: dict[str, Any], timeline: dict[str, Any], bound: float) -> dict[str, float]:
    """The client's wall split at the simulated judge's first and last arrivals and last answer.

    Both processes read the same monotonic clock (Linux), so ``start_s + span + tail_s +
    end_s`` is the wall: the client's start (setup, imports inside the run, the probe, the
    first send), the limiter's pace (``arrival_span/bound``: first arrival to the last one
    admitted, the server's own clock, as on the stub), the server's latency after the last
    send (``tail_s``: last answer minus last admitted arrival) and the client's end (reading
    and storing the last answer, closing).
    """
    first, last = timeline["first_arrival"], timeline["last_admitted"]
    answered = timeline["last_answered"]
    return {
        "start_s": first - report["started_monotonic"],
        "arrival_span/bound": (last - first) / bound,
        "tail_s": answered - last,
        "tail/bound": (answered - last) / bound,
        "end_s": report["ended_monotonic"] - answered,
    }


def _stub_runs(args: argparse.Namespace, folder: Path) -> list[dict[str, Any]]:
    """The independent stub with a one-second window: learned and configured, 16 and 64 workers,
    requests bind (no tokens limit) and tokens bind (a one-second bucket of T/60 tokens)."""
    study = write_study(folder / "stub-study", -(-args.stub_requests // 4))
    plan = plan_bodies(study.config, folder / "stub-bodies.jsonl")
    requests = plan["requests"]
    requests_bound = requests / args.stub_rpm * 60
    variants = {
        "requests bind": None,
        # T tight: tokens take 1.5 x the requests' time.
        "tokens bind": int(plan["tokens"] / (1.5 * requests_bound) * 60),
    }
    rows: list[dict[str, Any]] = []
    for variant, tpm in variants.items():
        bound = requests_bound if tpm is None else bounds(plan, args.stub_rpm, tpm)[0]
        for workers in (int(w) for w in args.stub_workers.split(",")):
            trees = ["this", "baseline"] if args.baseline_tree else ["this"]
            for mode, tree in ((m, t) for m in ("configured", "learned") for t in trees):
                configured = mode == "configured"
                env = None
                if tree == "baseline":
                    env = {"PYTHONPATH": args.baseline_tree, "PYTHONDONTWRITEBYTECODE": "1"}
                with StubProcess(rpm=args.stub_rpm, tpm=tpm, headers="full") as stub:
                    spec = {
                        "config": study.config,
                        "base_url": stub.base_url,
                        "cache": folder / f"stub-cache-{len(rows)}",
                        "concurrency": workers,
                        "rpm": args.stub_rpm if configured else None,
                        "tpm": tpm if configured else None,
                    }
                    report = run_child(client("geval", **spec), env=env).report()
                    stats = stub.stats()
                limited = int(stats["by_status"].get("429", 0))
                floor = 1.02 if configured else 1.10
                row = {
                    "server": "stub",
                    "tree": tree,
                    "workers": workers,
                    "bucket_s": 1.0,
                    "variant": variant,
                    "client_limits": mode,
                    "requests": requests,
                    "tokens": plan["tokens"],
                    "rpm": args.stub_rpm,
                    "tpm": tpm,
                    "bound_s": bound,
                    "wall_s": report["wall"],
                    "wall/bound": report["wall"] / bound,
                    "setup_s": report["wall"] - report["run_elapsed"],
                    "run/bound": report["run_elapsed"] / bound,
                    # The server's own clock: from the first arrival to the last one admitted.
                    "arrival_span/bound": stats["last_at"] / bound,
                    "floor": floor,
                    "429s": limited,
                    "429_pct": 100 * limited / requests,
                    "first_429_s": stats["limited_at"][0] if stats["limited_at"] else None,
                    "failed": report["failed"],
                    "peak_in_flight": report["peak_in_flight"],
                    "client_cpu_s": report["cpu"],
                }
                row["passed"] = (
                    row["wall/bound"] <= floor and report["complete"] and row["429_pct"] <= 1.0
                )
                rows.append(row)
                print(table([row], list(row)), flush=True)
    return rows


def _old_limits(revision: str) -> tuple[bytes, str]:
    """limits.py as it was at ``revision``: under judging/ since the stages got their rooms."""
    for path in (
        "geval_async/judging/wire/limits.py",
        "geval_async/judging/limits.py",
        "geval_async/limits.py",
    ):
        shown = subprocess.run(["git", "show", f"{revision}:{path}"], cwd=ROOT, capture_output=True)
        if shown.returncode == 0:
            # The package it is loaded into decides what its relative imports reach.
            package = "geval_async.judging" if "judging" in path else "geval_async"
            return shown.stdout, package
    sys.exit(f"--baseline {revision}: no limits.py at that revision")


if __name__ == "__main__":
    main()
