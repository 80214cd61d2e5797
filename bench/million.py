"""Benchmark 9, a million requests: 250,000 records x 4 criteria on one machine, flat memory.

The study: 250,000 records of 760 bytes (a 190 MB JSONL file, generated here into
a temporary folder, never committed) x 4 G-Eval criteria, n = 1 (1,000,000 requests). Each
command runs as a user runs it, in a fresh process (peak RSS from ``os.wait4``, wall time,
CPU seconds):

* ``run --dry-run`` on the empty cache;
* ``run`` against the simulated judge (zero latency, no limits; ``--concurrency``), which
  must receive every request once;
* the rerun, every answer cached: it must send nothing (the sim's count);
* ``status`` and ``score`` (the scoring stage: tables, the long table, the raw exports).

Floors: each at most 250 MB peak, the rerun at most 15 s beyond interpreter start
(``python -c pass``). The RSS of a process that only imports the CLI is given alongside.
``--limit K`` runs, reruns, and scores only the first K records of the same file (the index
still covers all of them; the dry run is of the whole plan): say so when quoting its figures.
``--commands`` runs some of them (``dry-run,run,rerun,status,score``): with ``--keep`` on a
folder whose cache an earlier run filled, ``--commands rerun,score`` measures those alone.

    .venv/bin/python bench/million.py [--quick] [--records 250000] [--concurrency 64]
        [--limit K] [--keep FOLDER] [--commands dry-run,run,rerun,status,score]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contextlib import nullcontext

from common import PYTHON, SimProcess, StudyFiles, run_child, save, table, workdir, write_study

# `python -m geval_async ARGS` with pyarrow hidden, as a plain install (no parquet extra) has it.
WITHOUT_PYARROW = (
    "import sys; sys.modules['pyarrow'] = None; sys.argv[0] = 'geval-async'\n"
    "from geval_async.cli import main; sys.exit(main(sys.argv[1:]))"
)
FLOOR_MB = 250
RERUN_FLOOR_S = 15
# 100 + 25 words of the benchmarks' vocabulary: 760 bytes a record on average.
DOCUMENT_WORDS, SUMMARY_WORDS = 100, 25
COMMANDS = ("dry-run", "run", "rerun", "status", "score")


def _study(folder: Path, records: int) -> StudyFiles:
    config = folder / "config.toml"
    if config.exists():  # --keep: the records and cache of an earlier run of this script
        return StudyFiles(folder, config, folder / "cache", records, ("coh", "con", "flu", "rel"))
    return write_study(
        folder,
        records,
        n=1,
        max_tokens=2,
        document_words=DOCUMENT_WORDS,
        summary_words=SUMMARY_WORDS,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=250_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--limit", type=int, help="run and score the first K records only")
    parser.add_argument("--keep", type=Path, help="keep the study and cache in this folder")
    parser.add_argument("--quick", action="store_true", help="5,000 records (20,000 requests)")
    parser.add_argument(
        "--without-pyarrow",
        action="store_true",
        help="each command as a plain install runs it (pyarrow, the parquet extra, is hidden: "
        "pandas 3 imports it when it is there, some 45 MB more)",
    )
    parser.add_argument(
        "--commands",
        default=",".join(COMMANDS),
        help=f"which to run, in this order: {','.join(COMMANDS)}",
    )
    args = parser.parse_args()
    chosen = args.commands.split(",")
    unknown = [c for c in chosen if c not in COMMANDS]
    if unknown:
        parser.error(f"--commands: unknown {unknown[0]!r} (known: {', '.join(COMMANDS)})")
    if args.quick:
        args.records = 5_000

    start = min(run_child([PYTHON, "-c", "pass"]).wall for _ in range(3))
    imports = run_child([PYTHON, "-c", "import geval_async.cli.app"])
    rows = []
    place = nullcontext(args.keep) if args.keep else workdir("million")
    with place as folder:
        folder.mkdir(parents=True, exist_ok=True)
        fresh = not (folder / "study" / "config.toml").exists()
        study = _study(folder / "study", args.records)
        records_mb = (study.folder / "records.jsonl").stat().st_size / 2**20
        config = str(study.config)
        limit = ["--limit", str(args.limit)] if args.limit else []
        planned = (args.limit or args.records) * len(study.criteria)

        launch = [PYTHON, "-m", "geval_async"]
        if args.without_pyarrow:
            launch = [PYTHON, "-c", WITHOUT_PYARROW]

        def measure(name: str, argv: list[str], **extra: object) -> None:
            child = run_child([*launch, *argv], rss_every=2.0, timeout=14400)
            assert child.returncode == 0, child.stdout[-2000:] + child.stderr[-2000:]
            row = {
                "command": name,
                "wall_s": child.wall,
                "beyond_start_s": child.wall - start,
                "cpu_s": child.cpu,
                "peak_rss_mb": child.maxrss_mb,
                "floor_mb": FLOOR_MB,
                "passed": child.maxrss_mb <= FLOOR_MB,
                "rss_samples": child.rss_samples,
                **extra,
            }
            rows.append(row)
            print(table([row], [k for k in row if k != "rss_samples"]), flush=True)

        if "dry-run" in chosen:
            measure("run --dry-run", ["run", config, "--dry-run"])  # the whole plan, always
        if "run" in chosen or "rerun" in chosen:
            with SimProcess() as sim:
                send = ["run", config, "--quiet", "--base-url", sim.base_url, *limit]
                send += ["--concurrency", str(args.concurrency)]
                before = sim.stats()["received"]
                received = 0
                if "run" in chosen:
                    measure("run", send)
                    received = sim.stats()["received"] - before
                    assert received == planned or not fresh, (
                        f"the sim received {received} of {planned}"
                    )
                    rows[-1]["sent"] = received
                if "rerun" in chosen:
                    measure("run (rerun, all cached)", send)
                    sent = sim.stats()["received"] - before - received
                    assert sent == 0, f"the rerun sent {sent} requests"
                    rows[-1]["sent"] = sent
                    rerun = rows[-1]
                    rerun["passed"] = rerun["passed"] and rerun["beyond_start_s"] <= RERUN_FLOOR_S
        if "status" in chosen:
            measure("status", ["status", config, *limit])
        if "score" in chosen:
            measure("score", ["score", config, *limit])

    columns = ["command", "wall_s", "beyond_start_s", "cpu_s", "peak_rss_mb", "passed", "sent"]
    print()
    print(
        f"{args.records} records ({records_mb:.0f} MB) x {len(study.criteria)} criteria"
        + (f", run on the first {args.limit}" if args.limit else "")
        + f"; interpreter start {start:.2f} s; importing the CLI: {imports.maxrss_mb:.0f} MB"
    )
    print(table(rows, columns))
    name = "million" + ("_limit" if args.limit else "")
    path = save(
        name + ("_without_pyarrow" if args.without_pyarrow else ""),
        {
            "settings": {k: str(v) for k, v in vars(args).items()},
            "records_mb": records_mb,
            "requests": planned,
            "interpreter_start_s": start,
            "import_only_rss_mb": imports.maxrss_mb,
            "runs": rows,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
