"""Benchmark 8, batch: a 50,000-request study judged through the Batch API of the simulated
judge, as a user runs it (``geval-async run CONFIG --batch``).

12,500 SummEval-style records x 4 criteria, n = 10, against the simulated judge in its own
process (answering a batch as soon as it is asked for its status). Reported: the requests in
the batch, the HTTP calls the client made (files, batches, and online completions, from the
server's own counts), the wall time and the client's peak RSS (``os.wait4``), then a rerun
that must submit nothing.

    .venv/bin/python bench/batch.py [--quick] [--records 12500]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, SimProcess, run_child, save, table, workdir, write_study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=12_500)
    parser.add_argument("--quick", action="store_true", help="500 records (2,000 requests)")
    args = parser.parse_args()
    if args.quick:
        args.records = 500

    with workdir("batch") as folder, SimProcess() as sim:
        study = write_study(folder / "study", args.records)
        command = [
            PYTHON,
            "-m",
            "geval_async",
            "run",
            str(study.config),
            "--batch",
            "--quiet",
            "--poll",
            "1",
            "--base-url",
            sim.base_url,
        ]
        run = run_child(command, rss_every=1.0, timeout=7200)
        stats = sim.stats()
        rerun = run_child(command, timeout=7200)
        after = sim.stats()
    assert run.returncode == 0, run.stdout + run.stderr
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert stats["batch_lines"] == study.requests, stats
    row = {
        "requests": study.requests,
        "batches": stats["batches"],
        "batch_lines": stats["batch_lines"],
        "http_calls": stats["batch_calls"] + stats["received"],
        "online_requests": stats["received"],
        "wall_s": run.wall,
        "cpu_s": run.cpu,
        "peak_rss_mb": run.maxrss_mb,
        "rerun_new_batches": after["batches"] - stats["batches"],
        "rerun_http_calls": after["batch_calls"] - stats["batch_calls"],
        "rerun_wall_s": rerun.wall,
        "rerun_cpu_s": rerun.cpu,
    }
    print(table([row], list(row)))
    path = save("batch", {"settings": vars(args), "result": row, "rss_samples": run.rss_samples})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
