"""The agreement between a panel's judges in the Markdown report and the HTML report: opened
in a real headless Chromium as tests/test_html_report.py opens the report.

Three simulated judges judge a small study into one cache (judge c refuses three records), each
scored on its own; the agreement frame is computed from their long tables with
``judge_agreement`` and written as ``stats/<prefix>_agreement.csv``; the reports are handed the
frame. The numbers on the page and in the Markdown are read back and compared with the CSV's,
read with the csv module.
"""

from __future__ import annotations

import asyncio
import csv
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import needs_chromium, open_report
from test_panel_meta import CRITERIA, JUDGES, REFUSE, write_study

import geval_async as ga
from geval_async.scoring.output.writer import Output, csv_bytes, write_files, write_outputs
from geval_async.scoring.panel.agreement import agreement_frame, judge_agreement
from geval_async.sim import SimServer, SimSettings
from geval_async.study.config import load_config
from geval_async.study.settings import EvalConfig

pytestmark = needs_chromium


def judge_matrix(scores: dict[str, pd.DataFrame], criterion: str) -> pd.DataFrame:
    """One criterion's records x judges frame of the judges' scored rows (NaN: not scored)."""
    columns = {
        judge: frame.loc[frame["criterion"] == criterion].set_index("record_id")["score"]
        for judge, frame in scores.items()
    }
    return pd.concat(columns, axis=1, sort=False).astype(float)


def panel_agreement(config: EvalConfig) -> pd.DataFrame:
    """The agreement frame of a panel, from each judge's one-judge results."""
    scores = {}
    for name in config.judge_names:
        long = ga.load_results(config.for_judge(name)).long
        scores[name] = long[long["status"] == "scored"]
    agreements = []
    for criterion in (c.name for c in config.criteria):
        matrix = judge_matrix(scores, criterion).reindex(columns=list(config.judge_names))
        agreements.append(
            judge_agreement(
                criterion,
                matrix.to_numpy(),
                list(matrix.columns),
                [str(r) for r in matrix.index],
                bootstrap=200,
                seed=3,
            )
        )
    return agreement_frame(agreements)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The study judged by three judges; judge a's reports written with the panel's agreement
    and the agreement CSV beside them. Returns the output folder."""
    folder = tmp_path_factory.mktemp("panel")
    with (
        SimServer() as a,
        SimServer() as b,
        SimServer(SimSettings(content_filter_marker=REFUSE)) as c,
    ):
        path = write_study(folder, {"a": a.base_url, "b": b.base_url, "c": c.base_url})
        config = load_config(path)
        # In a thread of its own: Playwright's sync API runs an event loop in this one.
        with ThreadPoolExecutor(1) as pool:
            for name in JUDGES:
                member = config.for_judge(name)
                pool.submit(asyncio.run, ga.judge(member, rpm=1e6, tpm=1e9)).result()
    frame = panel_agreement(config)
    out = folder / "out"
    write_files([Output(out / "stats" / "p_agreement.csv", csv_bytes(frame, index=False))])
    results = ga.load_results(config.for_judge("a"))
    write_outputs(results, ["report", "html"], html=True, agreement=frame)
    return out


def csv_rows(out: Path, prefix: str = "p") -> list[dict[str, str]]:
    with (out / "stats" / f"{prefix}_agreement.csv").open() as handle:
        return list(csv.DictReader(handle))


def shown(text: str) -> str:
    """A CSV number as the reports show it: three decimals; empty for a missing value."""
    return "" if text == "" or math.isnan(float(text)) else f"{float(text):.3f}"


def with_interval(row: dict[str, str]) -> str:
    value = shown(row["value"])
    if value and shown(row["ci_low"]):
        value += f" [{shown(row['ci_low'])}, {shown(row['ci_high'])}]"
    return value


SUMMARY = [
    "alpha_interval",
    "alpha_ordinal",
    "icc_2_1",
    "icc_2_k",
    "mean_spearman",
    "effective_judges",
    "effective_judges_eigen",
]


def expected_summary(
    rows: list[dict[str, str]], criteria: tuple[str, ...] = CRITERIA
) -> dict[str, list[str]]:
    """Per criterion, the summary row's cells as the CSV's rows say they should read."""
    out = {}
    for criterion in criteria:
        mine = {r["statistic"]: r for r in rows if r["criterion"] == criterion}
        first = mine["alpha_interval"]
        out[criterion] = [
            first["records"],
            first["judges"],
            *(with_interval(mine[s]) for s in SUMMARY),
        ]
    return out


def test_the_html_report_shows_the_agreement_with_the_csvs_numbers(
    browser: Any, reports: Path
) -> None:
    page_path = reports / "p-judge-a_report.html"
    opened = open_report(browser, page_path)
    page = opened.page
    try:
        assert opened.console == []
        assert opened.requests == [page_path.resolve().as_uri()], "nothing loaded from elsewhere"
        page.click("nav a[href='#agreement']")
        section = page.locator("#agreement")
        assert section.is_visible()
        assert section.locator("h2").text_content() == "Agreement between the judges"
        caption = section.locator("#table-agreement caption").text_content()
        assert "stats/p-judge-a_agreement.csv" in caption
        rows = csv_rows(reports)
        expected = expected_summary(rows)
        table = page.locator("#table-agreement tbody tr")
        assert table.count() == len(CRITERIA)
        for i, criterion in enumerate(CRITERIA):
            row = table.nth(i)
            assert row.locator("th").text_content() == criterion
            assert row.locator("td").all_text_contents() == expected[criterion]
            # The judges x judges Spearman matrix: diagonal 1, each pair the CSV's.
            matrix = page.locator(f"#table-spearman-{criterion}")
            assert matrix.locator("thead th").all_text_contents() == ["judge", *JUDGES]
            pairs = {
                (r["judge_a"], r["judge_b"]): shown(r["value"])
                for r in rows
                if r["criterion"] == criterion and r["statistic"] == "spearman"
            }
            assert len(pairs) == 3
            for a_index, a in enumerate(JUDGES):
                line = matrix.locator("tbody tr").nth(a_index)
                assert line.locator("th").text_content() == a
                cells = line.locator("td").all_text_contents()
                for b_index, b in enumerate(JUDGES):
                    want = "1.000" if a == b else pairs.get((a, b)) or pairs[(b, a)]
                    assert cells[b_index] == want, (criterion, a, b)
        # The ICC leaves out the records judge c refused, and says so.
        assert "3 record(s) not scored by every judge left out" in section.text_content()
        terms = section.locator(".how-to-read dt").all_text_contents()
        assert terms == [
            "Krippendorff's alpha",
            "ICC",
            "Pairwise Spearman",
            "Effective number of judges",
        ]
        assert all(d.strip() for d in section.locator(".how-to-read dd").all_text_contents())
    finally:
        page.context.close()


def test_the_markdown_report_has_the_same_agreement(reports: Path) -> None:
    text = (reports / "p-judge-a_report.md").read_text()
    assert "## Agreement between the judges" in text
    rows = csv_rows(reports)
    for criterion, cells in expected_summary(rows).items():
        assert f"| {criterion} | " + " | ".join(cells) + " |" in text
        assert f"Pairwise Spearman, {criterion}:" in text
    assert "docs/agreement.md" in text
    assert "`stats/p-judge-a_agreement.csv`" in text, "named as the report's other files"
    assert "3 record(s) not scored by every judge left out" in text


def test_a_report_without_agreement_has_no_agreement_section(reports: Path) -> None:
    config = load_config(reports.parent / "panel.toml").for_judge("b")
    paths = write_outputs(ga.load_results(config), ["report", "html"], html=True)
    assert sorted(p.name for p in paths) == ["p-judge-b_report.html", "p-judge-b_report.md"]
    markdown, html = sorted(paths, key=lambda p: p.suffix != ".md")
    assert 'id="agreement"' not in html.read_text() and "#agreement" not in html.read_text()
    assert "Agreement between the judges" not in markdown.read_text()
