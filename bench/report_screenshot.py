"""The README's screenshot of the demo's HTML report (docs/img/report.png).

Runs ``geval-async demo`` into a temporary folder (the simulated judge, no API key), opens
``out/ueq_report.html`` in Debian's headless Chromium and photographs two views side by side in
one PNG: the top of the page (Overview) and one record's drill-down. The page carries the
generation time, so the PNG is fixed with ``SOURCE_DATE_EPOCH``.

    .venv/bin/python bench/report_screenshot.py [--output docs/img/report.png]
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from html_report import CHROMIUM, CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "img" / "report.png")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="geval-screenshot-") as folder:
        env = {**os.environ, "SOURCE_DATE_EPOCH": "1764460800"}
        demo = [sys.executable, "-m", "geval_async", "demo", "--output", folder]
        subprocess.run(demo, check=True, cwd=ROOT, env=env, capture_output=True)
        page_path = Path(folder) / "out" / "ueq_report.html"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1100, "height": 1250})
            page.goto(page_path.as_uri())
            page.wait_for_selector("#records tbody tr")
            # The two views a reader comes for: the overview and one record's answers.
            top = page.screenshot()
            page.fill("#filter-text", "u05")
            page.click("#records tbody tr >> nth=1")
            page.evaluate("document.getElementById('drilldown').scrollIntoView()")
            drill = page.screenshot()
            browser.close()
    from PIL import Image  # matplotlib's dependency

    left, right = (Image.open(io.BytesIO(shot)) for shot in (top, drill))
    both = Image.new("RGB", (left.width + right.width + 16, left.height), "#888888")
    both.paste(left, (0, 0))
    both.paste(right, (left.width + 16, 0))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    both.save(args.output, optimize=True)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
