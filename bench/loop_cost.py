"""The event loop's own code a request: ``Run``'s feed and workers, without network or threads.

What the loop's thread runs for each request besides aiohttp and the stores: the real
``judging.worker.Run`` (its feed walking the plan, queueing and claiming; its workers judging
each item: limits, budget, the body made, the answer checked and made into an entry), over the
bench study (``--requests``, 4 criteria, n = 10), with two parts replaced by ones that answer at
once: a transport whose every request returns the stub's fixed 10-choice body (bench/stub.py,
parsed as the real transport parses it, ``transport._answer``) after one ``asyncio.sleep(0)``,
and a writer that takes every claim and drops every entry. **Analysis only**, like
``geval-nostore`` (bench/clients.py): not a run a user can make, and no figure of a real run; it
isolates the part of a request's CPU that is our code on the loop, where a real run's figure is
shared with aiohttp, the writer thread and the server on the same cores.

Each round is a fresh process that prepares the study and opens an empty cache (outside the
clock), then times the feed and workers (``time.process_time``) until every request has been
answered once; the figure is CPU microseconds a request, best and median of the rounds.

``--callgrind`` runs each round's child under valgrind's callgrind, instrumented only while the
feed and workers run (``callgrind_control -i on`` / ``off`` from the child, half a second's pause
after each so that the switch has taken), and adds ``instructions_per_req``: the instructions
executed, whatever else the machine runs (on two shared cores the CPU time of the same tree
spreads 1.5x; the count of the same tree repeats within 0.01 %). It includes the switch-off's own
``subprocess.run`` (the same fixed count for every tree) and is 50x slower: 4,000 requests take
about 20 s a round, and one round a tree says as much as many.

``--baseline NAME=FOLDER`` runs the same harness against the ``geval_async`` package found in
FOLDER (e.g. ``git archive REV geval_async | tar -x -C FOLDER``) on the child's ``PYTHONPATH``,
the trees taking turns, who goes first alternating by round, so that before/after comes from one
command:

    .venv/bin/python bench/loop_cost.py [--requests 8000] [--rounds 7] [--workers 16,64]
        [--baseline base=/tmp/base] [--callgrind] [--save-as loop_cost]

The harness touches ``Run(study, entries, stop=, retry_failed=, backoff=)``, ``run.feed``
(``first_work``, ``produce``, ``writer``), ``run.work``, ``run.transport`` / ``run.claims`` /
``run.writer`` and the writer's ``claim`` / ``claim_many`` / ``put`` / ``release`` / ``close``:
a tree given with ``--baseline`` must offer the same.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    PYTHON,
    ROOT,
    add_baseline,
    baseline_trees,
    run_child,
    save,
    table,
    workdir,
    write_study,
)

THIS_TREE = "this"
CALLGRIND = "GEVAL_BENCH_CALLGRIND"  # set in a child run under callgrind


def _instrument(state: str) -> None:
    """Switch callgrind's instrumentation of this process ``on`` or ``off`` (when under it)."""
    if os.environ.get(CALLGRIND):
        subprocess.run(
            ["callgrind_control", "-i", state, str(os.getpid())], check=True, capture_output=True
        )
        time.sleep(0.5)  # the switch takes when valgrind next looks for commands


# --- the child: one round in one tree ---------------------------------------------------------


def _measure(config_path: str, cache: str, workers: int, stores: bool) -> dict[str, Any]:
    """Run the feed and workers once over the study; CPU seconds of setup and of the work."""
    from multidict import CIMultiDict, CIMultiDictProxy
    from stub import BODY

    from geval_async.judging import transport
    from geval_async.judging.run.worker import Run
    from geval_async.judging.store.cache import JudgeCache
    from geval_async.judging.store.claims import Claims
    from geval_async.judging.store.origin import ServerEntries
    from geval_async.study.config import load_config
    from geval_async.study.prepare import prepare_study

    raw = BODY if isinstance(BODY, bytes) else BODY.encode()
    headers = CIMultiDictProxy(
        CIMultiDict(
            {
                "Content-Type": "application/json; charset=utf-8",
                "Content-Length": str(len(raw)),
                "Date": "Tue, 01 Dec 2026 21:00:00 GMT",
                "Server": "Python/3.11 aiohttp/3.9.5",
            }
        )
    )

    class InstantTransport:
        """Every request answered with the stub's body, after one turn of the loop."""

        def __init__(self) -> None:
            self.answer = transport._answer(200, raw, headers, 1.0)

        async def complete(self, body: Any) -> Any:
            await asyncio.sleep(0)
            return self.answer

    class InstantWriter:
        """Every claim taken, every entry counted and dropped: no sqlite, no thread."""

        def __init__(self) -> None:
            self.loop = asyncio.get_running_loop()
            self.puts = 0

        def put(self, entry: Any, *, overwrite: bool) -> None:
            self.puts += 1

        def release(self, key: str) -> asyncio.Future[None]:
            done: asyncio.Future[None] = self.loop.create_future()
            done.set_result(None)
            return done

        async def claim_many(self, keys: list[str]) -> list[tuple[bool, bool]]:
            return [(True, False)] * len(keys)

        async def claim(self, key: str) -> tuple[bool, bool]:
            return (True, False)

        def close(self) -> None:
            pass

    config = load_config(Path(config_path))
    config = replace(config, limits=replace(config.limits, concurrency=workers))
    study = prepare_study(config)

    async def one() -> dict[str, Any]:
        with JudgeCache(Path(cache)) as judge_cache:
            entries = ServerEntries(judge_cache, None)
            started = time.process_time()
            run = Run(study, entries, stop=asyncio.Event(), retry_failed=False, backoff=0.1)
            chunks = run.feed.first_work()
            with Claims(judge_cache.directory, 60.0) as claims:
                if stores:  # the tree's own writer: journal, cache, claims, its thread
                    run.connect(InstantTransport(), claims)  # type: ignore[arg-type]
                else:
                    run.writer = run.feed.writer = InstantWriter()  # type: ignore[assignment]
                    run.transport, run.claims = InstantTransport(), claims  # type: ignore[assignment]
                _instrument("on")
                ready, loop_ready = time.process_time(), time.thread_time()
                async with asyncio.TaskGroup() as group:
                    group.create_task(run.feed.produce(chunks or ()))
                    for _ in range(workers):
                        group.create_task(run.work())
                run.writer.close()
                done, loop_done = time.process_time(), time.thread_time()
                _instrument("off")
            total = run.counters.total()
            return {
                "setup_s": ready - started,
                "work_s": done - ready,
                "loop_s": loop_done - loop_ready,  # the loop's thread alone
                "answers": total.answered,
                "failed": total.failed + total.rejected,
            }

    return asyncio.run(one())


# --- the parent: rounds, trees alternating ----------------------------------------------------


def _round(
    tree: str, config: Path, cache: Path, workers: int, stores: bool, callgrind: bool
) -> dict[str, Any]:
    spec = {"config": str(config), "cache": str(cache), "workers": workers, "stores": stores}
    command = [PYTHON, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    env = {"PYTHONPATH": tree, "PYTHONDONTWRITEBYTECODE": "1"}
    if callgrind:
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        command = [*valgrind, "--callgrind-out-file=/dev/null", *command]
        env.update({CALLGRIND: "1", "PYTHONHASHSEED": "0"})
    child = run_child(command, env=env)
    if child.returncode != 0:
        sys.exit(f"loop_cost: the round against {tree} failed:\n{child.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    if callgrind:
        collected = re.search(r"Collected : (\d+)", child.stderr)
        if collected is None:
            sys.exit(f"loop_cost: no instruction count from callgrind:\n{child.stderr[-2000:]}")
        result["instructions"] = int(collected.group(1))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--workers", default="16", help="workers (in flight), e.g. 16,64")
    add_baseline(
        parser,
        "the same harness against the geval_async package in FOLDER, rounds alternating; "
        "may be given more than once, each with its own NAME (default: baseline)",
    )
    parser.add_argument(
        "--stores",
        action="store_true",
        help="with each tree's own writer (journal, cache, claims and the writer's thread; the "
        "process's CPU, all threads): what storing adds to the loop's own code",
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="each round under valgrind's callgrind: instructions a request of the timed work",
    )
    parser.add_argument("--save-as", help="the results file under bench/results/ (none if unset)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        measured = _measure(spec["config"], spec["cache"], spec["workers"], spec["stores"])
        print(json.dumps(measured), flush=True)
        return

    baselines = baseline_trees(parser, args.baseline)
    if THIS_TREE in baselines:
        parser.error(f"--baseline: the NAME {THIS_TREE!r} is this tree's")
    trees = {THIS_TREE: str(ROOT), **baselines}
    criteria = ("coh", "con", "flu", "rel")
    rows = []
    with workdir("loop-cost") as folder:
        study = write_study(folder / "study", -(-args.requests // len(criteria)), criteria=criteria)
        requests = study.requests
        for round_ in range(args.rounds):
            for workers in (int(w) for w in args.workers.split(",")):
                names = list(trees) if round_ % 2 == 0 else list(trees)[::-1]
                for name in names:
                    cache = folder / f"cache-{name}-{workers}-{round_}"
                    result = _round(
                        trees[name], study.config, cache, workers, args.stores, args.callgrind
                    )
                    if result["answers"] != requests or result["failed"]:
                        sys.exit(f"loop_cost: {name} answered {result} of {requests} requests")
                    rows.append(
                        {
                            "round": round_,
                            "workers": workers,
                            "tree": name,
                            "setup_us_per_req": 1e6 * result["setup_s"] / requests,
                            "cpu_us_per_req": 1e6 * result["work_s"] / requests,
                            "loop_us_per_req": 1e6 * result["loop_s"] / requests,
                            "load_1m": round(os.getloadavg()[0], 2),
                        }
                    )
                    if args.callgrind:
                        rows[-1]["instructions_per_req"] = result["instructions"] // requests
                    print(table([rows[-1]], list(rows[-1])), flush=True)

    summary = []
    for workers in (int(w) for w in args.workers.split(",")):
        mine = [
            r["cpu_us_per_req"] for r in rows if (r["tree"], r["workers"]) == (THIS_TREE, workers)
        ]
        for name in trees:
            cpu = [
                r["cpu_us_per_req"] for r in rows if (r["tree"], r["workers"]) == (name, workers)
            ]
            summary.append(
                {
                    "workers": workers,
                    "tree": name,
                    "best_us_per_req": min(cpu),
                    "median_us_per_req": statistics.median(cpu),
                    "median_minus_this": statistics.median(cpu) - statistics.median(mine),
                    "rounds": " ".join(f"{c:.1f}" for c in cpu),
                }
            )
            if args.callgrind:
                counts = [
                    r["instructions_per_req"]
                    for r in rows
                    if (r["tree"], r["workers"]) == (name, workers)
                ]
                summary[-1]["median_instructions_per_req"] = statistics.median(counts)
    print()
    print(table(rows, list(rows[0])))
    print()
    print(table(summary, list(summary[0])))
    if args.save_as:
        settings = {**vars(args), "trees": trees}
        print(
            f"wrote {save(args.save_as, {'settings': settings, 'runs': rows, 'summary': summary})}"
        )


if __name__ == "__main__":
    main()
