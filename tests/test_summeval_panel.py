"""The SummEval example with a panel (examples/summeval/panel.toml) end to end on a slice.

Three simulated judges (one speaking Anthropic's OpenAI-compatible dialect, where n must be 1,
with its own n and limits), each on a port of its own, judge two articles x 16 systems into one
cache in tmp_path; ``geval-async meta`` on the example's own file then reads the cache only and
shows each judge and the panel side by side; the HTML report with the panel's agreement is
opened in Chromium. The data is read from ../shared/data/summeval, never copied.
"""

from __future__ import annotations

import asyncio
import csv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import CHROMIUM, ROOT, needs_summeval, run_cli
from test_agreement_report import csv_rows, expected_summary, panel_agreement

import geval_async as ga
from geval_async.scoring.output.writer import Output, csv_bytes, write_files, write_outputs
from geval_async.sim import SimServer, SimSettings
from geval_async.study.config import load_config
from geval_async.study.overrides import read_overrides

EXAMPLE = ROOT / "examples" / "summeval"
pytestmark = needs_summeval
CRITERIA = ("coh", "con", "flu", "rel")
JUDGES = ("gpt", "claude", "local")


@pytest.fixture(scope="module")
def judged_panel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's panel judged on 32 summaries into tmp_path (cache and outputs there)."""
    folder = tmp_path_factory.mktemp("summeval-panel")
    study = {"limit": 32, "cache": str(folder / "cache"), "output": str(folder / "out")}
    config = load_config(EXAMPLE / "panel.toml")
    servers = {
        "gpt": SimServer(),
        "claude": SimServer(SimSettings(profile="anthropic-compat")),
        "local": SimServer(),
    }
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API may hold this thread's loop
        for name in JUDGES:
            with servers[name] as server:
                member = config.for_judge(name)
                run = ga.judge(member, base_url=server.base_url, rpm=1e6, tpm=1e9, **study)
                pool.submit(asyncio.run, run).result()
    return folder


def test_meta_on_the_summeval_panel_shows_each_judge_and_the_panel(judged_panel: Path) -> None:
    flags = (
        "--limit",
        "32",
        "--cache",
        str(judged_panel / "cache"),
        "--output",
        str(judged_panel / "out"),
    )
    result = run_cli("meta", str(EXAMPLE / "panel.toml"), *flags)
    assert result.returncode == 0, result.stderr
    assert "panel vs the best single judge (summary-level Spearman):" in result.stdout
    for criterion in CRITERIA:
        assert f"  {criterion}: panel " in result.stdout
    with (judged_panel / "out" / "meta" / "summeval_panel_meta.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(dict.fromkeys(r["judge"] for r in rows)) == [*JUDGES, "panel"]
    for judge in (*JUDGES, "panel"):
        mine = [r for r in rows if r["judge"] == judge]
        assert {(r["criterion"], r["level"]) for r in mine} == {
            (c, level) for c in CRITERIA for level in ("summary", "system", "dataset")
        }
        assert {r["n"] for r in mine if r["level"] == "system"} == {"16"}
        assert {r["n"] for r in mine if r["level"] == "dataset"} == {"32"}
        assert {r["missing"] for r in mine} == {"0"}


def test_the_summeval_panel_report_shows_the_agreement(browser: Any, judged_panel: Path) -> None:
    if not Path(CHROMIUM).is_file():
        pytest.skip("needs Debian's chromium (.ci/run installs it: apt-get install -y chromium)")
    study = {"limit": 32, "cache": str(judged_panel / "cache"), "output": str(judged_panel / "out")}
    config = read_overrides(load_config(EXAMPLE / "panel.toml"), study)
    frame = panel_agreement(config)
    out = judged_panel / "out"
    name = "summeval_panel-limit-32"
    write_files([Output(out / "stats" / f"{name}_agreement.csv", csv_bytes(frame, index=False))])
    [page_path] = write_outputs(
        ga.load_results(config.for_judge("gpt")), ["html"], html=True, agreement=frame
    )
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    console: list[str] = []
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.goto(page_path.resolve().as_uri())
    try:
        page.wait_for_selector("#records tbody tr")
        assert console == []
        expected = expected_summary(csv_rows(out, name), CRITERIA)
        table = page.locator("#table-agreement tbody tr")
        assert table.count() == len(CRITERIA)
        for i, criterion in enumerate(CRITERIA):
            assert table.nth(i).locator("th").text_content() == criterion
            assert table.nth(i).locator("td").all_text_contents() == expected[criterion]
            heads = page.locator(f"#table-spearman-{criterion} thead th").all_text_contents()
            assert heads == ["judge", *JUDGES]
    finally:
        context.close()
