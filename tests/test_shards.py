"""Shards: K machines with one config each judge share I of K into their own cache.

Three processes judge three shards of the study into three cache folders at the same time;
`cache merge` puts them together, and the merged cache scores exactly as one run's cache.
"""

from __future__ import annotations

import pytest
from conftest import ROOT, StudyFiles, run_cli, run_study, start_process, summary_cells

from geval_async.sim import SimServer
from geval_async.study.config import apply_overrides, load_config
from geval_async.study.plan import first_request, plan_items
from geval_async.study.prepare import prepare_study


def test_shards_split_the_plan_into_disjoint_even_parts(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    config = load_config(study.config)
    whole = prepare_study(config)
    everything = {first_request(item, config).key for item in plan_items(whole)}
    parts = []
    for index in (1, 2, 3):
        shard = prepare_study(apply_overrides(config, shard=f"{index}/3"))
        keys = [first_request(item, config).key for item in plan_items(shard)]
        assert shard.item_count == len(keys)
        parts.append(set(keys))
    assert set().union(*parts) == everything
    assert sum(len(p) for p in parts) == len(everything), "no item is in two shards"
    assert all(len(p) >= len(everything) / 3 / 2 for p in parts), "each shard gets a fair share"
    # Raising n keeps every item in its shard (the key of draw 0 does not hold n).
    grown = prepare_study(apply_overrides(config, shard="2/3", n=7))
    assert {first_request(i, grown.config).key for i in plan_items(grown)} == parts[1]


@pytest.mark.parametrize("count", [2, 3, 4, 7])
def test_shards_of_the_ueq_plan_are_balanced_to_within_one_item(count: int) -> None:
    config = load_config(ROOT / "examples" / "ueq" / "config.toml")
    everything = [first_request(item, config).key for item in plan_items(prepare_study(config))]
    assert len(everything) == len(set(everything)) == 192
    parts = []
    for index in range(1, count + 1):
        shard = prepare_study(apply_overrides(config, shard=f"{index}/{count}"))
        keys = [first_request(item, config).key for item in plan_items(shard)]
        assert shard.item_count == len(keys)
        parts.append(set(keys))
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 1, sizes
    assert set().union(*parts) == set(everything) and sum(sizes) == len(everything), "no overlap"
    # The same on every machine: the shares are a function of the config alone.
    again = prepare_study(apply_overrides(config, shard=f"1/{count}"))
    assert {first_request(item, config).key for item in plan_items(again)} == parts[0]


def test_adding_records_moves_only_items_near_the_cuts(study: StudyFiles) -> None:
    study.write_config("http://127.0.0.1:9/v1")
    config = load_config(study.config)

    def shares(limit: int) -> list[set[str]]:
        return [
            {
                first_request(item, config).key
                for item in plan_items(
                    prepare_study(apply_overrides(config, shard=f"{i}/3", limit=limit))
                )
            }
            for i in (1, 2, 3)
        ]

    before, after = shares(study.n_records - 2), shares(study.n_records)
    moved = sum(len(b - a) for b, a in zip(before, after, strict=True))
    # 2 records x 2 criteria = 4 new items shift each of the 2 cuts by at most 4 items.
    assert moved <= 2 * 4, moved


def test_three_shards_in_three_processes_merge_into_one_run(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    caches = [study.root / f"cache{index}" for index in (1, 2, 3)]
    runs = [
        start_process(
            "run", str(study.config), "--quiet", "--shard", f"{index}/3", "--cache", str(cache)
        )
        for index, cache in zip((1, 2, 3), caches, strict=True)
    ]
    shard_items = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr
        shard_items.append(int(summary_cells(stdout)[0]))
    items = 2 * study.n_records
    assert sum(shard_items) == items
    assert sim.stats.received == items, "each item was asked once, by one shard"

    # Each shard's status counts its own items, all answered.
    for index, (cache, count) in enumerate(zip(caches, shard_items, strict=True), start=1):
        shard = ("--shard", f"{index}/3", "--cache", str(cache))
        status = run_cli("status", str(study.config), *shard)
        assert summary_cells(status.stdout) == [str(count), str(count), "0", "0"]
    # ... and its scores are its own items, none missing.
    out = study.root / "out-shard1"
    first = ("--shard", "1/3", "--cache", str(caches[0]), "--output", str(out))
    score = run_cli("score", str(study.config), *first)
    assert score.returncode == 0, score.stderr
    # --shard is in the output names, like --criteria and --limit.
    rows = (out / "scores" / "t-shard-1of3_long.csv").read_text().splitlines()[1:]
    assert len(rows) == shard_items[0] and all(",scored," in row for row in rows)

    merged = study.root / "merged"
    result = run_cli("cache", "merge", str(merged), *map(str, caches))
    assert result.returncode == 0, result.stderr
    assert f"{items} entries added, 0 already there, 0 clashing, 0 damaged" in result.stdout

    assert run_study(study, "--cache", str(study.cache)).returncode == 0  # one run, one cache
    tables = []
    for cache in (merged, study.cache):
        out = study.root / f"out-{cache.name}"
        score = run_cli("score", str(study.config), "--cache", str(cache), "--output", str(out))
        assert score.returncode == 0, score.stderr
        tables.append((out / "scores" / "t_long.csv").read_text())
    assert tables[0] == tables[1]
    assert "missing" not in tables[0]


def test_a_bad_shard_is_one_clear_line(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    for bad in ("4/3", "0/3", "two", "1/0"):
        result = run_study(study, "--shard", bad)
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1 and "--shard" in result.stderr, result.stderr
    assert sim.stats.received == 0
