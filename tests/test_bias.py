"""What the judge may be reacting to: the bias table, the reports' section and its settings.

Each check is held against what the simulated judge was told to do: a judge whose ratings rise
with length by a set amount (``length_effect``; the rank correlation that puts in is worked out
from the judge's own record of each prompt's length and the score it meant), a judge that
answers nearly always one rating (``collapse``), and the plain judge, whose ratings follow no
length, family or position and raise no flag. Studies are judged over HTTP by the real
command, and read back from the files a user opens.
"""

from __future__ import annotations

import json
import random
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import PROMPT_A, StudyFiles, needs_chromium, open_report, run_cli, run_process
from scipy import stats as sps

from geval_async import ConfigError, load_results
from geval_async.notebook import Criterion, evaluate
from geval_async.scoring.output.report import bias_flags
from geval_async.scoring.scores.bias_checks import JudgeReactions, valid_ratings
from geval_async.scoring.stats.bias import (
    ADVICE,
    BIAS_COLUMNS,
    BiasCheck,
    bias_frame,
    model_family,
    position_rows,
    scale_rows,
    self_preference_row,
    spearman_interval,
)
from geval_async.sim import SimServer, SimSettings
from geval_async.study.config import apply_overrides, load_config

CLARITY = [{"name": "clar", "prompt": "prompts/clar.txt", "scale": [1, 5], "fields": ["text"]}]


def write_lengthy_study(root: Path, users: int = 40, *, long_writer: str = "") -> StudyFiles:
    """``users`` x 2 conditions whose texts run from about 100 to 3,000 characters (the same
    spread in both conditions), each naming the model that wrote it in ``writer``: gpt-4o for
    the longer half of the texts when ``long_writer`` is "gpt", else alternately."""
    (root / "prompts").mkdir()
    (root / "prompts" / "clar.txt").write_text(PROMPT_A, encoding="utf-8")
    draw = random.Random(5)
    rows = []
    for user in range(users):
        for condition in ("A", "B"):
            words = draw.randint(20, 600)
            rows.append(
                {
                    "id": f"u{user:03d}-{condition}",
                    "user": f"u{user:03d}",
                    "condition": condition,
                    "text": " ".join(
                        draw.choice(["tea", "river", "a", "lantern"]) for _ in range(words)
                    ),
                }
            )
    median = sorted(len(r["text"]) for r in rows)[len(rows) // 2]
    for number, row in enumerate(rows):
        longer = len(row["text"]) >= median
        gpt = longer if long_writer == "gpt" else number % 2 == 0
        row["writer"] = "gpt-4o" if gpt else "Llama-3.1-8B-Instruct"
    records = root / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return StudyFiles(root, root / "config.toml", records, root / "cache", root / "out", len(rows))


def judge(study: StudyFiles, server: SimServer, **sections: Any) -> None:
    """Write the study's config for ``server`` and judge it with the real command."""
    study.write_config(server.base_url, criteria=CLARITY, **sections)
    result = run_cli("run", str(study.config), "--quiet")
    assert result.returncode == 0, result.stderr


def rows_of(frame: pd.DataFrame, check: str, **where: str) -> pd.DataFrame:
    keep = frame["check"] == check
    for column, value in where.items():
        keep &= frame[column] == value
    return frame[keep]


def test_an_injected_length_effect_is_recovered_and_flagged(tmp_path: Path) -> None:
    study = write_lengthy_study(tmp_path)
    with SimServer(SimSettings(length_effect=1.2)) as server:
        # Logprobs: each record's weighted score is the expected rating of a distribution
        # centred on the judge's hidden score, so it ranks the records as that score does.
        judge(study, server, sampling={"mode": "logprobs", "n": 1})
        intended = list(server.stats.intended.values())
    assert len(intended) == study.n_records
    lengths, meant = zip(*intended, strict=True)
    injected = sps.spearmanr(meant, lengths).statistic
    assert injected > 0.5  # the effect put in is strong: the check must see it

    result = run_cli("report", str(study.config))
    assert result.returncode == 0, result.stderr
    table = pd.read_csv(study.output / "stats" / "t_bias.csv")
    assert list(table.columns) == BIAS_COLUMNS
    pooled = rows_of(table, "length", criterion="clar", condition="all").iloc[0]
    assert abs(pooled["value"] - injected) <= 0.05
    assert pooled["ci_low"] > 0 and bool(pooled["flagged"])
    assert pooled["n"] == study.n_records
    assert pooled["note"] == "length of text in characters"
    assert pooled["advice"] == ADVICE[BiasCheck.LENGTH]
    # Within each condition too: the same effect, on half the records each.
    within = rows_of(table, "length", criterion="clar")
    assert sorted(within["condition"]) == ["A", "B", "all"]
    assert within["flagged"].astype(bool).all()

    report = (study.output / "t_report.md").read_text(encoding="utf-8")
    section = report.split("## What the judge may be reacting to", 1)[1]
    a, b = (rows_of(within, "length", condition=c).iloc[0] for c in ("A", "B"))
    found = "; ".join(
        f"{r['value']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]{scope}"
        for r, scope in ((pooled, ""), (a, " in A"), (b, " in B"))
    )
    assert f"length (clar): Spearman rho, score vs length = {found}. " in section
    assert ADVICE[BiasCheck.LENGTH] in section
    assert "`stats/t_bias.csv`" in section


def test_the_plain_judge_raises_no_flag(tmp_path: Path) -> None:
    study = write_lengthy_study(tmp_path)
    with SimServer(SimSettings()) as server:
        judge(
            study,
            server,
            data={"writer": "writer"},
            judge={"model": "gpt-4o-mini"},  # the family of half the texts' writers
        )
    results = load_results(study.config)
    table = results.bias()
    assert set(table["check"]) == {"length", "scale", "self_preference"}
    assert not table["flagged"].any(), table[table["flagged"]]
    own = rows_of(table, "self_preference").iloc[0]
    assert own["note"].startswith(f"judge family openai: {study.n_records // 2} own texts")
    assert "may differ in quality too" in own["note"]
    assert results.reactions.notes == ()
    run_cli("report", str(study.config))
    report = (study.output / "t_report.md").read_text(encoding="utf-8")
    assert "No check is flagged." in report


def test_a_collapsed_scale_is_flagged(tmp_path: Path) -> None:
    study = write_lengthy_study(tmp_path, users=12)
    with SimServer(SimSettings(collapse=0.9, collapse_rating=4)) as server:
        judge(study, server)
    table = load_results(study.config).bias()
    # The ratings counted are the answers' own, as the samples table reads them.
    results = load_results(study.config)
    samples = results.samples
    read = samples.loc[samples["reason"].isna(), "rating"].to_numpy(float)
    counted = valid_ratings(results.columns)
    assert list(counted) == ["clar"] and sorted(counted["clar"]) == sorted(read)
    top = rows_of(table, "scale", criterion="clar", measure="top_share").iloc[0]
    assert top["value"] >= 0.8 and top["flagged"]
    assert top["note"] == "most common rating 4"
    assert top["n"] == study.n_records * 3  # every valid draw: n = 3
    assert top["advice"] == ADVICE[BiasCheck.SCALE]
    # The length check sees no length effect here.
    assert not rows_of(table, "length")["flagged"].any()


def test_a_judge_scoring_its_own_familys_texts_higher_is_flagged_with_the_caveat(
    tmp_path: Path,
) -> None:
    # The judge's family wrote the longer texts, and this judge likes length: its own
    # family's texts score higher, though not for being its own (the caveat says why).
    study = write_lengthy_study(tmp_path, long_writer="gpt")
    with SimServer(SimSettings(length_effect=1.2)) as server:
        judge(
            study,
            server,
            data={"writer": "writer"},
            judge={"model": "sim-judge"},
            bias={"judge_family": "OpenAI"},
        )
    table = load_results(study.config).bias()
    own = rows_of(table, "self_preference").iloc[0]
    assert own["flagged"] and own["value"] > 0 and own["ci_low"] > 0 and own["p"] < 0.05
    assert "may differ in quality too" in own["note"]
    run_cli("report", str(study.config))
    report = (study.output / "t_report.md").read_text(encoding="utf-8")
    assert ADVICE[BiasCheck.SELF_PREFERENCE] in report


def test_a_collapsed_judge_in_logprobs_mode_puts_its_likeliest_rating_on_one_point(
    tmp_path: Path,
) -> None:
    study = write_lengthy_study(tmp_path, users=10)
    with SimServer(SimSettings(collapse=0.9, collapse_rating=9)) as server:  # 9: the top, 5
        judge(study, server, sampling={"mode": "logprobs"})
    table = load_results(study.config).bias()
    top = rows_of(table, "scale", measure="top_share").iloc[0]
    assert top["flagged"] and top["note"] == "most common rating 5" and top["n"] == 20


def test_the_judges_record_of_what_it_meant_is_served_with_its_ratings(tmp_path: Path) -> None:
    """``GET /sim/stats?ratings=1`` gives each answered body's prompt length and the score it
    meant, as a benchmark in another process reads them."""
    study = write_lengthy_study(tmp_path, users=3)
    with SimServer(SimSettings(length_effect=2.0)) as server:
        judge(study, server)
        with urllib.request.urlopen(f"{server.root_url}/sim/stats?ratings=1") as answer:
            served = json.loads(answer.read())
        kept = server.stats.intended
    assert served["intended"] == {digest: list(meant) for digest, meant in kept.items()}
    assert len(kept) == study.n_records  # one request per record: n = 3 in one request
    lengths = {length for length, _ in kept.values()}
    prompts = {len(PROMPT_A.replace("{{text}}", json.loads(line)["text"]))
               for line in study.records.read_text().splitlines()}  # fmt: skip
    assert lengths == prompts


def test_checks_not_made_say_what_would_make_them(tmp_path: Path) -> None:
    study = write_lengthy_study(tmp_path, users=6)
    with SimServer(SimSettings()) as server:
        judge(study, server)
        assert load_results(study.config).reactions.notes == (
            "self-preference: no [data] writer field names the model that wrote each text",
        )
        judge(study, server, data={"writer": "writer"})  # the judge: "sim-judge"
    notes = load_results(study.config).reactions.notes
    assert notes == (
        "self-preference: the family of judge 'sim-judge' is not known: name it in [bias] "
        'judge_family (e.g. "openai", "meta")',
    )


def test_the_writer_field_survives_an_override_of_its_section(tmp_path: Path) -> None:
    study = write_lengthy_study(tmp_path, users=2)
    study.write_config("http://127.0.0.1:9/v1", criteria=CLARITY, data={"writer": "writer"})
    config = apply_overrides(load_config(study.config), limit=2)  # --limit patches [data]
    assert (config.data.writer_field, config.limit) == ("writer", 2)


def test_a_study_built_in_code_takes_the_writer_and_the_bias_table(tmp_path: Path) -> None:
    study = write_lengthy_study(tmp_path, users=6)
    frame = pd.read_json(study.records, lines=True, dtype=False)
    clarity = Criterion("clar", PROMPT_A, scale=(1, 5), fields=["text"])
    with SimServer(SimSettings()) as server:
        keywords: dict[str, Any] = {
            "judge": "sim-judge", "base_url": server.base_url, "group": "user",
            "condition": "condition", "n": 2, "cache": study.cache, "output": study.output,
            "progress": False, "writer": "writer", "folder": tmp_path / "saved",
        }  # fmt: skip
        results = evaluate(frame, clarity, bias={"judge_family": "openai"}, **keywords)
        assert results.config.bias.judge_family == "openai"
        own = rows_of(results.bias(), "self_preference").iloc[0]
        assert own["note"].startswith("judge family openai: 6 own texts vs 6 others'")
        with pytest.raises(ConfigError) as bad:
            evaluate(frame, clarity, bias={"bootstrap": "many"}, **keywords)
    assert "[bias] 'bootstrap'" in str(bad.value) and "\n" not in str(bad.value)


def test_length_field_names_the_text_judged(tmp_path: Path) -> None:
    study = write_lengthy_study(tmp_path, users=6)
    with SimServer(SimSettings()) as server:
        judge(study, server, bias={"length_field": {"clar": "writer"}})
    table = load_results(study.config).bias()
    pooled = rows_of(table, "length", condition="all").iloc[0]
    assert pooled["note"] == "length of writer in characters"
    # Condition A's texts were all written by one model: one length, no correlation.
    within = rows_of(table, "length", condition="A").iloc[0]
    assert within["note"] == "length of writer in characters; every record has the same length"
    assert pd.isna(within["value"]) and not within["flagged"]


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        (
            {"bias": {"length_field": {"coh": "text"}}},
            "[bias] 'length_field' names 'coh', which is not a criterion (clar)",
        ),
        ({"bias": {"bootstrap": -1}}, "[bias] 'bootstrap' must be 0 (no intervals) or more"),
        ({"bias": {"judge_family": " "}}, "[bias] 'judge_family' must name a model family"),
        ({"bias": {"colour": "red"}}, "[bias]"),
    ],
)
def test_bad_bias_settings_are_one_line_errors(
    tmp_path: Path, sections: dict[str, Any], expected: str
) -> None:
    study = write_lengthy_study(tmp_path, users=2)
    study.write_config("http://127.0.0.1:9/v1", criteria=CLARITY, **sections)
    result = run_cli("report", str(study.config))
    assert result.returncode == 2
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        (
            {"bias": {"length_field": "summary"}},
            "record 'u000-A': field 'summary' is missing ([bias] length_field names it for "
            "criterion 'clar')",
        ),
        ({"data": {"writer": "author"}}, "[data] writer names field 'author', which no record"),
    ],
)
def test_a_field_the_records_lack_is_named_and_nothing_is_written(
    tmp_path: Path, sections: dict[str, Any], expected: str
) -> None:
    study = write_lengthy_study(tmp_path, users=2)
    with SimServer(SimSettings()) as server:
        judge(study, server, **sections)
    result = run_cli("report", str(study.config))
    assert result.returncode == 2
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not study.output.exists()


def test_spearman_interval_says_why_it_is_missing() -> None:
    x, y = [1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5]
    rho, low, high, p, note = spearman_interval(x, y)
    assert (rho, p) == pytest.approx(tuple(sps.spearmanr(x, y)))
    assert low <= rho <= high and note == ""
    assert spearman_interval([1, 2], [3, 4])[4] == "fewer than 3 scored records"
    assert spearman_interval([3, 3, 3], [1, 2, 3])[4] == "every record has the same score"
    assert spearman_interval(x, y, interval=False)[1:] == pytest.approx(
        (np.nan, np.nan, p, "no interval: [bias] interval = false"), nan_ok=True
    )


@pytest.mark.parametrize("n", [37, 20_000, 20_001, 250_000])
def test_the_interval_is_bonett_and_wrights_at_every_size(n: int) -> None:
    """Fisher's z of rho with the variance (1 + rho^2 / 2) / (n - 3), worked out here, for a
    small study and a large one alike (ties in the scores, as weighted scores have)."""
    draw = np.random.default_rng(8)
    x = np.round(draw.normal(size=n), 1)
    y = np.round(x * 0.5 + draw.normal(size=n))
    rho, low, high, _, note = spearman_interval(x, y, confidence=0.9)
    half = sps.norm.ppf(0.95) * np.sqrt((1 + rho**2 / 2) / (n - 3))
    expected = np.tanh(np.arctanh(rho) + np.array([-half, half]))
    assert [low, high] == pytest.approx(list(expected), abs=1e-12)
    assert note == ""


def test_the_interval_covers_a_known_correlation_as_often_as_it_says() -> None:
    """Studies of 60 records drawn from a population whose Spearman's rho is known: about
    95% of the intervals cover it (1,000 studies: 0.94-0.975 is about 2.5 standard errors of
    the share either side of the 0.96 it reaches with ties in the scores)."""
    draw = np.random.default_rng(11)

    def records(n: int) -> tuple[np.ndarray, np.ndarray]:
        quality = draw.normal(size=n)
        length = 0.5 * quality + np.sqrt(0.75) * draw.normal(size=n)
        return np.round(quality * 2) / 2, length  # scores in halves: ties

    truth = sps.spearmanr(*records(1_000_000)).statistic
    intervals = [spearman_interval(*records(60))[1:3] for _ in range(1000)]
    covered = [low <= truth <= high for low, high in intervals]
    assert 0.94 <= np.mean(covered) <= 0.975


def test_scale_use_counts_points_shares_and_entropy() -> None:
    top, used, entropy = scale_rows("c", [4, 4, 4, 2, float("nan")], [1, 2, 3, 4, 5])
    assert (top.value, top.n, top.flagged, top.note) == (0.75, 4, False, "most common rating 4")
    assert (used.value, used.note) == (0.4, "2 of 5 points")
    assert entropy.value == pytest.approx(0.811278, abs=1e-6)
    assert scale_rows("c", [3, 3, 3, 3, 3], [1, 2, 3])[0].flagged


def test_self_preference_with_one_side_constant_is_still_tested() -> None:
    row = self_preference_row("c", [5, 5, 5, 5], [1, 2, 3, 2, 1], "openai")
    assert row.value == pytest.approx(3.2) and row.p < 0.05 and row.flagged
    assert row.ci_low > 0 and row.advice == ADVICE[BiasCheck.SELF_PREFERENCE]
    lower = self_preference_row("c", [1, 2, 1, 2], [4, 5, 4, 5], "openai")
    assert lower.value < 0 and lower.p < 0.05 and not lower.flagged  # it favours the others


def test_a_position_bias_from_the_pairwise_statistics_is_a_row_of_the_table() -> None:
    """The pairwise statistics' columns (one row per criterion and pair of conditions) give
    the position rows; an interval that excludes 0.5 is flagged, with what to do."""
    pairwise = pd.DataFrame(
        {
            "criterion": ["pref", "pref_rel"],
            "a": ["UEQ-mLLM", "UEQ-mLLM"],
            "b": ["UEQ-sLLM", "UEQ-sLLM"],
            "first_shown_wins": [0.62, 0.51],
            "first_ci_low": [0.55, 0.44],
            "first_ci_high": [0.69, 0.58],
            "first_shown_verdicts": [200, 190],
        }
    )
    frame = bias_frame(position_rows(pairwise))
    assert list(frame["check"]) == ["position", "position"]
    assert list(frame["condition"]) == ["UEQ-mLLM vs UEQ-sLLM"] * 2
    assert list(frame["flagged"]) == [True, False]
    assert list(frame["n"]) == [200, 190]
    flags = bias_flags(JudgeReactions(frame))
    assert flags == [
        "position (pref): share won by the text shown first = 0.620 [0.550, 0.690] in "
        f"UEQ-mLLM vs UEQ-sLLM. {ADVICE[BiasCheck.POSITION]}"
    ]


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("gpt-4o-mini", "openai"),
        ("o3-mini", "openai"),
        ("claude-3-5-sonnet-20241022", "anthropic"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta"),
        ("llama3:8b", "meta"),
        ("Qwen2.5-7B-Instruct", "qwen"),
        ("mixtral-8x7b", "mistral"),
        ("gemma-2-9b-it", "google"),
        ("deepseek-chat", "deepseek"),
        ("Meta", "meta"),
        ("sim-judge", None),
        ("my-finetune", None),
    ],
)
def test_model_families_by_name(name: str, family: str | None) -> None:
    assert model_family(name) == family


@needs_chromium
def test_the_html_bias_section_shows_the_flags_and_what_to_do(tmp_path: Path, browser: Any) -> None:
    study = write_lengthy_study(tmp_path)
    with SimServer(SimSettings(length_effect=1.2)) as server:
        study.write_config(server.base_url, criteria=CLARITY, sampling={"mode": "logprobs"})
        # A subprocess: Playwright's sync API keeps an event loop running in this thread.
        result = run_process("run", str(study.config), "--quiet")
        assert result.returncode == 0, result.stderr
    result = run_process("report", str(study.config), "--html")
    assert result.returncode == 0, result.stderr
    opened = open_report(browser, study.output / "t_report.html")
    try:
        page = opened.page
        assert opened.console == []
        assert all(url.startswith("file://") for url in opened.requests)
        page.click("nav a[href='#bias']")
        section = page.locator("section#bias")
        assert section.is_visible()
        assert section.locator("h2").inner_text() == "What the judge may be reacting to"
        flags = section.locator("ul.bias-flags li").all_inner_texts()
        assert any(
            f.startswith("Flag: length (clar)") and ADVICE[BiasCheck.LENGTH] in f for f in flags
        )
        table = pd.read_csv(study.output / "stats" / "t_bias.csv")
        cells = section.locator("#table-bias tbody tr").all()
        assert len(cells) == len(table)
        shown = [row.locator("th, td").all_inner_texts() for row in cells]
        for row, (_, expected) in zip(shown, table.iterrows(), strict=True):
            assert row[:4] == [
                expected["check"],
                expected["criterion"],
                expected["condition"],
                expected["measure"],
            ]
            assert row[4] == f"{expected['value']:.3f}"
            assert row[-2] == ("yes" if expected["flagged"] else "no")
        notes = section.locator(".bias-notes li").all_inner_texts()
        assert notes == [
            "self-preference: no [data] writer field names the model that wrote each text."
        ]
    finally:
        page.context.close()


def test_the_length_interval_is_switched_by_interval_and_by_the_older_bootstrap_0(
    tmp_path: Path,
) -> None:
    from geval_async.study.reader import TableReader
    from geval_async.study.sections import SECTION_KEYS, parse_bias

    def read(table: dict[str, object]) -> bool:
        reader = TableReader(tmp_path / "c.toml", "bias", table, SECTION_KEYS["bias"])
        return parse_bias(reader, ["con"]).interval

    assert read({}) is True
    assert read({"interval": False}) is False
    assert read({"bootstrap": 0}) is False
    assert read({"bootstrap": 1000, "seed": 3}) is True
