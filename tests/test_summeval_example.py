"""The SummEval example (examples/summeval) end to end against the simulated judge.

The data lives beside the repository (../shared/data/summeval) and is never copied into it; the
tests read it there and write everything else (cache, outputs, compare.jsonl) to tmp_path.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT, needs_summeval, run_cli

import geval_async as ga
from geval_async.sim import SimServer
from geval_async.study.config import load_config, parse_config
from geval_async.study.plan import plan_items, render_messages
from geval_async.study.prepare import prepare_study

EXAMPLE = ROOT / "examples" / "summeval"
pytestmark = needs_summeval
CRITERIA = ("coh", "con", "flu", "rel")
FAST = ("--rpm", "1000000", "--tpm", "1000000000")


def test_the_slice_is_ten_whole_articles() -> None:
    config = load_config(EXAMPLE / "slice.toml")
    assert config.limit == 160
    study = prepare_study(config)
    articles: dict[str, list[str]] = {}
    for record in study.selected_records:
        articles.setdefault(str(record.group), []).append(str(record.condition))
    assert len(articles) == 10
    assert all(
        sorted(systems) == sorted(set(systems)) and len(systems) == 16
        for systems in articles.values()
    )
    # No summary of these articles lies beyond the slice.
    assert not [r for r in study.records[160:] if r.group in articles]


def test_slice_runs_end_to_end_against_the_simulated_judge(tmp_path: Path) -> None:
    config = str(EXAMPLE / "slice.toml")
    # 2 articles x 16 systems, with a cache of its own (the simulated answers never reach the
    # example's real cache).
    study = ("--limit", "32", "--cache", str(tmp_path / "cache"), "--output", str(tmp_path / "out"))
    with SimServer() as server:
        judged = run_cli("run", config, *study, *FAST, "--base-url", server.base_url, "--quiet")
        assert judged.returncode == 0, judged.stderr
        assert "simulated" in judged.stdout.lower()
    # The judge is gone: scoring and meta-evaluation read the cache only.
    report = run_cli("report", config, *study)
    assert report.returncode == 0, report.stderr
    out = tmp_path / "out"
    slice_ = "summeval_slice-limit-32"  # --limit is in the output names
    for name in CRITERIA:
        with (out / "scores" / f"{slice_}_{name}.csv").open() as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == 2 + 1, "two articles and the Average row"
        assert len(rows[0]) == 1 + 16, "one column per system"
        raw = json.loads((out / "raw" / f"{slice_}_{name}.json").read_text())
        assert len(raw["items"]) == 32
        assert all(item["status"] == "scored" for item in raw["items"])
        prompt = raw["items"][0]["messages"][0]["content"]
        assert prompt.endswith(f"({'1-3' if name == 'flu' else '1-5'}):")
    with (out / "scores" / f"{slice_}_long.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 32 * 4
    assert "simulated" in (out / f"{slice_}_report.md").read_text().lower()

    meta = run_cli("meta", config, *study)
    assert meta.returncode == 0, meta.stderr
    assert "gpt-4o-mini (simulated)" in meta.stdout
    with (out / "meta" / "summeval_slice_meta.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["criterion"], r["level"]) for r in rows} == {
        (c, level) for c in CRITERIA for level in ("summary", "system", "dataset")
    }
    assert {r["n"] for r in rows if r["level"] == "system"} == {"16"}


@pytest.mark.parametrize(("name", "items"), [("config", 6400), ("slice", 640), ("cookbook", 6400)])
def test_example_configs_plan_without_sending(tmp_path: Path, name: str, items: int) -> None:
    result = run_cli(
        "run", str(EXAMPLE / f"{name}.toml"), "--dry-run", "--cache", str(tmp_path / "cache")
    )
    assert result.returncode == 0, result.stderr
    assert f"items: {items} " in result.stdout and "nothing was sent" in result.stdout


def test_cookbook_prompts_fill_every_part() -> None:
    study = prepare_study(load_config(EXAMPLE / "cookbook.toml"))
    first = {}
    for item in plan_items(study):
        first.setdefault(item.criterion.name, item)
    for name, item in first.items():
        text = render_messages(item)[0]["content"]
        display = item.criterion.config.display_name
        assert text.startswith("You will be given one summary")
        assert f"Evaluation Criteria:\n\n{display} (" in text
        assert item.record.fields["system_output"] in text
        assert text.endswith(f"- {display} ({'1-3' if name == 'flu' else '1-5'}):")
        assert "{" not in text.replace(item.record.fields["source"], ""), "an unfilled part"


@pytest.fixture
def compare_records(tmp_path: Path) -> Path:
    """compare.jsonl as make_compare.py writes it, but in tmp_path."""
    records = tmp_path / "compare.jsonl"
    made = subprocess.run(
        [sys.executable, str(EXAMPLE / "make_compare.py"), "--output", str(records)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    return records


async def test_compare_example_is_a_paired_two_system_study(
    tmp_path: Path, compare_records: Path
) -> None:
    records = compare_records
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(rows) == 200
    assert [r["system_id"] for r in rows[:4]] == ["M23", "M0", "M23", "M0"]
    assert rows[0]["doc_id"] == rows[1]["doc_id"] != rows[2]["doc_id"]

    source = EXAMPLE / "compare.toml"
    document = tomllib.loads(source.read_text())
    document["data"]["path"] = str(records)  # the generated file, here in tmp_path
    config = parse_config(document, source)
    with SimServer() as server:
        run = await ga.judge(
            config,
            base_url=server.base_url,
            model="sim-judge",
            n=2,
            limit=16,
            cache=str(tmp_path / "cache"),
            rpm=1e6,
            tpm=1e9,
        )
        assert run.complete
    results = ga.load_results(
        config, model="sim-judge", n=2, limit=16, cache=str(tmp_path / "cache")
    )
    assert results.paired_design
    comparisons = results.comparisons()
    assert [c.criterion for c in comparisons] == [*CRITERIA, "composite"]
    assert all(c.test == "paired-t" and c.n_a == c.n_b == 8 for c in comparisons)
