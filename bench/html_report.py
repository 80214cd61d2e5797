"""Benchmark 7, the HTML report of a 10,000-record study: file size, time to write it, and
time to open it and first render it in headless Chromium.

10,000 records x 4 criteria x 10 sampled ratings (40,000 cached answers, 400,000 ratings; each
record a ~180-word article and a ~45-word summary), the cache filled first against a
zero-latency simulated judge. ``geval-async report CONFIG`` runs in a fresh process with and
without ``--html`` (median of ``--repeat`` each). The page is then opened ``--repeat`` times
from disk in Debian's Chromium (Playwright, a fresh page each time) and the browser's own
clocks are read:
``domContentLoaded`` and ``load`` from the navigation timing, and ``records-rendered``, a mark
the page sets once the first page of the records table is on screen. Sorting all records by a
score and opening one record's drill-down are timed from Python around the click.

    .venv/bin/python bench/html_report.py [--quick] [--records 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' Chromium

from chromium import CHROMIUM, CHROMIUM_ARGS
from common import PYTHON, judged_study, run_child, save, table, workdir


def browse(path: Path, repeat: int) -> list[dict[str, Any]]:
    """Open the report ``repeat`` times; the browser's timings of each opening (ms)."""
    from playwright.sync_api import sync_playwright

    runs = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for _ in range(repeat):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            requests: list[str] = []
            errors: list[str] = []
            page.on("request", lambda request, seen=requests: seen.append(request.url))
            page.on(
                "console",
                lambda m, seen=errors: seen.append(m.text) if m.type == "error" else None,
            )
            page.on("pageerror", lambda e, seen=errors: seen.append(str(e)))
            page.goto(path.as_uri(), wait_until="load")
            page.wait_for_selector("#records tbody tr")
            timing = page.evaluate(
                """() => {
                  const nav = performance.getEntriesByType("navigation")[0];
                  const mark = performance.getEntriesByName("records-rendered")[0];
                  return {dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
                          rendered: mark.startTime};
                }"""
            )
            started = time.perf_counter()
            page.click("#records thead button[data-key='score:coh']")
            page.wait_for_selector("#records thead th[aria-sort='ascending']")
            sort_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            page.click("#records tbody tr >> nth=0")
            page.wait_for_selector("#record-detail table.answers")
            open_ms = (time.perf_counter() - started) * 1000
            runs.append(
                {
                    **timing,
                    "sort_ms": sort_ms,
                    "open_record_ms": open_ms,
                    "requests": len(requests),
                    "console_errors": errors,
                }
            )
            page.close()
        browser.close()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="500 records, one repeat")
    args = parser.parse_args()
    if args.quick:
        args.records, args.repeat = 500, 1

    with workdir("html") as folder:
        study = judged_study(folder / "study", args.records, concurrency=64)
        # The same command with and without --html: the difference is the HTML report's cost.
        reports, plain = [], []
        for _ in range(args.repeat):
            command = [PYTHON, "-m", "geval_async", "report", str(study.config)]
            plain.append(run_child(command))
            reports.append(run_child([*command, "--html"]))
            for run in (plain[-1], reports[-1]):
                assert run.returncode == 0, run.stdout + run.stderr
        page = study.folder / "out" / "bench_report.html"
        size = page.stat().st_size
        runs = browse(page, args.repeat)

    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    row = {
        "records": args.records,
        "cached_answers": study.requests,
        "html_mb": size / 1e6,
        "report_s": statistics.median(r.wall for r in plain),
        "report_html_s": statistics.median(r.wall for r in reports),
        "dom_content_loaded_ms": median("dcl"),
        "first_render_ms": median("rendered"),
        "load_ms": median("load"),
        "sort_ms": median("sort_ms"),
        "open_record_ms": median("open_record_ms"),
        "network_requests": max(r["requests"] for r in runs) - 1,
        "console_errors": sum(len(r["console_errors"]) for r in runs),
    }
    print(table([row], list(row)))
    path = save("html_report", {"settings": vars(args), "result": row, "runs": runs})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
