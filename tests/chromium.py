"""How this project launches Debian's headless Chromium (through Playwright, whose own browser
download is never used): the executable and its flags, in one place for the tests
(``conftest.browser``) and the benchmarks that open a report (bench/html_report.py,
bench/report_screenshot.py). ``GEVAL_CHROMIUM`` names another executable.
"""

from __future__ import annotations

import os

CHROMIUM = os.environ.get("GEVAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
