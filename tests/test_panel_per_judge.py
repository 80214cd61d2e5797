"""A panel's commands and keywords work per judge: ``answers`` and
``cache migrate`` read every judge (or the ``--judge``), ``apply_overrides`` follows the rule
``ga.judge`` follows, and a judge's missing key names its ``[[judges]]`` entry.

Two simulated judges on their own loopback ports (models sim-a and sim-b), one cache.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import diskcache
import pytest
from conftest import (
    ROOT,
    StudyFiles,
    assert_no_judge_named,
    cache_snapshot,
    no_judge_named,
    run_cli,
    running_sims,
    sim_judges,
)

import geval_async as ga
from geval_async.judging.run.panel import PanelRunResult
from geval_async.sim import SimServer
from geval_async.study.config import apply_overrides, load_config

NAMES = ("a", "b")


@pytest.fixture
def sims() -> Iterator[dict[str, SimServer]]:
    with running_sims(NAMES) as servers:
        yield servers


def two_judges(study: StudyFiles, sims: dict[str, SimServer]) -> Path:
    return study.write_panel(sim_judges(sims))


# --- answers ---------------------------------------------------------------------------------


def test_answers_on_a_panel_shows_every_judges_answers_labelled_or_the_judge_chosen(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    sims["b"].settings.invalid_answers = 0.5  # only judge b writes answers without a rating
    config = two_judges(study, sims)
    assert run_cli("run", str(config), "--quiet").returncode == 0

    every = run_cli("answers", str(config))
    assert every.returncode == 0, every.stderr
    samples = 3 * 2 * study.n_records
    blocks = re.split(r"^judge (\w+) \(", every.stdout, flags=re.MULTILINE)[1:]
    shown = dict(zip(blocks[0::2], blocks[1::2], strict=True))
    assert list(shown) == ["a", "b"]
    assert shown["a"].startswith("sim-a at ") and shown["b"].startswith("sim-b at ")
    assert f"0 of {samples} answers are invalid" in shown["a"]
    invalid_b = int(re.search(rf"(\d+) of {samples} answers are invalid", shown["b"])[1])  # type: ignore[index]
    assert 0 < invalid_b < samples
    assert "by reason and shape of text:" in shown["b"]

    chosen = run_cli("answers", str(config), "--judge", "b")
    assert chosen.returncode == 0, chosen.stderr
    assert "judge a" not in chosen.stdout
    assert chosen.stdout.startswith(f"{invalid_b} of {samples} answers are invalid")

    # one record's story, per judge: each judge's own answers under its name
    record = "u000-A"
    story = run_cli("answers", str(config), "--record", record, "--criterion", "clar")
    assert story.returncode == 0, story.stderr
    assert story.stdout.count(f"record {record} ") == 2
    assert story.stdout.count("--- 3 answers ---") == 2
    assert re.search(r"^judge a \(sim-a .*^judge b \(sim-b ", story.stdout, re.M | re.S)

    # the same in Python: every judge's answers, a judge column first, or one judge's
    frame = ga.read_answers(config, reason="invalid")
    assert list(frame.columns)[0] == "judge"
    assert frame["judge"].value_counts().to_dict() == {"b": invalid_b}
    every_answer = ga.read_answers(config)
    assert every_answer["judge"].value_counts().to_dict() == {"a": samples, "b": samples}
    b_alone = ga.read_answers(config, judge="b")
    assert "judge" not in b_alone and len(b_alone) == samples
    assert b_alone["reason"].notna().sum() == invalid_b

    unknown = run_cli("answers", str(config), "--judge", "c")
    assert_no_judge_named(unknown, config, "c", "a, b")


def test_answers_on_a_panel_names_a_judge_not_run_yet_and_fails_when_none_was(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    config = two_judges(study, sims)
    assert run_cli("run", str(config), "--quiet", "--judge", "b").returncode == 0
    some = run_cli("answers", str(config))
    assert some.returncode == 0, some.stderr
    a, b = re.split(r"^judge b \(", some.stdout, flags=re.MULTILINE)
    assert "the cache holds no answer of this judge" in a and "answers are invalid" not in a
    assert "0 of 144 answers are invalid" in b

    empty = study.root / "empty"
    assert (
        run_cli("run", str(config), "--quiet", "--limit", "1", "--cache", str(empty)).returncode
        == 0
    )
    for entry in list(cache_snapshot(empty)):
        with diskcache.Cache(str(empty)) as cache:
            cache.delete(entry)
    none = run_cli("answers", str(config), "--cache", str(empty))
    assert none.returncode == 2
    lines = none.stderr.strip().splitlines()
    assert len(lines) == 1 and "holds no answer of any judge (a, b)" in lines[0], lines


# --- cache migrate ---------------------------------------------------------------------------

LEGACY = ROOT / "tests" / "data" / "legacy"


def _load_legacy(cache_path: Path) -> int:
    """The entries the first key scheme wrote for the test study's judge sim-judge, n = 3."""
    rows = [json.loads(line) for line in (LEGACY / "samples_n3.jsonl").read_text().splitlines()]
    with diskcache.Cache(str(cache_path)) as cache:
        for row in rows:
            cache.set(row["key"], row["value"].encode())
    return len(rows)


def test_cache_migrate_on_a_panel_moves_every_judges_entries_or_the_judge_chosen(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    # The old entries are of judge "old" (sim-judge), the panel's second judge: a migration of
    # the first judge's alone would move none of them.
    _load_legacy(study.cache)
    judges = {
        "new": {"model": "sim-new", "base_url": sims["a"].base_url},
        "old": {"model": "sim-judge", "base_url": sims["b"].base_url},
    }
    config = study.write_panel(judges)
    items = 2 * study.n_records

    chosen = run_cli("cache", "migrate", str(config), "--judge", "new")
    assert chosen.returncode == 0, chosen.stderr
    assert "moved 0 entries" in chosen.stdout
    assert "belong to no item of this study" in chosen.stdout  # judge old's, still there
    assert {key[:3] for key in cache_snapshot(study.cache)} == {"g1-"}

    every = run_cli("cache", "migrate", str(config))
    assert every.returncode == 0, every.stderr
    assert re.search(r"^judge new: moved 0 entries", every.stdout, re.M), every.stdout
    assert re.search(rf"^judge old: moved {items} entries", every.stdout, re.M), every.stdout
    assert "belong to no item" not in every.stdout
    assert {key[:3] for key in cache_snapshot(study.cache)} == {"g2-"}

    # the moved answers are judge old's, and a run asks only judge new for anything
    run = run_cli("run", str(config), "--quiet")
    assert run.returncode == 0, run.stderr
    assert (sims["a"].stats.received, sims["b"].stats.received) == (items, 0)


# --- the Python API's overrides --------------------------------------------------------------


def test_apply_overrides_on_a_panel_patches_every_judge_or_the_judge_chosen(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    config = load_config(two_judges(study, sims))
    every = apply_overrides(config, n=1, rpm=30)
    assert every.is_panel
    assert [(m.sampling.n, m.limits.rpm) for m in every.members()] == [(1, 30), (1, 30)]
    assert [m.sampling.n for m in config.members()] == [3, 3]  # the loaded config unchanged

    one = apply_overrides(config, judge="b", model="other", n=2)
    assert not one.is_panel
    assert (one.judge.model, one.judge.url, one.sampling.n) == (
        "other",
        f"{sims['b'].base_url}/chat/completions",
        2,
    )
    with pytest.raises(ga.ConfigError, match=r"^model= on a panel config .*judge=NAME .*a, b\)$"):
        apply_overrides(config, model="other")
    with pytest.raises(ga.ConfigError, match=re.escape(no_judge_named("c", "a, b"))):
        apply_overrides(config, judge="c")


async def test_the_library_doors_read_a_panels_overrides_alike(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    path = two_judges(study, sims)
    run = await ga.judge(path, n=1, limit=2)
    assert isinstance(run, PanelRunResult) and run.complete
    assert [s.stats.samples for s in sims.values()] == [4, 4]  # n = 1 for each judge
    # load_results reads with the same rule: n = 1 for every judge (the cache holds no more)
    panel = ga.load_results(path, n=1, limit=2)
    assert len(panel.long) == 4 and panel.long["score"].notna().all()
    assert panel.long["judges_scored"].tolist() == [2, 2, 2, 2]
    one = ga.load_results(path, judge="a", n=1, limit=2)
    assert one.config.judge.model == "sim-a" and "judges_scored" not in one.long
    assert one.long["score"].tolist() == panel.members["a"].long["score"].tolist()


# --- a judge's missing key -------------------------------------------------------------------


def test_a_panel_judges_missing_key_names_its_judges_entry_never_a_key(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    secret = "sk-judge-a-0123456789abcdef"
    sims["a"].settings.api_key = secret  # judge a's server wants its key: it is sent
    judges = {
        "a": {"model": "sim-a", "base_url": sims["a"].base_url, "api_key_env": "A_KEY"},
        "b": {"model": "sim-b", "base_url": "https://judge.invalid/v1", "api_key_env": "B_KEY"},
    }
    config = study.write_panel(judges)
    entry = '[[judges]] name = "b" api_key_env = "B_KEY"'
    expected = f"no API key: set the environment variable B_KEY (named by {entry} in {config})"

    done = run_cli("run", str(config), "--quiet", env={"A_KEY": secret, "B_KEY": ""})
    assert done.returncode == 2, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("judge b "))
    assert line.endswith(f"not judged: {expected}")
    assert sims["a"].stats.by_status[200] == 2 * study.n_records  # a judged, with its key
    assert "[judge] api_key_env" not in done.stdout + done.stderr
    assert secret not in done.stdout + done.stderr

    alone = run_cli("run", str(config), "--quiet", "--judge", "b", env={"A_KEY": secret})
    assert alone.returncode == 2
    assert alone.stderr.strip().splitlines() == [f"error: {expected}"]
    with pytest.raises(ga.ConfigError) as raised:
        apply_overrides(load_config(config), judge="b").required_api_key()
    assert str(raised.value) == expected
