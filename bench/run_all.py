"""Run every benchmark, one after the other (never in parallel: they would share the cores).

    .venv/bin/python bench/run_all.py            # the default sizes (about 25 minutes on 2 cores)
    .venv/bin/python bench/run_all.py --quick    # a smoke run (about 3 minutes)
    .venv/bin/python bench/run_all.py rate_limits overhead   # some of them

Each script prints its table and writes bench/results/<name>.json (<name>.quick.json with
--quick); this one then prints the headline figure of each.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ORDER = (
    "overhead",
    "writes",
    "claims",
    "rate_limits",
    "rerun",
    "rescore",
    "memory",
    "peers",
    "html_report",
    "batch",
)


def headline(name: str, quick: bool) -> str:
    path = BENCH / "results" / f"{name}{'.quick' if quick else ''}.json"
    if not path.exists():
        return "no results"
    data = json.loads(path.read_text())
    if name == "overhead":
        return "; ".join(
            f"{r['server']} {r['workers']} workers, {r.get('contender', 'geval')}: "
            f"{r['ratio']:.2f} x bare aiohttp "
            f"(floor 0.85), CPU per request {r['cpu_per_request_ratio']:.1f} x"
            for r in data["summary"]
        )
    if name == "writes":
        return "; ".join(
            f"groups of {r['group']}: {r['cpu_us_per_entry']:.0f} us CPU an entry"
            for r in data["runs"]
        )
    if name == "claims":
        return "; ".join(
            f"groups of {r['group']}: {r['cpu_us_per_key']:.0f} us CPU a claim"
            for r in data["runs"]
        )
    if name == "rate_limits":
        return "; ".join(
            f"{r['server']} {r['workers']}w {r['variant']}, {r['client_limits']}: "
            f"{r['wall/bound']:.3f} x bound (floor {r['floor']}), {r['429s']} 429s"
            for r in data["runs"]
        )
    if name == "rerun":
        return "; ".join(
            f"{r['requests']} requests: sent {r['sent_on_rerun']}, CLI "
            f"{r['rerun_cli_beyond_start_s']:.2f} s beyond interpreter start "
            f"({r['rerun_cli_cpu_s']:.2f} CPU s)"
            for r in data["runs"]
        )
    if name == "rescore":
        r = data["result"]
        return (
            f"report {r['report_minus_imports_s']:.2f} s beyond its imports (floor 0.6), "
            f"{r['report_minus_imports_cpu_s']:.2f} CPU s"
        )
    if name == "memory":
        r = data["result"]
        rerun = r.get("rerun_peak_rss_mb")
        again = "" if rerun is None else f", its rerun {rerun:.0f} MB"
        return f"{r['requests']} requests, peak RSS {r['peak_rss_mb']:.0f} MB{again} (floor 150)"
    if name == "peers":
        return "; ".join(
            f"{r['bucket_s']:g}s {r['contender']}: {r['wall_s']:.1f} s, {r['429s']} 429s, "
            f"{r['failed_items']} failed"
            for r in data["runs"]
        )
    if name == "html_report":
        r = data["result"]
        return (
            f"{r['records']} records: {r['html_mb']:.1f} MB, first render "
            f"{r['first_render_ms']:.0f} ms, {r['network_requests']} network requests"
        )
    if name == "batch":
        r = data["result"]
        return (
            f"{r['requests']} requests by batch: {r['http_calls']} HTTP calls, "
            f"{r['wall_s']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB"
        )
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"some of: {', '.join(ORDER)}")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(ORDER))
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r} (known: {', '.join(ORDER)})")
    names = args.names or list(ORDER)
    failed = []
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        command = [sys.executable, str(BENCH / f"{name}.py")] + (["--quick"] if args.quick else [])
        if subprocess.run(command).returncode != 0:
            failed.append(name)
        print(f"({name}: {time.perf_counter() - started:.0f} s)", flush=True)
    print("\n=== headlines ===")
    for name in names:
        print(f"{name}: {'FAILED' if name in failed else headline(name, args.quick)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
