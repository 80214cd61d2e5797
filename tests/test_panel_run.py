"""One ``run`` judges with a whole panel of judges: three simulated judges on
their own loopback ports, different models, one with its own low rpm, into one cache."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    StudyFiles,
    assert_no_judge_named,
    cache_snapshot,
    run_cli,
    running_sims,
    summary_cells,
)

from geval_async.sim import SimServer

JUDGES = (("gpt", "sim-gpt"), ("gemini", "sim-gemini"), ("local", "sim-local"))


@pytest.fixture
def sims() -> Iterator[dict[str, SimServer]]:
    with running_sims(name for name, _ in JUDGES) as servers:
        yield servers


def write_panel(
    study: StudyFiles,
    urls: dict[str, str],
    local: dict[str, object] | None = None,
    **sections: dict[str, object],
) -> Path:
    """The test study with a [[judges]] table per judge of JUDGES, at ``urls``: gemini with
    its own limits, on top of the study's; judge local with the keys ``local`` adds."""
    judges: dict[str, dict[str, object]] = {
        name: {"model": model, "base_url": urls[name]} for name, model in JUDGES
    }
    judges["gemini"]["limits"] = {"rpm": 1200, "concurrency": 2}
    judges["local"].update(local or {})
    return study.write_panel(judges, **sections)


def write_member(study: StudyFiles, name: str, url: str, cache: str) -> Path:
    """A one-judge config of judge ``name`` alone, into its own cache folder."""
    return study.write_config(
        url,
        judge={"model": dict(JUDGES)[name]},
        cache={"path": cache},
        path=study.root / f"alone-{name}.toml",
    )


def urls_of(sims: dict[str, SimServer]) -> dict[str, str]:
    return {name: server.base_url for name, server in sims.items()}


def judge_row(stdout: str, name: str) -> dict[str, int]:
    """Judge ``name``'s row of the panel's summary table (one row a judge), by column."""
    lines = stdout.splitlines()
    header = next(line for line in lines if line.startswith("judge ") and "items" in line)
    return dict(zip(header.split()[1:], map(int, summary_cells(stdout, name)), strict=True))


def test_one_run_fills_the_cache_for_every_judge_as_each_alone_would(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    config = write_panel(study, urls_of(sims))
    items = study.n_records * 2
    done = run_cli("run", str(config))
    assert done.returncode == 0, done.stderr
    for name, server in sims.items():
        assert judge_row(done.stdout, name) == {
            "items": items,
            "cached": 0,
            "new": items,
            "refused": 0,
            "failed": 0,
            "missing": 0,
            "sent": items,
        }
        assert server.stats.received == items  # each judge asked its own server, once an item
    assert sims["gemini"].stats.peak_in_flight <= 2  # under its own [judges.limits]
    # the progress line names each judge
    assert re.search(r"gpt \d+/48 · gemini \d+/48 · local \d+/48", done.stderr)
    panel_cache = cache_snapshot(study.cache)
    assert len(panel_cache) == 3 * items
    # each judge's entries are those a run of that judge alone writes: same keys, same count
    alone_keys: set[str] = set()
    for name, server in sims.items():
        alone = write_member(study, name, server.base_url, f"cache-{name}")
        single = run_cli("run", str(alone), "--quiet")
        assert single.returncode == 0, single.stderr
        keys = set(cache_snapshot(study.root / f"cache-{name}"))
        assert len(keys) == items and keys <= set(panel_cache)
        alone_keys |= keys
    assert alone_keys == set(panel_cache)
    # a rerun of the panel sends nothing
    before = {name: server.stats.received for name, server in sims.items()}
    again = run_cli("run", str(config), "--quiet")
    assert again.returncode == 0, again.stderr
    assert {name: server.stats.received for name, server in sims.items()} == before
    assert judge_row(again.stdout, "local")["cached"] == items
    assert judge_row(again.stdout, "gemini")["sent"] == 0


def test_judge_flag_sends_only_that_judges_requests(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    config = write_panel(study, urls_of(sims))
    done = run_cli("run", str(config), "--quiet", "--judge", "gemini")
    assert done.returncode == 0, done.stderr
    assert {name: s.stats.received for name, s in sims.items()} == {
        "gpt": 0,
        "gemini": study.n_records * 2,
        "local": 0,
    }
    # status then shows gemini complete and the others missing everything
    status = run_cli("status", str(config))
    assert status.returncode == 0, status.stderr
    blocks = status.stdout.split("judge ")
    gemini = next(b for b in blocks if b.startswith("gemini"))
    gpt = next(b for b in blocks if b.startswith("gpt"))
    assert re.search(r"total\s+48\s+48\s+0\s+0", gemini)
    assert re.search(r"total\s+48\s+0\s+0\s+48", gpt)
    # an unknown name: one line listing the judges, exit 2
    unknown = run_cli("run", str(config), "--judge", "claude")
    assert_no_judge_named(unknown, config, "claude", "gpt, gemini, local")


def test_a_judge_whose_server_is_down_leaves_the_others_complete_and_is_reported(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    urls = {**urls_of(sims), "local": dead}
    config = write_panel(study, urls, limits={"retries": 1})
    done = run_cli("run", str(config), "--quiet")
    assert done.returncode == 1, done.stderr
    items = study.n_records * 2
    assert judge_row(done.stdout, "gpt")["new"] == items
    assert judge_row(done.stdout, "gemini")["new"] == items
    local = judge_row(done.stdout, "local")
    assert local["new"] == 0 and local["missing"] + local["failed"] == items
    assert "judges not complete: local" in done.stderr
    assert len(cache_snapshot(study.cache)) == 2 * items


def test_dry_run_and_status_show_each_judge_and_the_panel(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    config = write_panel(study, urls_of(sims))
    assert run_cli("run", str(config), "--quiet", "--judge", "gpt").returncode == 0
    dry = run_cli("run", str(config), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert sum(s.stats.received for s in sims.values()) == study.n_records * 2  # none sent
    sections = dry.stdout.split("judge ")
    assert "already cached: 48; requests to send: 0" in sections[1]  # gpt
    assert "already cached: 0; requests to send: 48" in sections[2]  # gemini
    assert "panel (3 judges): requests to send: 96" in dry.stdout


def test_model_flag_on_a_panel_needs_a_judge_and_the_key_is_per_judge(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    config = write_panel(study, urls_of(sims))
    refused = run_cli("run", str(config), "--model", "other")
    assert refused.returncode == 2
    assert "--model on a panel config" in refused.stderr and "--judge NAME" in refused.stderr
    # with --judge, --model applies to that judge
    chosen = run_cli("run", str(config), "--dry-run", "--judge", "gpt", "--model", "other")
    assert chosen.returncode == 0, chosen.stderr
    # --n applies to every judge
    every = run_cli("run", str(config), "--quiet", "--n", "1", "--limit", "2")
    assert every.returncode == 0, every.stderr
    assert all(s.stats.received == 4 for s in sims.values())


def test_a_judge_without_its_key_is_not_run_the_others_are_and_the_exit_says_so(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    urls = {**urls_of(sims), "local": "https://judge.invalid/v1"}
    config = write_panel(study, urls, local={"api_key_env": "PANEL_TEST_KEY"})
    done = run_cli("run", str(config), "--quiet", env={"PANEL_TEST_KEY": ""})
    assert done.returncode == 2, done.stderr
    local = "judge local (sim-local at https://judge.invalid/v1/chat/completions): not judged"
    assert f"{local}: no API key: set" in done.stdout
    assert "PANEL_TEST_KEY" in done.stdout
    assert judge_row(done.stdout, "gpt")["missing"] == 0
    assert judge_row(done.stdout, "gemini")["missing"] == 0


def test_max_cost_caps_the_panels_total(study: StudyFiles, sims: dict[str, SimServer]) -> None:
    import orjson

    prices = {model: [100, 100] for _, model in JUDGES}
    config = write_panel(study, urls_of(sims), prices=prices)
    # one judge's whole plan costs about $0.6 at these prices: $0.5 is less than the panel needs
    done = run_cli("run", str(config), "--quiet", "--max-cost", "0.5")
    assert done.returncode == 1, done.stderr
    assert "budget cap $0.5 reached" in done.stdout and "by the panel's judges" in done.stdout
    lines = (study.cache / "spend.jsonl").read_bytes().splitlines()
    spent = sum(orjson.loads(line)["usd"] for line in lines)
    assert 0 < spent <= 0.5 + 1e-9
    assert len({orjson.loads(line)["model"] for line in lines}) >= 2  # the judges shared it


async def test_the_python_api_judges_the_panel_whole_or_one_judge(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    import geval_async as ga
    from geval_async.judging.run.panel import PanelRunResult

    config = write_panel(study, urls_of(sims))
    one = await ga.judge(config, judge="local", limit=2)
    assert isinstance(one, ga.RunResult) and one.complete
    assert [s.stats.received for s in sims.values()] == [0, 0, 4]
    whole = await ga.judge(config, limit=2)
    assert isinstance(whole, PanelRunResult) and whole.complete
    assert list(whole.judges) == ["gpt", "gemini", "local"]
    assert [s.stats.received for s in sims.values()] == [4, 4, 4]
    assert whole.judges["local"].result is not None
    assert whole.judges["local"].result.counters.total().cached == 4
    with pytest.raises(ga.ConfigError, match=r"model= on a panel config .* judge=NAME"):
        await ga.judge(config, model="other")


def test_steps_of_a_named_judge_default_the_first(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    config = write_panel(study, urls_of(sims))
    first = run_cli("steps", str(config))
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("judge gpt (the panel's first")
    named = run_cli("steps", str(config), "--judge", "local")
    assert named.returncode == 0 and not named.stdout.startswith("judge gpt"), named.stderr


def test_cache_commands_read_every_judge_and_batch_needs_one(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    config = write_panel(study, urls_of(sims))
    assert run_cli("run", str(config), "--quiet", "--limit", "2").returncode == 0
    entries = len(cache_snapshot(study.cache))
    assert entries == 3 * 4
    # prune keeps what the panel's config reads: every judge's entries, not the first's alone
    pruned = run_cli("cache", "prune", str(study.cache), "--unused-by", str(config))
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith("removed 0 entries")
    archive = study.root / "panel.jsonl.gz"
    exported = run_cli("cache", "export", str(config), str(archive), "--limit", "2")
    assert exported.returncode == 0, exported.stderr
    assert f"wrote {entries} entries" in exported.stdout
    refused = run_cli("batch", "export", str(config), str(study.root / "in.jsonl"))
    assert refused.returncode == 2
    assert "add --judge NAME (the judges: gpt, gemini, local)" in refused.stderr
    one = run_cli("batch", "export", str(config), str(study.root / "in.jsonl"), "--judge", "gpt")
    assert one.returncode == 0, one.stderr
