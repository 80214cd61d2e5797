"""The HTML report's pairwise section, opened in Chromium: the verdict tables, the position
measure, and a pair's two orders side by side with the judge's answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, needs_chromium, open_report, run_cli

from geval_async import load_results
from geval_async.sim import SimServer, SimSettings

pytestmark = needs_chromium
UEQ_PAIRWISE = ROOT / "examples" / "ueq" / "pairwise.toml"


@pytest.fixture(scope="module")
def pairwise_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("pairwise-html")
    flags = [str(UEQ_PAIRWISE), "--cache", str(folder / "cache"), "--output", str(folder / "out")]
    with SimServer(SimSettings(position_bias=0.2)) as sim:
        judged = run_cli("run", *flags, "--base-url", sim.base_url, "--quiet",
                         "--rpm", "100000000", "--tpm", "100000000")  # fmt: skip
        assert judged.returncode == 0, judged.stderr
    report = run_cli("report", *flags, "--html")
    assert report.returncode == 0, report.stderr
    yield folder


def test_the_pairwise_section_shows_both_orders_side_by_side(
    pairwise_report: Path, browser: Any
) -> None:
    # The report is made first: the browser keeps an event loop running in this thread.
    opened = open_report(browser, pairwise_report / "out" / "ueq-pairwise_report.html")
    page = opened.page
    section = page.locator("#pairwise")
    assert section.is_visible()
    assert page.locator("nav a[href='#pairwise']").is_visible()
    # No criterion rates: no empty rating sections.
    assert page.locator("#figures").count() == 0 and page.locator("#trust").count() == 0
    assert "orders asked have a verdict" in page.locator(".facts").inner_text()
    rows = page.locator("#table-pairwise tbody tr")
    assert rows.count() == 2
    results = load_results(UEQ_PAIRWISE, cache=str(pairwise_report / "cache"))
    frame = results.pairwise().set_index("criterion")
    first_row = rows.nth(0).locator("th, td").all_inner_texts()
    assert first_row[:4] == ["ind_pair", "UEQ-mLLM", "UEQ-sLLM", "24"]
    assert first_row[4] == str(frame.loc["ind_pair", "a_wins"])
    position = page.locator("#table-position tbody tr").nth(0).inner_text()
    assert f"{frame.loc['ind_pair', 'first_shown_wins']:.3f}" in position

    pair = page.locator("details.pair").first
    pair.locator("summary").click()
    orders = pair.locator(".order")
    assert orders.count() == 2
    left, right = orders.nth(0).bounding_box(), orders.nth(1).bounding_box()
    assert left is not None and right is not None
    assert abs(left["y"] - right["y"]) < 1 and right["x"] > left["x"] + left["width"] / 2
    assert orders.nth(0).locator("h4").inner_text() == "A = UEQ-mLLM, B = UEQ-sLLM"
    assert orders.nth(1).locator("h4").inner_text() == "A = UEQ-sLLM, B = UEQ-mLLM"
    verdicts = results.pair_verdicts
    first_pair = verdicts[(verdicts["criterion"] == "ind_pair") & (verdicts["group"] == "u01")]
    for k, verdict in enumerate(first_pair["verdict"]):
        assert f"Verdict: {verdict}" in orders.nth(k).inner_text()
        assert orders.nth(k).locator("pre.answer").inner_text().strip()
    # The bias section flags the first-shown share the position table shows.
    page.click("nav a[href='#bias']")
    flags = page.locator("section#bias ul.bias-flags li").all_inner_texts()
    for criterion, row in frame.iterrows():
        flagged = [f for f in flags if f.startswith(f"Flag: position ({criterion})")]
        assert len(flagged) == int(row["first_ci_low"] > 0.5 or row["first_ci_high"] < 0.5)
    assert any(f"{frame.loc['ind_pair', 'first_shown_wins']:.3f}" in f for f in flags)
    page.screenshot(path=str(pairwise_report / "pairwise.png"), full_page=False)
    assert all(url.startswith("file://") for url in opened.requests)
    assert opened.console == []
