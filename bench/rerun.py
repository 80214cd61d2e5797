"""Benchmark 3, full rerun: a plan whose every answer is cached sends nothing, and how fast.

For a 1,920-request plan (480 records x 4 criteria) and a 100,000-request plan (25,000 x 4),
the cache is filled by a first run against a zero-latency simulated judge; then the same
command runs again. The server's ``/sim/stats`` must show no new request. The rerun's time is
set against the floor of any rerun: load the study, hash every request of the plan into its
key and look each key up directly in diskcache (``key in cache``), in a fresh process too.

* ``rerun (CLI)``: ``python -m geval_async run CONFIG --quiet``, the whole process, interpreter
  start and imports included, as a user runs it;
* ``rerun (run_study)``: the library call only (study loading included, imports excluded);
* ``hash + lookup``: the floor, split into loading the study, hashing and looking up;
* ``split``: where a rerun's time goes, in a fresh process (``--split CONFIG CACHE``): loading
  the study, making the plan's first requests (render and hash), and reading every entry's
  head in one pass over the table (what ``run`` does when the cache is not much larger than
  the plan) against reading them in keyed ``IN (...)`` batches (what it does in a big cache).

The figure is the CLI's wall time beyond interpreter start (``python -c pass``), floor 1.5 s
for the 100,000-request plan; CPU seconds are reported too (steadier on a shared machine).

    .venv/bin/python bench/rerun.py [--quick] [--sizes 480,25000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import json
import time

from common import PYTHON, SimProcess, client, run_child, save, table, workdir, write_study


def split(config: str, cache: str) -> dict[str, float]:
    """Seconds of each stage of a rerun's walk (run in a fresh child process)."""
    from itertools import islice

    from geval_async.judging.store.cache import JudgeCache
    from geval_async.study.config import load_config
    from geval_async.study.plan import planned_requests
    from geval_async.study.prepare import prepare_study

    started = time.perf_counter()
    study = prepare_study(load_config(config))
    loaded = time.perf_counter()
    keys = [request.key for request in planned_requests(study, send=True)]
    keyed = time.perf_counter()
    with JudgeCache(Path(cache)) as whole:
        assert whole.scan_heads(study.planned), "the cache is larger than the plan"
        found = sum(whole.head(key) is not None for key in keys)
    one_pass = time.perf_counter()
    with JudgeCache(Path(cache)) as batched:
        requests = iter(keys)
        while chunk := list(islice(requests, 256)):
            batched.prefetch(chunk)
            found -= sum(batched.head(key) is not None for key in chunk)
    done = time.perf_counter()
    assert found == 0, "one pass and keyed batches found different entries"
    return {
        "load_s": loaded - started,
        "first_requests_s": keyed - loaded,
        "heads_one_pass_s": one_pass - keyed,
        "heads_batched_s": done - one_pass,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="480,25000", help="records per plan (x 4 criteria)")
    parser.add_argument("--quick", action="store_true", help="480 and 2,500 records")
    parser.add_argument("--split", nargs=2, metavar=("CONFIG", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.split:
        print(json.dumps(split(*args.split)))
        return
    if args.quick:
        args.sizes = "480,2500"

    rows = []
    import_only = run_child([PYTHON, "-c", "import geval_async.cli.app"])
    start = min(run_child([PYTHON, "-c", "pass"]).wall for _ in range(3))
    with workdir("rerun") as folder, SimProcess() as sim:
        for records in (int(s) for s in args.sizes.split(",")):
            study = write_study(folder / f"study-{records}", records)
            common = {
                "config": study.config,
                "base_url": sim.base_url,
                "cache": study.cache,
                "concurrency": 32,
            }
            fill = run_child(client("geval", **common)).report()
            assert fill["complete"], fill
            before = sim.stats()["received"]
            cli = run_child(
                [
                    PYTHON,
                    "-m",
                    "geval_async",
                    "run",
                    str(study.config),
                    "--quiet",
                    "--base-url",
                    sim.base_url,
                    "--cache",
                    str(study.cache),
                ]
            )
            assert cli.returncode == 0, cli.stderr
            library = run_child(client("geval", **common)).report()
            floor = run_child(client("lookup", **common)).report()
            stages = run_child([PYTHON, __file__, "--split", str(study.config), str(study.cache)])
            assert stages.returncode == 0, stages.stderr
            parts = json.loads(stages.stdout)
            sent = sim.stats()["received"] - before
            assert sent == 0, f"the rerun sent {sent} requests"
            assert library["cached"] == study.requests and library["sent"] == 0, library
            assert floor["found"] == study.requests, floor
            row = {
                "requests": study.requests,
                "sent_on_rerun": sent,
                "first_run_s": fill["wall"],
                "rerun_cli_s": cli.wall,
                "rerun_cli_beyond_start_s": cli.wall - start,
                "rerun_cli_cpu_s": cli.cpu,
                "floor_s": 1.5 if study.requests >= 100_000 else None,
                "passed": cli.wall - start <= 1.5 if study.requests >= 100_000 else None,
                "rerun_run_study_s": library["wall"],
                "lookup_floor_s": floor["wall"],
                "floor_load_s": floor["load"],
                "floor_hash_s": floor["hash"],
                "floor_lookup_s": floor["lookup"],
                "cli_x_floor": cli.wall / floor["wall"],
                "run_study_x_floor": library["wall"] / floor["wall"],
                "cli_maxrss_mb": cli.maxrss_mb,
                **parts,
            }
            rows.append(row)
            print(table([row], list(row)), flush=True)

    print()
    print(f"python -c 'import geval_async.cli.app': {import_only.wall:.2f} s")
    print(
        table(
            rows,
            [
                "requests",
                "sent_on_rerun",
                "first_run_s",
                "rerun_cli_s",
                "rerun_cli_beyond_start_s",
                "rerun_cli_cpu_s",
                "rerun_run_study_s",
                "lookup_floor_s",
                "cli_x_floor",
                "run_study_x_floor",
            ],
        )
    )
    print(
        table(rows, ["requests", "floor_load_s", "floor_hash_s", "floor_lookup_s", "cli_maxrss_mb"])
    )
    stages = ["load_s", "first_requests_s", "heads_one_pass_s", "heads_batched_s"]
    print(table(rows, ["requests", *stages]))
    path = save(
        "rerun",
        {
            "settings": vars(args),
            "interpreter_start_s": start,
            "import_cli_s": import_only.wall,
            "runs": rows,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
