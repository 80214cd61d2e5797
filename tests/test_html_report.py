"""The HTML report, opened in a real headless Chromium (Debian's ``chromium``, via Playwright).

The demo's report is written once a session by ``geval-async demo`` in a subprocess (conftest
``demo_run``); each test
opens it from disk (``file://``) with every request and console message recorded, and acts as
a reader would: reads the tables, sorts, filters, opens one record, moves with the keyboard.
The expected answers come from the raw export (``raw/ueq_<criterion>.json``) and the ratings
and invalid reasons from the parser's samples table (``StudyResults.samples``), not from the
page's own code. Every command runs in a subprocess (``run_process``): Playwright's sync API
keeps an event loop running in this thread, where the command's ``asyncio.run`` cannot start.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import DemoRun, Opened, StudyFiles, needs_chromium, open_report, run_process

import geval_async
from geval_async.sim import SimServer, SimSettings

CRITERIA = ("con", "flu", "ind", "rel")

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def demo_report(demo_run: DemoRun) -> Path:
    assert "ueq_report.html" in demo_run.stdout
    return demo_run.folder / "out"


@pytest.fixture
def report(browser: Any, demo_report: Path) -> Iterator[Opened]:
    opened = open_report(browser, demo_report / "ueq_report.html")
    yield opened
    opened.page.context.close()


def column(page: Any, key: str) -> list[str]:
    """The text of one column of the records table, in display order."""
    keys = page.eval_on_selector_all("#records thead button", "bs => bs.map(b => b.dataset.key)")
    index = keys.index(key)
    return page.eval_on_selector_all(
        "#records tbody tr", f"rows => rows.map(r => r.cells[{index}].textContent)"
    )


def raw_items(out: Path, criterion: str) -> dict[str, dict[str, Any]]:
    document = json.loads((out / "raw" / f"ueq_{criterion}.json").read_text())
    return {item["record_id"]: item for item in document["items"]}


def test_demo_report_loads_offline_with_tables_and_figures(
    report: Opened, demo_report: Path
) -> None:
    page = report.page
    assert report.console == []
    assert report.requests == [(demo_report / "ueq_report.html").resolve().as_uri()]
    for table in ("table-coverage", "table-tests", "test-composite", "table-composite"):
        assert page.locator(f"#{table} tbody tr").count() >= 1, table
    for name in CRITERIA:
        rows = page.locator(f"#table-{name} tbody tr")
        assert rows.count() == 25  # 24 users and the Average row, as in the CSV
        assert rows.last.locator("th").text_content() == "Average"
        assert page.locator(f"#figure-box-{name} svg").count() == 1
        assert page.locator(f"#figure-ratings-{name} svg").count() == 1
    assert page.locator("#figure-box-composite svg").is_visible()
    assert "simulated" in page.locator(".warning").first.text_content()
    assert page.locator("#records tbody tr").count() == 48
    assert page.locator("#records-status").text_content() == "Records 1-48 of 48"


def test_sorting_by_a_score_column_orders_the_records(report: Opened) -> None:
    page = report.page
    page.click("#records thead button[data-key='score:con']")
    ascending = [float(v) for v in column(page, "score:con")]
    assert ascending == sorted(ascending) and ascending[0] < ascending[-1]
    assert (
        page.get_attribute("#records thead th:has(button[data-key='score:con'])", "aria-sort")
        == "ascending"
    )
    page.click("#records thead button[data-key='score:con']")
    descending = [float(v) for v in column(page, "score:con")]
    assert descending == sorted(ascending, reverse=True)
    page.click("#records thead button[data-key='id']")
    assert column(page, "id")[:3] == ["u01-mLLM", "u01-sLLM", "u02-mLLM"]


def test_filters_by_condition_criterion_and_text(report: Opened) -> None:
    page = report.page
    page.select_option("#filter-condition", "UEQ-sLLM")
    conditions = column(page, "condition")
    assert len(conditions) == 24 and set(conditions) == {"UEQ-sLLM"}
    page.select_option("#filter-criterion", "flu")
    keys = page.eval_on_selector_all("#records thead button", "bs => bs.map(b => b.dataset.key)")
    assert keys == ["id", "group", "condition", "score:flu", "invalid"]
    page.select_option("#filter-criterion", "")
    page.select_option("#filter-condition", "")
    page.fill("#filter-text", "u07")
    assert column(page, "id") == ["u07-mLLM", "u07-sLLM"]
    # Text in a record's fields is searched too: the persona of user u01 only.
    page.fill("#filter-text", "margaret")
    assert column(page, "id") == ["u01-mLLM", "u01-sLLM"]
    page.fill("#filter-text", "no such text anywhere")
    assert page.locator("#records tbody tr").count() == 0
    assert "No record matches" in page.locator("#records-status").text_content()


def test_drilldown_shows_the_records_answers_ratings_and_prompt(
    report: Opened, demo_report: Path
) -> None:
    page = report.page
    page.fill("#filter-text", "u05-sLLM")
    page.click("#records tbody tr >> nth=0")
    detail = page.locator("#record-detail")
    assert detail.is_visible()
    assert detail.locator("h3").text_content() == "Record u05-sLLM"
    for name in CRITERIA:
        raw = raw_items(demo_report, name)["u05-sLLM"]
        section = detail.locator(f"section[data-criterion='{name}']")
        answers = section.locator("table.answers tbody tr")
        assert answers.count() == len(raw["answers"]) == 10
        shown = section.locator("td.answer").all_text_contents()
        assert shown == raw["answers"]
        ratings = [r.text_content() for r in section.locator("tbody tr td:nth-child(3)").all()]
        expected = ["invalid" if r is None else f"{r:g}" for r in raw["ratings"]]
        assert ratings == expected
        assert (
            f"weighted score {raw['weighted_score']:.3f}"
            in section.locator(".weighted").text_content()
        )
        prompt = section.locator("pre.prompt").text_content()
        assert prompt == raw["messages"][0]["content"]


def demo_samples(out: Path) -> Any:
    """The parser's reading of every demo answer (``StudyResults.samples``), from the cache."""
    from geval_async.cli.demo import demo_config

    return geval_async.load_results(demo_config(out.parent, "http://127.0.0.1:9/v1")).samples


def test_invalid_answers_show_the_parsers_reason(report: Opened, demo_report: Path) -> None:
    page = report.page
    page.check("#filter-invalid")
    ids = column(page, "id")
    assert ids, "the demo's judge answers 1% unparseably"
    samples = demo_samples(demo_report)
    invalid = samples[samples["reason"].notna()]
    assert set(ids) == set(invalid["record_id"])
    record = column(page, "id")[0]
    page.click("#records tbody tr >> nth=0")
    for name in CRITERIA:
        rows = samples[(samples["record_id"] == record) & (samples["criterion"] == name)]
        section = page.locator(f"#record-detail section[data-criterion='{name}']")
        shown = section.locator("table.answers tbody tr")
        assert shown.count() == len(rows)
        for row, tr in zip(rows.itertuples(), shown.all(), strict=True):
            assert tr.locator("td.answer").text_content() == row.text
            rating = tr.locator("td:nth-child(3)").text_content()
            reason = tr.locator("td:nth-child(4)").text_content()
            if not isinstance(row.reason, str):  # NaN or None: read as valid
                assert rating == f"{row.rating:g}"
            else:
                assert (rating, reason) == ("invalid", row.reason)
    # The Overview counts the same reasons as the samples table, per criterion.
    items = page.locator("ul.reasons li").all_text_contents()
    listed = {item.split(":")[0].strip(): " ".join(item.split()) for item in items}
    for (name, reason), count in invalid.groupby(["criterion", "reason"]).size().items():
        assert re.search(rf"{reason}: [^(]*\({count}\)", listed[name]), (name, reason)


def test_keyboard_moves_through_the_records_and_opens_one(report: Opened) -> None:
    page = report.page
    page.click("#records thead button[data-key='id']")
    page.focus("#records tbody tr >> nth=0")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.cells[0].textContent") == "u02-mLLM"
    page.keyboard.press("Enter")
    assert page.locator("#record-detail h3").text_content() == "Record u02-mLLM"
    page.keyboard.press("Escape")
    assert page.locator("#record-detail").is_hidden()
    assert page.evaluate("document.activeElement.cells[0].textContent") == "u02-mLLM"
    page.keyboard.press("End")
    assert page.evaluate("document.activeElement.cells[0].textContent") == "u24-sLLM"
    # Only one row is in the tab order (a roving tabindex), so Tab leaves the table.
    assert page.locator("#records tbody tr[tabindex='0']").count() == 1


def test_printing_hides_the_controls_and_keeps_tables_and_figures(report: Opened) -> None:
    page = report.page
    page.emulate_media(media="print")
    assert page.locator(".filters").is_hidden()
    assert page.locator(".pager").is_hidden()
    assert page.locator("#table-tests").is_visible()
    assert page.locator("#figure-box-composite svg").is_visible()
    assert page.pdf()[:4] == b"%PDF"


def _judged_in_logprobs_mode(study: StudyFiles, **settings: object) -> None:
    with SimServer(SimSettings(**settings)) as server:  # type: ignore[arg-type]
        study.write_config(server.base_url, sampling={"mode": "logprobs", "n": 1})
        result = run_process("run", str(study.config), "--quiet")
        assert result.returncode == 0, result.stderr


def test_logprobs_report_shows_the_rating_distribution_and_is_reproducible(
    study: StudyFiles, browser: Any
) -> None:
    _judged_in_logprobs_mode(study)
    path = geval_async.html_report(study.config)  # the Python API
    assert path == study.output / "t_report.html"
    before = path.read_bytes()
    # The command line gives the same bytes, apart from the generation time; with
    # SOURCE_DATE_EPOCH set (reproducible builds' convention) even that is fixed.
    fixed = {"SOURCE_DATE_EPOCH": "1700000000"}
    assert run_process("report", str(study.config), "--html", env=fixed).returncode == 0
    pinned = path.read_bytes()
    stamp = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    assert stamp.sub(b"", pinned) == stamp.sub(b"", before)
    assert run_process("report", str(study.config), "--html", env=fixed).returncode == 0
    assert path.read_bytes() == pinned
    assert b"2023-11-14T22:13:20Z" in pinned

    opened = open_report(browser, path)
    try:
        page = opened.page
        assert opened.console == []
        page.fill("#filter-text", "u003-B")
        page.click("#records tbody tr >> nth=0")
        section = page.locator("#record-detail section[data-criterion='clar']")
        probabilities = [
            float(v)
            for v in section.locator("table.distribution tbody td:nth-child(2)").all_text_contents()
        ]
        assert len(probabilities) >= 2
        assert sum(probabilities) == pytest.approx(1.0, abs=0.01)
    finally:
        page.context.close()


def test_human_scores_add_judge_vs_human_scatter_plots(judged: StudyFiles, browser: Any) -> None:
    config = judged.config
    config.write_text(config.read_text() + '[meta]\nhuman = { clar = "human.clar" }\n')
    # Human ratings are not prompt fields, so adding them leaves every cache key as it was.
    rows = [json.loads(line) for line in judged.records.read_text().splitlines()]
    hostile = "</script><script>document.title='owned'</script><b>bold</b> & {{text}}"
    for i, row in enumerate(rows):
        row["human"] = {"clar": 1 + i % 5}
        row["note"] = hostile
    judged.records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_process("report", str(judged.config), "--html")
    assert result.returncode == 0, result.stderr
    opened = open_report(browser, judged.output / "t_report.html")
    try:
        page = opened.page
        assert opened.console == []
        assert page.locator("#figure-human-clar svg").count() == 1
        assert page.locator("#figure-human-fit").count() == 0  # no human score for fit
        methods = page.locator("#table-human tbody tr td:nth-child(4)").all_text_contents()
        assert {"spearman", "kendall", "pearson"} <= set(methods)
        caption = page.locator("#caption-human-clar").text_content()
        assert f"one point per record ({len(rows)})" in caption
        # A record's text is shown as text: it can never become markup or script.
        page.click("#records tbody tr >> nth=0")
        assert hostile in page.locator("#record-detail dd").all_text_contents()
        assert page.locator("#record-detail b").count() == 0
        assert page.title() == "t: G-Eval report"
    finally:
        page.context.close()


def test_report_of_a_subset_is_named_by_its_variant_and_readable_by_colleagues(
    judged: StudyFiles,
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "geval_async", "report", str(judged.config), "--html"]
        + ["--limit", "4"],
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.umask(0o027),
    )
    assert result.returncode == 0, result.stderr
    path = judged.output / "t-limit-4_report.html"
    assert f"wrote {path}" in result.stdout
    assert not (judged.output / "t_report.html").exists()  # never the full study's name
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the umask's, not a temporary file's
    page = path.read_text()
    assert "<title>t-limit-4: G-Eval report</title>" in page
    assert "scores/t-limit-4_*.csv" in page  # names the tables written beside it
    # The Python API names it the same way, through the same writer.
    assert geval_async.html_report(judged.config, limit=4) == path


def test_drilldown_shows_a_thinking_judges_reasoning_above_its_answer(
    study: StudyFiles, browser: Any
) -> None:
    # A judge that thinks in <think> tags (llama.cpp, Ollama); a share cut off while thinking.
    with SimServer(SimSettings(profile="think-tags", think_cut_off=0.3)) as server:
        study.write_config(server.base_url, sampling={"max_tokens": 2000})
        result = run_process("run", str(study.config), "--quiet")
        assert result.returncode == 0, result.stderr
    path = geval_async.html_report(study.config)
    samples = geval_async.load_results(study.config).samples
    clar = samples[samples["criterion"] == "clar"]
    # A record with an answer cut off while thinking and one that concluded.
    record = next(
        r
        for r, group in clar.groupby("record_id")
        if group["reason"].isna().any() and (group["reason"] == "cut_off").any()
    )
    rows = clar[clar["record_id"] == record]
    assert len(rows) == 3
    opened = open_report(browser, path)
    try:
        page = opened.page
        assert opened.console == []
        page.fill("#filter-text", record)
        page.click("#records tbody tr >> nth=0")
        section = page.locator("#record-detail section[data-criterion='clar']")
        shown = section.locator("table.answers tbody tr")
        assert shown.count() == 3
        for row, tr in zip(rows.itertuples(), shown.all(), strict=True):
            opening = re.match(r"<(think|thinking)>\n", row.text)
            assert opening is not None, row.text
            reasoning, _, answer = row.text[opening.end() :].partition(f"</{opening[1]}>")
            reasoning = reasoning.strip()
            # Collapsed: the summary says how long; the answer the rating came from is below.
            thought = tr.locator("td.answer details.reasoning")
            assert thought.get_attribute("open") is None
            assert tr.locator("td.answer .thought").is_hidden()
            summary = thought.locator("summary").text_content()
            assert summary.startswith(f"reasoning ({len(reasoning):,} characters")
            assert tr.locator("td.answer .said").text_content() == answer.strip()
            rating = tr.locator("td:nth-child(3)").text_content()
            if isinstance(row.reason, str):
                assert (rating, row.reason) == ("invalid", "cut_off")
                assert "cut off before it ended" in summary and not answer
            else:
                # "4", "Score: 4", "4/5": read from this, not from the reasoning's numbers.
                assert rating == f"{row.rating:g}" and rating in answer
            thought.locator("summary").click()
            assert tr.locator("td.answer .thought").text_content() == reasoning
    finally:
        page.context.close()
