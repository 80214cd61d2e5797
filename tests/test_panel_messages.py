"""A panel judge's failures name its own ``[[judges]]`` entry, not ``[judge]`` (the panel's
missing-key line already did): the line that stops a judge whose every request carries a
setting the endpoint refuses, and the Batch API's refused key. A setting the judge's own
``[judges.sampling]`` sets is named there, one it takes from the study is named ``[sampling]``.
A real panel config, each judge on its own loopback server."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import POLL, StudyFiles, run_cli

from geval_async.sim import SimServer, SimSettings


def write_panel(
    study: StudyFiles,
    urls: dict[str, str],
    sampling: dict[str, dict[str, object]] | None = None,
    **key_env: str,
) -> Path:
    """The test study with [[judges]] (name, model sim-NAME, base_url, its api_key_env if
    given, its own [judges.sampling] if ``sampling`` names it) in place of its [judge]."""
    judges = {
        name: {
            "model": f"sim-{name}",
            "base_url": url,
            "api_key_env": key_env.get(name),
            "sampling": (sampling or {}).get(name),
        }
        for name, url in urls.items()
    }
    return study.write_panel(judges)


GPT = '[[judges]] name = "gpt" [judges.sampling]'
REFUSED_TEMPERATURE = (
    "temperature = 0.7 is refused by sim-gpt (unsupported_value: only the default (1) value is "
    "supported): set temperature = 1"
)
NO_LOGPROBS = (
    'mode = "logprobs": sim-gpt answered without logprobs (the endpoint ignores them): set mode = '
    '"samples"'
)
REASONED = "on reasoning and gave no rating: raise"


@pytest.mark.parametrize(
    ("profile", "own", "line"),
    [
        (
            "openai-reasoning",
            {"temperature": 0.7, "max_tokens": 2000},
            f"{GPT} {REFUSED_TEMPERATURE}",
        ),
        ("anthropic-compat", {"mode": "logprobs"}, f"{GPT} {NO_LOGPROBS}"),
        (
            "openai-reasoning",
            {"max_tokens": 8},
            f"(8) {REASONED} {GPT} max_tokens (for example to 2000) or lower [sampling] "
            "reasoning_effort",
        ),
        # The study's own [sampling] max_tokens = 5, which the judge does not set.
        (
            "openai-reasoning",
            {"n": 2},
            f"(5) {REASONED} [sampling] max_tokens (for example to 2000) or lower reasoning_effort",
        ),
    ],
    ids=["refused", "ignored-logprobs", "reasoning", "reasoning-study-budget"],
)
def test_a_stopped_panel_judge_names_the_sampling_table_the_setting_came_from(
    study: StudyFiles, sim: SimServer, profile: str, own: dict[str, object], line: str
) -> None:
    with SimServer(SimSettings(profile=profile)) as endpoint:
        config = write_panel(study, {"gpt": endpoint.base_url, "local": sim.base_url}, {"gpt": own})
        done = run_cli("run", str(config))
    assert done.returncode == 1, done.stdout + done.stderr
    stopped = [line for line in done.stdout.splitlines() if line.startswith("  stopped:")]
    assert len(stopped) == 1, done.stdout  # the other judge went on and finished
    assert line in stopped[0], stopped[0]
    if "[judges.sampling]" not in line:
        assert "[judges.sampling]" not in done.stdout + done.stderr


def test_a_flag_over_a_panel_judges_own_setting_is_named_as_the_studys(
    study: StudyFiles, sim: SimServer
) -> None:
    with SimServer(SimSettings(profile="openai-reasoning")) as endpoint:
        own = {"gpt": {"temperature": 0.5, "max_tokens": 2000}}
        config = write_panel(study, {"gpt": endpoint.base_url, "local": sim.base_url}, own)
        done = run_cli("run", str(config), "--temperature", "0.7")
    assert done.returncode == 1, done.stdout + done.stderr
    stopped = [line for line in done.stdout.splitlines() if line.startswith("  stopped:")]
    assert stopped == [f"  stopped: [sampling] {REFUSED_TEMPERATURE}"], done.stdout


def test_the_batch_apis_refused_key_names_the_panel_judges_entry(study: StudyFiles) -> None:
    with SimServer(SimSettings(api_key="sk-right")) as keyed, SimServer(SimSettings()) as other:
        config = write_panel(study, {"local": other.base_url, "gpt": keyed.base_url}, gpt="GPT_KEY")
        done = run_cli(
            "run", str(config), "--judge", "gpt", "--batch", "--quiet", *POLL,
            env={"GPT_KEY": "sk-wrong"},
        )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "the provider refused the API key (HTTP 401)" in line, done.stderr
    assert line.endswith(
        'check the key variable named by [[judges]] name = "gpt" api_key_env = "GPT_KEY"'
    )
    assert "sk-wrong" not in done.stdout + done.stderr
