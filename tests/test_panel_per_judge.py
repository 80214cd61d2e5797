"""A panel's commands and keywords work per judge (issue 20's leftovers): ``answers`` and
``cache migrate`` read every judge (or the ``--judge``), ``ga.apply_overrides`` follows the rule
``ga.judge`` follows, and a judge's missing key names its ``[[judges]]`` entry.

Two simulated judges on their own loopback ports (models sim-a and sim-b), one cache.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import StudyFiles, run_cli

import geval_async as ga
from geval_async.sim import SimServer, SimSettings

NAMES = ("a", "b")


@pytest.fixture
def sims() -> Iterator[dict[str, SimServer]]:
    servers = {name: SimServer(SimSettings()) for name in NAMES}
    for server in servers.values():
        server.start()
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def write_panel(study: StudyFiles, judges: dict[str, dict[str, str]]) -> Path:
    """The test study with a ``[[judges]]`` table per entry of ``judges`` (name -> keys)."""
    study.write_config("http://unused")
    text = study.config.read_text(encoding="utf-8")
    text = re.sub(r"\[judge\]\n(?:.+\n)+\n", "", text, count=1)
    for name, keys in judges.items():
        text += f'\n[[judges]]\nname = "{name}"\n'
        text += "".join(f"{key} = {json.dumps(value)}\n" for key, value in keys.items())
    study.config.write_text(text, encoding="utf-8")
    return study.config


def two_judges(study: StudyFiles, sims: dict[str, SimServer]) -> Path:
    return write_panel(
        study, {name: {"model": f"sim-{name}", "base_url": s.base_url} for name, s in sims.items()}
    )


# --- the Python API's overrides --------------------------------------------------------------


def test_apply_overrides_on_a_panel_patches_every_judge_or_the_judge_chosen(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    config = ga.load_config(two_judges(study, sims))
    every = ga.apply_overrides(config, n=1, rpm=30)
    assert every.is_panel
    assert [(m.sampling.n, m.limits.rpm) for m in every.members()] == [(1, 30), (1, 30)]
    assert [m.sampling.n for m in config.members()] == [3, 3]  # the loaded config unchanged

    one = ga.apply_overrides(config, judge="b", model="other", n=2)
    assert not one.is_panel
    assert (one.judge.model, one.judge.url, one.sampling.n) == (
        "other",
        f"{sims['b'].base_url}/chat/completions",
        2,
    )
    with pytest.raises(ga.ConfigError, match=r"^model= on a panel config .*judge=NAME .*a, b\)$"):
        ga.apply_overrides(config, model="other")
    with pytest.raises(ga.ConfigError, match=r"no judge named 'c' \(the config's judges: a, b\)"):
        ga.apply_overrides(config, judge="c")


async def test_the_library_doors_read_a_panels_overrides_alike(
    study: StudyFiles, sims: dict[str, SimServer]
) -> None:
    path = two_judges(study, sims)
    run = await ga.judge(path, n=1, limit=2)
    assert isinstance(run, ga.PanelRunResult) and run.complete
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
    config = write_panel(study, judges)
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
        ga.apply_overrides(ga.load_config(config), judge="b").required_api_key()
    assert str(raised.value) == expected
