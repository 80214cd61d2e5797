"""What a study that spends its draws by need reports: ``stats/<prefix>_draws.csv``, the
Markdown report's and the HTML report's "Draws spent by need".

The simulated judge is sure of some items and torn on others (``certainty = "varied"``), and
counts every request it received and every draw it answered; the CSV's draws and requests
must be those counts, its share of items stopped at ``first_draws`` what the raw export's
ratings show (every item the judge is sure of among them), and its fixed study what the
endpoint takes for n draws: one request an item on an endpoint that takes ``n``, n on one that
answers one draw a request. A study of a fixed n has neither the file nor the section.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import (
    PlainJudge,
    StudyFiles,
    judge_study,
    needs_chromium,
    open_report,
    run_cli,
    write_study,
)

from geval_async.sim import SimServer, SimSettings, item_certainty

N = 12
FIRST = 3  # first_draws' default
ADAPTIVE = {"n": N, "target_se": 0.2, "seed": 1}
PRICE_IN, PRICE_OUT = 1.0, 4.0  # USD per million tokens: the simulated judge's, for the test
PRICES = {"sim-judge": [PRICE_IN, PRICE_OUT]}
CRITERIA = ("clar", "fit")


@dataclass
class Judged:
    """A study judged and reported (``report --html``), and what the judge counted."""

    study: StudyFiles
    settings: SimSettings
    received: int  # requests
    samples: int  # draws answered
    answered: int  # requests answered (200)

    def draws(self) -> pd.DataFrame:
        return pd.read_csv(self.study.output / "stats" / "t_draws.csv").set_index("criterion")

    def report(self) -> str:
        return (self.study.output / "t_report.md").read_text(encoding="utf-8")


def judged_with(root: Path, settings: SimSettings, sampling: dict[str, object]) -> Judged:
    """The test study judged by a simulated judge of ``settings``, then ``report --html``."""
    study = write_study(root)
    with SimServer(settings) as sim:
        judge_study(study, sim.base_url, sampling=sampling, prices=PRICES)
        stats = sim.stats
        judged = Judged(study, settings, stats.received, stats.samples, stats.by_status[200])
    result = run_cli("report", str(study.config), "--html")
    assert result.returncode == 0, result.stderr
    return judged


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory: pytest.TempPathFactory) -> Judged:
    """The study at n = 12 with a target standard error, on an endpoint that takes n."""
    settings = SimSettings(certainty="varied", seed=5)
    return judged_with(tmp_path_factory.mktemp("adaptive"), settings, ADAPTIVE)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> Judged:
    """The same study at a fixed n = 12."""
    settings = SimSettings(certainty="varied", seed=5)
    return judged_with(tmp_path_factory.mktemp("fixed"), settings, {"n": N, "seed": 1})


def raw_ratings(judged: Judged, criterion: str) -> list[dict[str, Any]]:
    document = json.loads((judged.study.output / "raw" / f"t_{criterion}.json").read_text())
    return document["items"]


def test_draws_and_requests_are_what_the_judge_was_asked(adaptive: Judged) -> None:
    draws = adaptive.draws()
    assert list(draws.index) == list(CRITERIA)
    items = adaptive.study.n_records
    assert (draws["items"] == items).all() and (draws["settled"] == items).all()
    assert (draws["drawing"] == 0).all()
    assert (draws["fixed_draws"] == N * items).all()
    # Every draw the judge answered is counted once, and every request it received.
    assert draws["draws"].sum() == adaptive.samples
    assert draws["requests"].sum() == adaptive.received
    assert draws["draws_share"].tolist() == pytest.approx(
        (draws["draws"] / draws["fixed_draws"]).tolist()
    )
    # The floor the varied judge allows: well under the fixed study's draws.
    assert (draws["draws_share"] < 0.75).all(), draws["draws_share"]


def test_items_the_judge_is_sure_of_stop_at_first_draws(adaptive: Judged) -> None:
    draws = adaptive.draws()
    for criterion in CRITERIA:
        items = raw_ratings(adaptive, criterion)
        counted = [len(item["ratings"]) for item in items]
        assert draws.loc[criterion, "draws"] == sum(counted)
        at_first = sum(k == FIRST for k in counted)
        assert draws.loc[criterion, "at_first_draws"] == pytest.approx(at_first / len(items))
        kinds = [item_certainty(item["messages"], adaptive.settings) for item in items]
        assert "sure" in kinds and "spread" in kinds
        assert all(k == FIRST for k, kind in zip(counted, kinds, strict=True) if kind == "sure")
        # A torn item needs more than its first draws (three ratings across the scale).
        assert max(k for k, kind in zip(counted, kinds, strict=True) if kind == "spread") > FIRST


def test_rounds_on_an_endpoint_that_takes_n_pay_the_prompt_again(adaptive: Judged) -> None:
    draws = adaptive.draws()
    items = adaptive.study.n_records
    # The fixed study asks each item once for its n draws; the rounds ask some items again.
    assert (draws["fixed_requests"] == items).all()
    assert (draws["requests"] > draws["fixed_requests"]).all()
    assert (draws["prompt_tokens"] > draws["fixed_prompt_tokens"]).all()
    assert (draws["completion_tokens"] < draws["fixed_completion_tokens"]).all()
    assert set(draws["cost_basis"]) == {"billed"}
    for criterion in CRITERIA:
        row = draws.loc[criterion]
        cost = (row.prompt_tokens * PRICE_IN + row.completion_tokens * PRICE_OUT) / 1e6
        fixed = (row.fixed_prompt_tokens * PRICE_IN + row.fixed_completion_tokens * PRICE_OUT) / 1e6
        assert row.cost == pytest.approx(cost, rel=1e-5)
        assert row.fixed_cost == pytest.approx(fixed, rel=1e-3)
        assert row.saving == pytest.approx(1 - row.cost / row.fixed_cost, rel=1e-4)
    report = adaptive.report()
    section = report[report.index("## Draws spent by need") :]
    assert "`stats/t_draws.csv`" in section
    assert "each round is one more request that pays the prompt again" in section
    for criterion in CRITERIA:
        row = draws.loc[criterion]
        assert f"| {criterion} | {items} | 0 | {row.draws} | {N * items} |" in section


@pytest.mark.parametrize(
    ("settings", "sampling"),
    [
        # n refused above 1: the run learns it and asks every draw in a request of its own.
        (SimSettings(certainty="varied", seed=5, max_n=1), ADAPTIVE),
        # The Responses API takes no n (nor a seed, nor fewer than 16 tokens).
        (
            SimSettings(certainty="varied", seed=5, responses_only="sim-judge"),
            {"n": N, "target_se": 0.2, "max_tokens": 16},
        ),
    ],
    ids=["n-refused", "responses-api"],
)
def test_an_endpoint_of_one_draw_a_request_saves_requests_and_cost(
    tmp_path: Path, settings: SimSettings, sampling: dict[str, object]
) -> None:
    # Every draw is a request of its own, the fixed study's too.
    judged = judged_with(tmp_path, settings, sampling)
    draws = judged.draws()
    items = judged.study.n_records
    assert draws["draws"].sum() == judged.samples
    assert draws["requests"].sum() == judged.answered == judged.samples
    assert (draws["requests"] == draws["draws"]).all()
    assert (draws["fixed_requests"] == N * items).all()
    assert (draws["saving"] > 0.2).all(), draws["saving"]
    assert "pays the prompt again" not in judged.report()


def test_answers_without_usage_are_priced_at_the_token_estimate(tmp_path: Path) -> None:
    study = write_study(tmp_path)
    with PlainJudge() as judge:  # answers "3" to every draw and reports no token counts
        judge_study(study, judge.base_url, sampling=ADAPTIVE, prices=PRICES)
        received = judge.received
    result = run_cli("report", str(study.config))
    assert result.returncode == 0, result.stderr
    draws = pd.read_csv(study.output / "stats" / "t_draws.csv").set_index("criterion")
    items = study.n_records
    # Three equal ratings settle every item at once: one request an item, as the fixed study.
    assert (draws["at_first_draws"] == 1.0).all()
    assert (draws["draws"] == FIRST * items).all()
    assert draws["requests"].sum() == received == 2 * items
    assert (draws["fixed_requests"] == items).all()
    assert set(draws["cost_basis"]) == {"estimated"}
    max_tokens = 5  # the test study's
    assert (draws["completion_tokens"] == max_tokens * FIRST * items).all()
    assert (draws["fixed_completion_tokens"] == max_tokens * N * items).all()
    assert (draws["fixed_prompt_tokens"] == draws["prompt_tokens"]).all()
    assert (draws["saving"] > 0).all()


def test_a_fixed_n_study_writes_no_draws_file_and_no_section(fixed: Judged) -> None:
    assert fixed.samples == N * 2 * fixed.study.n_records
    stats = fixed.study.output / "stats"
    assert (stats / "t_consistency.csv").exists()
    assert not (stats / "t_draws.csv").exists()
    assert "Draws spent by need" not in fixed.report()
    html = (fixed.study.output / "t_report.html").read_text(encoding="utf-8")
    assert "Draws spent by need" not in html


def test_a_cache_with_more_draws_counts_only_the_requests_of_the_draws_used(
    tmp_path: Path,
) -> None:
    settings = SimSettings(certainty="varied", seed=5)
    judged = judged_with(tmp_path, settings, ADAPTIVE)
    before = judged.draws()
    # A lower target asks the torn items for more draws: the cache then holds more requests
    # than the study at the first target used.
    with SimServer(settings) as sim:
        judge_study(judged.study, sim.base_url, sampling={**ADAPTIVE, "target_se": 0.1})
        assert sim.stats.samples > 0
    lower = run_cli("report", str(judged.study.config))
    assert lower.returncode == 0, lower.stderr
    assert (judged.draws()["requests"] > before["requests"]).all()
    judged.study.write_config(sim.base_url, sampling=ADAPTIVE, prices=PRICES)
    again = run_cli("report", str(judged.study.config))
    assert again.returncode == 0, again.stderr
    pd.testing.assert_frame_equal(judged.draws(), before)


# Last: Playwright keeps an event loop running in this thread once the browser is open, where a
# command's asyncio.run cannot start.
@needs_chromium
def test_the_html_report_shows_the_draws_per_criterion(
    adaptive: Judged, fixed: Judged, browser: Any
) -> None:
    draws = adaptive.draws()
    opened = open_report(browser, adaptive.study.output / "t_report.html")
    try:
        page = opened.page
        assert opened.console == []
        assert page.locator('nav a[href="#draws"]').count() == 1
        assert page.locator("#draws-title").text_content() == "Draws spent by need"
        rows = page.eval_on_selector_all(
            "#table-draws tbody tr",
            "rows => rows.map(r => Array.from(r.cells, c => c.textContent))",
        )
        assert [row[0] for row in rows] == list(CRITERIA)
        for row in rows:
            expected = draws.loc[row[0]]
            assert row[3] == f"{expected.draws:,}" and row[4] == f"{expected.fixed_draws:,}"
            assert row[7] == f"{expected.requests:,}"
            assert row[8] == f"{expected.fixed_requests:,}"
        sentences = page.locator("ul.draws li").all_text_contents()
        assert len(sentences) == len(CRITERIA)
        assert all("pays the prompt again" in s for s in sentences)
    finally:
        page.context.close()
    opened = open_report(browser, fixed.study.output / "t_report.html")
    try:
        assert opened.page.locator("#draws").count() == 0
        assert opened.page.locator('nav a[href="#draws"]').count() == 0
    finally:
        opened.page.context.close()
