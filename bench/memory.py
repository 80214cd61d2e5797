"""Benchmark 5, memory: a 400,000-request plan runs in under 150 MB (peak RSS of the client).

100,000 tiny records x 4 criteria, n = 1, against a zero-latency unlimited simulated judge, with
``geval-async run CONFIG --quiet`` as a user runs it (a fresh process; its peak RSS from
``os.wait4``), then the same command again on the full cache (a rerun: every entry read,
nothing sent). The resident set is sampled every 2 s to show whether it grows with the plan,
and the RSS of a process that only imports the CLI is reported alongside (what the run itself
adds is the difference). ``--n 10`` asks ten answers in each request; ``--score`` then runs
``score`` on the full cache too (its peak RSS and CPU seconds).

    .venv/bin/python bench/memory.py [--quick] [--records 100000] [--concurrency 64]
        [--n 1] [--score]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, SimProcess, run_child, save, table, workdir, write_study

FLOOR_MB = 150


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="5,000 records (20,000 requests)")
    parser.add_argument("--n", type=int, default=1, help="answers asked in each request")
    parser.add_argument("--score", action="store_true", help="then score the full cache")
    args = parser.parse_args()
    if args.quick:
        args.records = 5_000

    imports = run_child([PYTHON, "-c", "import geval_async.cli.app"])
    with workdir("memory") as folder, SimProcess() as sim:
        study = write_study(folder / "study", args.records, n=args.n, max_tokens=2, tiny=True)
        command = [
            PYTHON,
            "-m",
            "geval_async",
            "run",
            str(study.config),
            "--quiet",
            "--base-url",
            sim.base_url,
            "--concurrency",
            str(args.concurrency),
        ]
        run = run_child(command, rss_every=2.0, timeout=7200)
        stats = sim.stats()
        rerun = run_child(command, timeout=7200)
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        assert sim.stats()["received"] == stats["received"], "the rerun sent requests"
        scored = None
        if args.score:
            scored = run_child([PYTHON, "-m", "geval_async", "score", str(study.config)])
            assert scored.returncode == 0, scored.stdout + scored.stderr
        cache_mb = sum(p.stat().st_size for p in study.cache.rglob("*") if p.is_file()) / 2**20
    assert run.returncode == 0, run.stdout + run.stderr
    assert stats["received"] == study.requests, stats
    samples = run.rss_samples
    quarter = (
        [samples[min(len(samples) - 1, int(len(samples) * q))][1] for q in (0.25, 0.5, 0.75, 1.0)]
        if samples
        else []
    )
    row = {
        "requests": study.requests,
        "wall_s": run.wall,
        "req_per_s": study.requests / run.wall,
        "peak_rss_mb": run.maxrss_mb,
        "floor_mb": FLOOR_MB,
        "passed": max(run.maxrss_mb, rerun.maxrss_mb) < FLOOR_MB,
        "rerun_peak_rss_mb": rerun.maxrss_mb,
        "rerun_wall_s": rerun.wall,
        "import_only_rss_mb": imports.maxrss_mb,
        "run_adds_mb": run.maxrss_mb - imports.maxrss_mb,
        "rss_at_25_50_75_100pct": quarter,
        "cpu_s": run.cpu,
        "cpu_ms_per_request": 1000 * run.cpu / study.requests,
        "rerun_cpu_s": rerun.cpu,
        "cache_mb": round(cache_mb, 1),
    }
    if scored is not None:
        row |= {"score_peak_rss_mb": scored.maxrss_mb, "score_cpu_s": scored.cpu}
    print(table([row], [k for k in row if k != "rss_at_25_50_75_100pct"]))
    print(f"RSS at 25/50/75/100 % of the run (MB): {quarter}")
    path = save("memory", {"settings": vars(args), "result": row, "rss_samples": samples})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
