"""Settings have one way in: a flag or a Python keyword is checked like a line of the file.

Each bad value is given three ways (in config.toml, as a command-line flag, as a keyword of the
Python API); all three must fail with the same one-line error, prefixed with where the value
came from, and nothing may be sent or written.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from conftest import StudyFiles, run_cli

import geval_async as ga
from geval_async.sim import SimServer
from geval_async.study.config import apply_overrides, load_config

# (table, key, value, the flag that sets it or None when argparse already refuses it,
#  the part of the error every door must show)
BAD = [
    (
        "sampling",
        "n",
        500,
        ["--n", "500"],
        "[sampling] 'n' must be at most 128 (the OpenAI maximum)",
    ),
    ("sampling", "n", 0, ["--n", "0"], "[sampling] 'n' must be a positive number, not 0"),
    (
        "limits",
        "concurrency",
        2.5,
        None,
        "[limits] 'concurrency' must be a whole number, not 2.5",
    ),
    (
        "limits",
        "concurrency",
        0,
        ["--concurrency", "0"],
        "[limits] 'concurrency' must be a positive number, not 0",
    ),
    ("limits", "retries", -1, ["--retries", "-1"], "[limits] 'retries' must be 0 or more, not -1"),
    (
        "limits",
        "rpm",
        -5.5,
        ["--rpm", "-5.5"],
        "[limits] 'rpm' must be a positive number, not -5.5",
    ),
    ("data", "limit", 0, ["--limit", "0"], "[data] 'limit' must be a positive number, not 0"),
    (
        "sampling",
        "mode",
        "bogus",
        None,
        "[sampling] 'mode' must be one of samples, logprobs, not 'bogus'",
    ),
    ("judge", "model", 7, None, "[judge] 'model' must be a string, not 7"),
]


def _message(excinfo: pytest.ExceptionInfo[ga.ConfigError]) -> str:
    return str(excinfo.value)


@pytest.mark.parametrize("table, key, value, flag, expected", BAD, ids=lambda v: str(v))
def test_a_bad_value_fails_alike_in_the_file_a_flag_and_a_keyword(
    sim: SimServer,
    study: StudyFiles,
    table: str,
    key: str,
    value: Any,
    flag: list[str] | None,
    expected: str,
) -> None:
    study.write_config(sim.base_url, **{table: {key: value}})
    with pytest.raises(ga.ConfigError) as in_file:
        load_config(study.config)
    assert _message(in_file) == f"{study.config}: {expected}"

    good = study.write_config(sim.base_url)
    config = load_config(good)
    with pytest.raises(ga.ConfigError) as as_keyword:
        apply_overrides(config, **{key: value})
    assert _message(as_keyword) == f"{key}={value!r}: {expected}"
    # Every door of the Python API reads its keywords the same way.
    with pytest.raises(ga.ConfigError, match=f"^{key}="):
        ga.load_results(good, **{key: value})
    with pytest.raises(ga.ConfigError, match=f"^{key}="):
        ga.meta_evaluate(good, **{key: value})

    if flag is not None:
        result = run_cli("run", str(good), "--quiet", *flag)
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.splitlines() == [f"error: {' '.join(flag)}: {expected}"]
        if key in ("n", "limit"):  # the flags the scoring commands take
            score = run_cli("score", str(good), *flag)
            assert score.stderr.splitlines() == [f"error: {' '.join(flag)}: {expected}"]
    assert sim.stats.received == 0
    assert not study.cache.exists()


async def test_a_bad_keyword_to_judge_is_a_config_error_not_a_crash(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    # Before, 2.5 reached range() inside the task group and came out as an ExceptionGroup.
    with pytest.raises(ga.ConfigError, match=r"^concurrency=2\.5: \[limits\] 'concurrency'"):
        await ga.judge(study.config, concurrency=2.5)
    with pytest.raises(ga.ConfigError, match=r"^n=500: \[sampling\] 'n' must be at most 128"):
        await ga.judge(study.config, n=500)
    assert sim.stats.received == 0


@pytest.mark.parametrize("door", ["judge", "load_results", "meta_evaluate", "apply_overrides"])
async def test_a_misspelt_keyword_fails_like_a_misspelt_key(
    sim: SimServer, study: StudyFiles, door: str
) -> None:
    study.write_config(sim.base_url, limits={"concurency": 1})
    with pytest.raises(ga.ConfigError) as in_file:
        load_config(study.config)
    assert (
        "[limits] unknown key 'concurency' (known keys: backoff, batch_queue_tokens, concurrency,"
        in str(in_file.value)
    )

    study.write_config(sim.base_url)
    with pytest.raises(ga.ConfigError) as as_keyword:
        if door == "judge":
            await ga.judge(study.config, concurency=1)
        elif door == "apply_overrides":
            apply_overrides(load_config(study.config), concurency=1)
        else:
            getattr(ga, door)(study.config, concurency=1)
    message = str(as_keyword.value)
    known = "overrides: unknown key 'concurency' (known keys: api, base_url, cache,"
    assert message.startswith(known)
    assert "concurrency" in message and "\n" not in message
    assert sim.stats.received == 0


def test_flags_that_are_no_table_key_are_read_alike(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    for flags, expected in [
        (["--criteria", "nope"], "--criteria nope: no criterion named 'nope' (the config has:"),
        (["--criteria", ","], "--criteria ,: 'criteria' must name at least one criterion"),
        (["--max-cost", "0"], "--max-cost 0.0: 'max_cost' must be a positive number, not 0.0"),
        (["--max-cost", "nan"], "--max-cost nan: 'max_cost' must be a positive number, not nan"),
    ]:
        result = run_cli("run", str(study.config), "--quiet", *flags)
        assert result.returncode == 2
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {expected}"), lines
    with pytest.raises(ga.ConfigError, match=r"^max_cost=inf: 'max_cost' must be a positive"):
        apply_overrides(load_config(study.config), max_cost=math.inf)
    assert sim.stats.received == 0


def test_the_common_flags_still_work(sim: SimServer, study: StudyFiles, tmp_path: Path) -> None:
    study.write_config("http://127.0.0.1:9/v1")  # wrong on purpose: --base-url must win
    cache, output = tmp_path / "elsewhere" / "cache", tmp_path / "elsewhere" / "out"
    common = ["--cache", str(cache), "--criteria", "clar", "--limit", "4"]
    result = run_cli(
        "run", str(study.config), "--quiet", "--base-url", sim.base_url, "--n", "2", *common
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert sim.stats.received == 4  # 4 records x 1 criterion, one request each
    assert cache.is_dir() and not study.cache.exists()
    scored = run_cli("score", str(study.config), "--n", "2", "--output", str(output), *common)
    assert scored.returncode == 0, scored.stdout + scored.stderr
    # --criteria, --limit and --n are in the output names (never the study's main files).
    assert (output / "scores" / "t-criteria-clar-limit-4-n-2_clar.csv").is_file()
    assert not list((output / "scores").glob("*fit.csv"))
    # The Python API takes the same settings as keywords, paths as Path objects too.
    results = ga.load_results(study.config, cache=cache, criteria=["clar"], limit=4, n=2)
    assert results.missing == 0 and len(results.long) == 4
