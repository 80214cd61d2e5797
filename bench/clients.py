"""The contenders, each run in its own child process: ``python bench/clients.py NAME SPEC_JSON``.

Every contender prints one JSON line at the end: its wall time for the work (imports and
setup excluded), the CPU seconds that work took, the whole process's CPU seconds and peak RSS,
and what it got back. ``geval`` (and its variants) and ``bare`` add where that CPU went
(bench/thread_clocks.py): ``threads``, the CPU seconds of each thread inside the clock by name
(``MainThread`` is the event loop's, ``geval-writer`` the answer store's, ``asyncio_N`` the
loop's default executor: a host name's lookup), ``loop_cpu`` / ``writer_cpu`` /
``other_cpu`` the same in three sums, and ``voluntary_switches`` / ``involuntary_switches``,
the process's context switches inside the clock (``getrusage``: a thread that waits, a thread
the kernel took the core from), with ``loop_voluntary_switches`` /
``loop_involuntary_switches`` the loop thread's own; and the clock's start and end on
``time.monotonic()`` (``started_monotonic``, ``ended_monotonic``), which the server's process
reads too, so that benchmark 2 places the server's first and last arrival inside the run.

* ``geval``      geval-async's library entry point, ``run_study`` inside ``asyncio.run``.
* ``geval-nostore`` analysis only, not a product: ``geval`` with its two stores turned off
                 (answers not written, claims always granted, nothing released), to show
                 what the rest of the client costs.
* ``geval-nofold`` analysis only: ``geval`` with its answers journaled and its claims taken
                 and let go, but no answer written to the cache's table.
* ``bare``       the floor: a bare aiohttp loop POSTing the same pre-encoded bodies with the same
                 number of workers, reading each answer and nothing else.
* ``sequential`` the original G-Eval loop, re-implemented: one request at a time with the
                 ``openai`` SDK's sync client, 0.5 s pause after each answer, 2 s pause and retry
                 on a rate-limit error, any other error skips the item; results written at the
                 end. The SDK's own retries are off (``max_retries=0``) because the loop has its
                 own policy, as the original (pre-1.0 SDK, no retries) had.
* ``gather``     what most people write today: ``asyncio.gather`` over ``openai.AsyncOpenAI``
                 calls under an ``asyncio.Semaphore(concurrency)``, the SDK's default retries
                 (2, honouring retry-after), results written at the end.
* ``lookup``     the floor of a rerun: hash the plan and look every key up in diskcache.
* ``paced``      the bare loop, each POST first waiting for a pacer (``spec["pacer"]``): ``geval``
                 (geval-async's ``RateLimits``), ``aiolimiter`` (one ``AsyncLimiter`` a limit
                 holding one second's worth, its public ``acquire`` only) or ``aiolimiter-spaced``
                 (``AsyncLimiter``s holding one request, and the largest request's tokens): the
                 figure of judging/wire/limits.py (bench/pacers.py). A 429 waits out its
                 ``retry-after-ms`` and goes again.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from thread_clocks import ThreadClocks

Spec = dict[str, Any]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _bodies(spec: Spec) -> list[bytes]:
    lines = Path(spec["bodies"]).read_bytes().splitlines()
    limit = spec.get("limit")
    return lines[:limit] if limit else lines


# --- geval-async ------------------------------------------------------------------------------


def geval(spec: Spec) -> dict[str, Any]:
    from dataclasses import replace

    from geval_async.judging.run.runner import run_study
    from geval_async.judging.store.cache import JudgeCache
    from geval_async.judging.wire import transport  # noqa: F401 - see below
    from geval_async.study.config import apply_overrides, load_config
    from geval_async.study.prepare import prepare_study

    # run_study imports aiohttp (through transport) only when something is missing; imported
    # here, before the clock, as ``bare`` imports aiohttp before its clock: imports excluded.

    if spec.get("limits_module"):
        _use_limits_module(spec["limits_module"], spec.get("limits_package") or "geval_async")
    config = apply_overrides(
        load_config(spec["config"]), base_url=spec["base_url"], cache=spec.get("cache")
    )
    limits = replace(
        config.limits,
        rpm=spec.get("rpm"),
        tpm=spec.get("tpm"),
        concurrency=spec.get("concurrency", config.limits.concurrency),
    )
    config = replace(config, limits=limits)
    clocks = ThreadClocks()
    cpu0, t0 = _cpu(), time.perf_counter()
    study = prepare_study(config)
    with JudgeCache(config.cache_path) as cache:
        result = asyncio.run(run_study(study, cache, api_key=None))
    wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    total = result.counters.total()
    return {
        **clocks.report(),
        "wall": wall,
        "run_elapsed": result.elapsed,
        "cpu": cpu,
        "sent": result.counters.requests_sent,
        "rate_limited": result.counters.rate_limited,
        "failed": total.failed + total.rejected,
        "complete": result.complete,
        "cached": total.cached,
        "answered": total.answered,
        "peak_in_flight": result.counters.peak_in_flight,
        "retries": dict(result.counters.retries),
    }


def geval_nostore(spec: Spec) -> dict[str, Any]:
    """``geval`` without durable answers or claims: what the client costs beyond its stores."""
    from geval_async.judging.store.cache import JudgeCache
    from geval_async.judging.store.claims import Claims

    try:  # a tree with a journal: answers go to it first, then in groups to the table
        from geval_async.judging.store.journal import Journal

        Journal.append = lambda self, records: 0  # type: ignore[method-assign]
        JudgeCache.put_records = lambda self, records: [True] * len(records)  # type: ignore[method-assign]
    except ImportError:
        pass
    JudgeCache.put_many = lambda self, entries: [True] * len(entries)  # type: ignore[method-assign]
    JudgeCache.stored = lambda self, keys: set()  # type: ignore[method-assign]
    Claims.settle = lambda self, release, claim: [True] * len(claim)  # type: ignore[method-assign]
    Claims.release_many = lambda self, keys: None  # type: ignore[method-assign]
    return geval(spec)


def geval_nofold(spec: Spec) -> dict[str, Any]:
    """``geval`` with its answers journaled but never folded into the cache's table (claims
    as usual): what the table's inserts cost the run, analysis only (the answers are lost)."""
    from geval_async.judging.store.cache import JudgeCache

    JudgeCache.put_records = lambda self, records: [True] * len(records)  # type: ignore[method-assign]
    return geval(spec)


def _use_limits_module(path: str, package: str) -> None:
    """Run with another version of limits.py (a before/after comparison), loaded into
    ``package`` (geval_async.judging since the stages got their rooms), whose modules its
    relative imports reach."""
    import importlib.util

    from geval_async.judging.run import runner, worker

    module_spec = importlib.util.spec_from_file_location(f"{package}._bench_limits", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not hasattr(module.RateLimits, "observe"):  # before header learning existed
        module.RateLimits.observe = lambda self, headers: None
    # Where the run makes its RateLimits: judging/run/worker.py, or runner.py in a tree without it.
    holder = worker if hasattr(worker, "RateLimits") else runner
    holder.RateLimits = module.RateLimits  # type: ignore[attr-defined]


# --- bare aiohttp ---------------------------------------------------------------------------


def bare(spec: Spec) -> dict[str, Any]:
    import aiohttp

    bodies = _bodies(spec)
    url = spec["base_url"] + "/chat/completions"
    concurrency = spec["concurrency"]
    statuses: Counter[int] = Counter()

    async def main() -> None:
        connector = aiohttp.TCPConnector(limit=concurrency)
        headers = {"Content-Type": "application/json"}
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
            queue = iter(bodies)

            async def worker() -> None:
                for body in queue:
                    async with session.post(url, data=body) as response:
                        await response.read()
                        statuses[response.status] += 1

            await asyncio.gather(*(worker() for _ in range(concurrency)))

    clocks = ThreadClocks()
    cpu0, t0 = _cpu(), time.perf_counter()
    asyncio.run(main())
    wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    return {
        **clocks.report(),
        "wall": wall,
        "cpu": cpu,
        "sent": len(bodies),
        "statuses": dict(statuses),
        "failed": len(bodies) - statuses[200],
    }


# --- the original G-Eval loop ---------------------------------------------------------------


def sequential(spec: Spec) -> dict[str, Any]:
    import openai

    bodies = [orjson.loads(b) for b in _bodies(spec)]
    judge = openai.OpenAI(base_url=spec["base_url"], api_key="sk-bench", max_retries=0)
    results, ignored, limited = [], 0, 0
    cpu0, t0 = _cpu(), time.perf_counter()
    for body in bodies:
        while True:
            try:
                response = judge.chat.completions.create(**body)
                time.sleep(0.5)
                results.append([c.message.content for c in response.choices])
                break
            except Exception as exc:  # noqa: BLE001 - the original loop's policy
                if "limit" in str(exc):
                    limited += 1
                    time.sleep(2)
                else:
                    ignored += 1
                    break
    Path(spec["output"]).write_text(json.dumps(results))
    return {
        "wall": time.perf_counter() - t0,
        "cpu": _cpu() - cpu0,
        "sent": len(bodies),
        "rate_limited": limited,
        "failed": ignored,
    }


# --- asyncio.gather over AsyncOpenAI ----------------------------------------------------------


def gather(spec: Spec) -> dict[str, Any]:
    import openai

    bodies = [orjson.loads(b) for b in _bodies(spec)]

    async def main() -> list[Any]:
        judge = openai.AsyncOpenAI(base_url=spec["base_url"], api_key="sk-bench")
        semaphore = asyncio.Semaphore(spec["concurrency"])

        async def one(body: dict[str, Any]) -> Any:
            async with semaphore:
                response = await judge.chat.completions.create(**body)
                return [c.message.content for c in response.choices]

        try:
            return await asyncio.gather(*(one(b) for b in bodies), return_exceptions=True)
        finally:
            await judge.close()

    cpu0, t0 = _cpu(), time.perf_counter()
    results = asyncio.run(main())
    failed = [r for r in results if isinstance(r, BaseException)]
    Path(spec["output"]).write_text(json.dumps([r for r in results if isinstance(r, list)]))
    return {
        "wall": time.perf_counter() - t0,
        "cpu": _cpu() - cpu0,
        "sent": len(bodies),
        "failed": len(failed),
        "errors": dict(Counter(type(e).__name__ for e in failed)),
    }


# --- the floor of a rerun ---------------------------------------------------------------------


def lookup(spec: Spec) -> dict[str, Any]:
    import diskcache

    from geval_async.study.config import load_config
    from geval_async.study.plan import first_request, plan_items
    from geval_async.study.prepare import prepare_study

    cpu0, t0 = _cpu(), time.perf_counter()
    study = prepare_study(load_config(spec["config"]))
    t1 = time.perf_counter()
    keys = [first_request(item, study.config).key for item in plan_items(study)]
    t2 = time.perf_counter()
    with diskcache.Cache(spec["cache"]) as cache:
        found = sum(key in cache for key in keys)
    t3 = time.perf_counter()
    return {
        "wall": t3 - t0,
        "cpu": _cpu() - cpu0,
        "load": t1 - t0,
        "hash": t2 - t1,
        "lookup": t3 - t2,
        "keys": len(keys),
        "found": found,
    }


def paced(spec: Spec) -> dict[str, Any]:
    import aiohttp

    from geval_async.judging.wire.limits import RateLimits
    from geval_async.sim.limits import prompt_tokens

    bodies = _bodies(spec)
    # Sent as geval-async sends the plan: record by record, the criteria interleaved.
    step = len(bodies) // spec["criteria"]
    bodies = [bodies[c * step + r] for r in range(step) for c in range(spec["criteria"])]
    costs = [
        prompt_tokens(b["messages"]) + b["max_tokens"] * b["n"] for b in map(orjson.loads, bodies)
    ]
    rpm, tpm, kind = spec["rpm"], spec.get("tpm"), spec["pacer"]
    url = spec["base_url"] + "/chat/completions"
    statuses: Counter[int] = Counter()

    async def main() -> None:
        from aiolimiter import AsyncLimiter

        limits = RateLimits(rpm, tpm) if kind == "geval" else None
        if limits is not None:
            limits.replied()
        if kind == "aiolimiter":
            buckets = [(AsyncLimiter(rpm / 60, 1.0), False)]
            if tpm:
                buckets.append((AsyncLimiter(tpm / 60, 1.0), True))
        else:
            buckets = [(AsyncLimiter(1, 60 / rpm), False)]
            if tpm:
                buckets.append((AsyncLimiter(max(costs), max(costs) * 60 / tpm), True))

        async def wait(cost: int) -> None:
            if limits is not None:
                await limits.acquire(cost)
                return
            for bucket, tokens in buckets:
                await bucket.acquire(cost if tokens else 1)

        connector = aiohttp.TCPConnector(limit=spec["concurrency"])
        headers = {"Content-Type": "application/json"}
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
            queue = iter(zip(bodies, costs, strict=True))

            async def worker() -> None:
                for body, cost in queue:
                    while True:
                        await wait(cost)
                        async with session.post(url, data=body) as response:
                            await response.read()
                            statuses[response.status] += 1
                            if response.status != 429:
                                break
                            pause = float(response.headers.get("retry-after-ms", 100)) / 1000
                        if limits is not None:
                            limits.refused(cost, pause)
                        else:
                            await asyncio.sleep(pause)

            await asyncio.gather(*(worker() for _ in range(spec["concurrency"])))

    cpu0, t0 = _cpu(), time.perf_counter()
    asyncio.run(main())
    return {
        "wall": time.perf_counter() - t0,
        "cpu": _cpu() - cpu0,
        "sent": sum(statuses.values()),
        "statuses": dict(statuses),
        "failed": len(bodies) - statuses[200],
    }


CONTENDERS: dict[str, Callable[[Spec], dict[str, Any]]] = {
    "paced": paced,
    "geval": geval,
    "geval-nostore": geval_nostore,
    "geval-nofold": geval_nofold,
    "bare": bare,
    "sequential": sequential,
    "gather": gather,
    "lookup": lookup,
}


def main() -> None:
    name, spec = sys.argv[1], json.loads(sys.argv[2])
    report = CONTENDERS[name](spec)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    report.update(
        contender=name,
        process_cpu=usage.ru_utime + usage.ru_stime,
        maxrss_mb=usage.ru_maxrss / 1024,
    )
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
