"""Reading what judges write, end to end: config -> run against the simulated judge -> score.

The simulated judge writes each rating in the styles of real judge families
(``SimSettings.answer_styles``) while drawing the same rating for the same request, so a study
judged in "judges" styles must score exactly like the same study judged in plain numbers.
Parser settings (fractional, options, a custom regex or function) change only how the cached
answers are read: re-scoring sends nothing.
"""

from __future__ import annotations

import asyncio
import html
import math
import tomllib
from pathlib import Path

import pytest
from conftest import CRITERIA, PROMPT_A, PROMPT_B, StudyFiles, run_cli, write_records

import geval_async as ga
from geval_async.errors import ConfigError
from geval_async.scoring.reading.distributions import distribution_from_option_logprobs
from geval_async.sim import SimServer, SimSettings
from geval_async.study.config import load_config

LETTERS = {"A": 1, "B": 2, "C": 3, "D": 4, "E": 5}
THREE_LETTERS = {"A": 1, "B": 2, "C": 3}


def _study(
    root: Path,
    base_url: str,
    *,
    clar: dict[str, object] | None = None,
    fit: dict[str, object] | None = None,
    **sampling: object,
) -> Path:
    """A 6-user x 2-condition study: clar (1-5) and fit (1-3), with the criterion keys given."""
    (root / "prompts").mkdir(parents=True, exist_ok=True)
    (root / "prompts" / "clar.txt").write_text(PROMPT_A, encoding="utf-8")
    (root / "prompts" / "fit.txt").write_text(PROMPT_B, encoding="utf-8")
    if not (root / "records.jsonl").exists():
        write_records(root / "records.jsonl", 6)
    return StudyFiles.in_folder(root).write_config(
        base_url,
        sampling={"n": 8, "max_tokens": 200, **sampling},
        limits={"retries": 2, "timeout": 10},
        criteria=[{**CRITERIA[0], **(clar or {})}, {**CRITERIA[1], **(fit or {})}],
    )


def _judged_in_styles(root: Path, styles: str, **settings: object) -> tuple[Path, SimServer]:
    server = SimServer(SimSettings(answer_styles=styles, **settings))  # type: ignore[arg-type]
    server.start()
    config = _study(root, server.base_url)
    run = asyncio.run(ga.judge(config))
    assert run.complete
    return config, server


def _scores(config: Path) -> dict[tuple[str, str], float]:
    long = ga.load_results(config).long
    return {(r.record_id, r.criterion): r.score for r in long.itertuples()}


@pytest.fixture
def plain(tmp_path: Path) -> dict[tuple[str, str], float]:
    """The study judged in plain numbers: the ratings the simulated judge meant."""
    config, server = _judged_in_styles(tmp_path / "plain", "plain")
    server.stop()
    scores = _scores(config)
    assert ga.load_results(config).samples["reason"].isna().all()
    return scores


def test_every_judge_style_reads_back_the_rating_the_judge_meant(
    tmp_path: Path, plain: dict[tuple[str, str], float]
) -> None:
    config, server = _judged_in_styles(tmp_path / "judges", "judges")
    server.stop()
    results = ga.load_results(config)
    samples = results.samples
    # Words, stars, "N out of M", markdown, [[N]], [RESULT] N, counterfactuals, breakdowns and
    # quoted numbers all occur, and every one of them reads as the rating the judge meant.
    texts = " ".join(samples["text"])
    for marker in ("stars", "[[", "[RESULT]", "perfect score", "breakdown", "Euro 2016", "**"):
        assert marker in texts
    assert samples["reason"].isna().all(), samples[samples["reason"].notna()].head()
    assert _scores(config) == plain


def test_half_points_follow_the_fractional_setting_and_rescoring_sends_nothing(
    tmp_path: Path, plain: dict[tuple[str, str], float]
) -> None:
    root = tmp_path / "half"
    config, server = _judged_in_styles(root, "half")
    try:
        sent = server.stats.received
        keep = ga.load_results(config)
        halves = keep.samples["rating"]
        assert (halves % 1 == 0.5).any()  # "Final score: 3.5." is kept as 3.5 by default
        assert keep.samples["reason"].isna().all()

        for setting, expected_reason in (("round", None), ("invalid", "fractional")):
            _study(root, server.base_url, clar={"fractional": setting})
            assert asyncio.run(ga.judge(config)).complete
            results = ga.load_results(config)
            clar = results.samples[results.samples["criterion"] == "clar"]
            if expected_reason is None:
                # 3.5 rounds half up to 4: the rating the judge meant before writing it down.
                scores = _scores(config)
                assert {k: v for k, v in scores.items() if k[1] == "clar"} == {
                    k: v for k, v in plain.items() if k[1] == "clar"
                }
            else:
                assert set(clar["reason"].dropna()) == {"fractional"}
                assert clar["rating"].dropna().eq(1.0).all()  # only "1" is whole
        # Changing how answers are read re-reads the cache: not one request was sent.
        assert server.stats.received == sent
    finally:
        server.stop()


def test_letters_need_their_options_declared(
    tmp_path: Path, plain: dict[tuple[str, str], float]
) -> None:
    root = tmp_path / "letters"
    config, server = _judged_in_styles(root, "letters")
    server.stop()
    without = ga.load_results(config).samples
    assert set(without["reason"]) == {"no_rating"}

    _study(root, server.base_url, clar={"options": LETTERS}, fit={"options": THREE_LETTERS})
    assert _scores(config) == plain


def test_letters_in_logprobs_mode_read_the_option_tokens(tmp_path: Path) -> None:
    scores = {}
    for styles in ("plain", "letters"):
        with SimServer(SimSettings(answer_styles=styles)) as server:
            config = _study(tmp_path / styles, server.base_url, mode="logprobs", n=1)
            assert asyncio.run(ga.judge(config)).complete
        if styles == "letters":
            _study(
                tmp_path / styles,
                server.base_url,
                mode="logprobs",
                n=1,
                clar={"options": LETTERS},
                fit={"options": THREE_LETTERS},
            )
        scores[styles] = _scores(config)
    assert scores["letters"] == pytest.approx(scores["plain"])
    assert all(1 < v < 5 for (_, c), v in scores["letters"].items() if c == "clar")


def test_option_tokens_give_the_logprobs_distribution() -> None:
    top = [
        {"token": "D", "logprob": math.log(0.6)},
        {"token": " D", "logprob": math.log(0.1)},
        {"token": "E", "logprob": math.log(0.2)},
        {"token": "The", "logprob": math.log(0.1)},
    ]
    dist = distribution_from_option_logprobs(top, {"A": 1, "B": 2, "C": 3, "D": 4, "E": 5})
    assert dist.probs == pytest.approx({4: 0.7 / 0.9, 5: 0.2 / 0.9})
    agree = {"Strongly disagree": 1, "Disagree": 2, "Agree": 4, "Strongly agree": 5}
    words = [
        {"token": "Agree", "logprob": math.log(0.5)},
        {"token": "Strongly", "logprob": math.log(0.3)},  # starts two labels: tells nothing
        {"token": "Dis", "logprob": math.log(0.2)},
    ]
    assert distribution_from_option_logprobs(words, agree).probs == pytest.approx(
        {2: 0.2 / 0.7, 4: 0.5 / 0.7}
    )


def test_a_custom_regex_or_function_reads_a_house_style(
    tmp_path: Path, plain: dict[tuple[str, str], float]
) -> None:
    root = tmp_path / "house"
    config, server = _judged_in_styles(root, "prometheus")
    server.stop()
    regex = {"parser": "regex", "pattern": r"\[RESULT\] (?P<rating>\d)"}
    _study(root, server.base_url, clar=regex, fit=regex)
    assert _scores(config) == plain

    (root / "house.py").write_text(
        "def read(text):\n    return text.rsplit('[RESULT]', 1)[1].strip()\n", encoding="utf-8"
    )
    house = {"parser": "house:read"}
    _study(root, server.base_url, clar=house, fit=house)
    assert _scores(config) == plain


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('fractional = "floor"', "'fractional' must be one of keep, round, invalid"),
        ("options = { A = 1, F = 6 }", "option 'F' = 6 is not a point of the scale (1-5)"),
        ('parser = "nowhere:read"', "'parser' 'nowhere:read': cannot import nowhere"),
        ('parser = "regex"\npattern = "(a)(b)"', "needs a group named rating"),
        ('parser = "smart"', "'parser' must be one of lenient, geval, regex or 'module:function'"),
    ],
)
def test_bad_parser_settings_are_one_line_errors(tmp_path: Path, line: str, message: str) -> None:
    config = _study(tmp_path, "http://127.0.0.1:9/v1", clar=tomllib.loads(line))
    with pytest.raises(ConfigError, match=r"config\.toml: \[criteria #1 'clar'\]") as error:
        load_config(config)
    assert message in str(error.value) and "\n" not in str(error.value)
    result = run_cli("status", str(config))
    assert result.returncode == 2 and message in result.stderr


def test_invalid_reasons_per_condition_in_report_and_answers_command(tmp_path: Path) -> None:
    root = tmp_path / "uneven"
    records = root / "records.jsonl"
    root.mkdir()
    write_records(records, 6)
    rows = records.read_text().splitlines()
    with SimServer(SimSettings(invalid_answers=0.6, seed=1)) as server:
        # Condition A is judged by a judge that refuses often, B by one that never does.
        records.write_text("".join(r + "\n" for r in rows if '"A"' in r))
        config = _study(root, server.base_url, n=6)
        # Condition B is in no record yet: the comparison waits until it is (a load check).
        compared = config.read_text()
        config.write_text(compared.replace('conditions = ["A", "B"]', "conditions = []"))
        assert asyncio.run(ga.judge(config)).complete
        server.settings.invalid_answers = 0.0
        records.write_text("".join(r + "\n" for r in rows))
        config.write_text(compared)
        assert asyncio.run(ga.judge(config)).complete

    results = ga.load_results(config)
    shares = results.invalid_shares().set_index(["criterion", "condition"])
    assert shares.loc[("clar", "B"), "invalid"] == 0
    assert shares.loc[("clar", "A"), "share"] > 0.3
    assert shares.loc[("clar", "A"), "refused"] == shares.loc[("clar", "A"), "invalid"]
    assert {d.criterion for d in results.share_differences()} == {"clar", "fit"}

    report = run_cli("report", str(config))
    assert report.returncode == 0, report.stderr
    assert "warning: clar:" in report.stdout and "different subsets" in report.stdout
    text = (root / "out" / "t_report.md").read_text()
    assert "## Invalid samples" in text
    assert "| clar | A | 36 |" in text and "| clar | B | 36 | 0 | 0.0% |" in text
    assert "> **Warning:** clar:" in text and "Fisher's exact" in text
    # The HTML report says the same, next to its invalid reasons.
    [page] = ga.write_outputs(results, ["html"], html=True)
    shown = html.unescape(page.read_text())
    for difference in results.share_differences():
        assert difference.warning() in shown
    assert "<code>refused</code>: the judge declined, or said nothing" in shown

    status = run_cli("status", str(config))
    assert status.returncode == 0, status.stderr
    assert "invalid samples" in status.stdout and "warning: fit:" in status.stdout

    listing = run_cli("answers", str(config), "--criterion", "clar")
    assert listing.returncode == 0, listing.stderr
    invalid = int(shares.loc[("clar", "A"), "invalid"])
    assert f"{invalid:6d}  refused     'i cannot rate this text.'  [clar]" in listing.stdout
    assert "e.g. u00" in listing.stdout

    valid = ga.read_answers(config, criterion="clar", reason="valid")
    assert len(valid) == 72 - invalid and valid["rating"].notna().all()
    frame = ga.read_answers(config, criterion="clar", reason="refused")
    assert len(frame) == invalid and set(frame["condition"]) == {"A"}
    assert list(frame.columns) == [
        "record_id", "group", "condition", "criterion", "rubric", "draw", "text", "rating",
        "reason", "reasoning",
    ]  # fmt: skip

    story = run_cli("answers", str(config), "--record", "u001-B", "--criterion", "fit")
    assert story.returncode == 0, story.stderr
    assert "=== fit ===" in story.stdout and "=== clar ===" not in story.stdout
    assert "Reader: reader 1 who likes tables" in story.stdout  # the rendered prompt
    assert story.stdout.count("[draw ") == 6 and "] rating " in story.stdout


def test_answers_cut_off_by_max_tokens_say_so(tmp_path: Path) -> None:
    with SimServer(SimSettings(answer_styles="counterfactual")) as server:
        config = _study(tmp_path, server.base_url, max_tokens=3)
        assert asyncio.run(ga.judge(config)).complete
    # 12 characters: "The text rec" and no rating yet.
    assert set(ga.read_answers(config)["reason"]) == {"cut_off"}


def test_a_prompt_stating_another_scale_warns_and_strict_refuses(tmp_path: Path) -> None:
    with SimServer(SimSettings()) as server:
        config = _study(tmp_path, server.base_url, fit={"scale": [1, 5]})
        dry = run_cli("run", str(config), "--dry-run")
        assert dry.returncode == 0
        warning = "criterion 'fit' is declared on 1-5 but its prompt states a 1-3 scale"
        assert warning in dry.stderr and "fit.txt" in dry.stderr
        strict = run_cli("run", str(config), "--strict")
        assert strict.returncode == 2 and warning in strict.stderr
        assert server.stats.received == 0  # nothing half-done: refused before sending
        assert asyncio.run(ga.judge(config)).complete
    score = run_cli("score", str(config), "--strict")
    assert score.returncode == 2 and warning in score.stderr
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="declared on 1-5"):
        ga.load_results(config, strict=True)
    assert ga.load_results(config).warnings[0].endswith("or the prompt's text)")
