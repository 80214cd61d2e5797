"""Benchmark 4, re-scoring: ``geval-async report CONFIG`` on a full cache, beyond its imports.

480 records x 4 criteria x 10 sampled ratings (1,920 cached answers, 19,200 ratings), the cache
filled first against a zero-latency simulated judge. ``report`` reads the cache only (scores,
composite, Welch tests with FDR, Markdown report; no plots). Each command runs ``--repeat``
times in a fresh process and the median is kept. Set against it, a process that only imports
what ``report`` imports (the CLI, the scoring stage, pandas, scipy.stats, statsmodels); the
difference is the work itself (floor: 0.6 s), in wall and in CPU seconds. ``python -X
importtime`` names the heaviest imports; ``--profile N`` prints the N functions of the work
with the most time of their own (cProfile, in one more process, after the imports).

    .venv/bin/python bench/rescore.py [--quick] [--records 480] [--repeat 3] [--profile 15]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, judged_study, run_child, save, table, workdir

REPORT_IMPORTS = (
    "import geval_async.cli.app, geval_async.scoring.scores.results, "
    "geval_async.scoring.output.report"
)
FLOOR_S = 0.6
# The work of `report` under cProfile, its imports done first; prints the top of the profile.
PROFILE = """
import cProfile, contextlib, io, pstats, sys
{imports}
from geval_async.cli.app import main
profile = cProfile.Profile()
with contextlib.redirect_stdout(io.StringIO()):
    profile.runcall(main, ["report", sys.argv[1], "--output", sys.argv[2]])
pstats.Stats(profile).sort_stats("tottime").print_stats(int(sys.argv[3]))
"""


def _heaviest_imports(count: int = 6) -> list[tuple[str, float]]:
    """Seconds spent importing each top-level package (sum of its modules' own times)."""
    run = run_child([PYTHON, "-X", "importtime", "-c", REPORT_IMPORTS])
    spent: dict[str, float] = {}
    for line in run.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if match:
            package = match.group(2).split(".")[0]
            spent[package] = spent.get(package, 0.0) + int(match.group(1)) / 1e6
    return sorted(spent.items(), key=lambda x: -x[1])[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=480)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="48 records, one repeat")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print the top N of the profile"
    )
    args = parser.parse_args()
    if args.quick:
        args.records, args.repeat = 48, 1

    with workdir("rescore") as folder:
        study = judged_study(folder / "study", args.records, concurrency=32)
        # The judge is gone: report must not need it.
        imports, reports = [], []
        for _ in range(args.repeat):
            imports.append(run_child([PYTHON, "-c", REPORT_IMPORTS]))
            reports.append(run_child([PYTHON, "-m", "geval_async", "report", str(study.config)]))
            assert reports[-1].returncode == 0, reports[-1].stdout + reports[-1].stderr
        outputs = sorted(p.name for p in (study.folder / "out").rglob("*") if p.is_file())
        if args.profile:
            code = PROFILE.format(imports=REPORT_IMPORTS)
            out = str(folder / "profiled")
            run = run_child([PYTHON, "-c", code, str(study.config), out, str(args.profile)])
            assert run.returncode == 0, run.stderr
            print(run.stdout)

    report_s = statistics.median(r.wall for r in reports)
    import_s = statistics.median(r.wall for r in imports)
    report_cpu = statistics.median(r.cpu for r in reports)
    import_cpu = statistics.median(r.cpu for r in imports)
    row = {
        "records": args.records,
        "criteria": len(study.criteria),
        "samples_per_item": 10,
        "cached_answers": study.requests,
        "report_s": report_s,
        "imports_s": import_s,
        "report_minus_imports_s": report_s - import_s,
        "report_cpu_s": report_cpu,
        "imports_cpu_s": import_cpu,
        "report_minus_imports_cpu_s": report_cpu - import_cpu,
        "floor_s": FLOOR_S,
        "passed": report_s - import_s <= FLOOR_S,
        # Wall time on a shared machine counts the others' work too; CPU seconds do not.
        "passed_cpu": report_cpu - import_cpu <= FLOOR_S,
        "report_maxrss_mb": max(r.maxrss_mb for r in reports),
    }
    heaviest = _heaviest_imports()
    print(table([row], list(row)))
    print(
        "import time of what report imports, by package (s): "
        + ", ".join(f"{name} {seconds:.2f}" for name, seconds in heaviest)
    )
    path = save(
        "rescore",
        {
            "settings": vars(args),
            "result": row,
            "heaviest_imports": heaviest,
            "outputs": outputs,
            "walls": {"report": [r.wall for r in reports], "import": [r.wall for r in imports]},
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
