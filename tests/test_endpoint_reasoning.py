"""What the run's summary says an endpoint returns: reasoning, learned from its answers.

The shipped UEQ study against the simulated judge (real HTTP on 127.0.0.1) in the dialects
that carry reasoning differently: in each choice's ``message.reasoning_content`` (DeepSeek,
vLLM), in ``message.reasoning`` (newer vLLM, OpenRouter), hidden and billed only in
``usage.completion_tokens_details.reasoning_tokens`` (OpenAI's gpt-5), or not at all. The
endpoint's line a user reads (``gpt-5-mini at 127.0.0.1:PORT: max_completion_tokens, n up
to 10, returns reasoning``) names reasoning exactly for the first three.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli, ueq_flags

from geval_async.sim import SimServer, SimSettings

KEY = {"OPENAI_API_KEY": "sk-test-endpoint-reasoning"}


@pytest.fixture
def srv() -> Iterator[SimServer]:
    with SimServer(SimSettings()) as server:
        yield server


@pytest.mark.parametrize(
    ("profile", "field", "model", "reasoning"),
    [
        ("deepseek-reasoner", "reasoning_content", "deepseek-reasoner", True),
        ("deepseek-reasoner", "reasoning", "deepseek-r1", True),
        ("openai-reasoning", "reasoning_content", "gpt-5-mini", True),
        ("default", "reasoning_content", "gpt-4o-mini", False),
    ],
    ids=["reasoning_content", "reasoning", "reasoning-tokens", "none"],
)
def test_the_endpoint_line_says_whether_the_answers_carried_reasoning(
    srv: SimServer, tmp_path: Path, profile: str, field: str, model: str, reasoning: bool
) -> None:
    srv.settings.profile, srv.settings.reasoning_field = profile, field
    flags = ueq_flags(srv.base_url, tmp_path, model, "--max-tokens", "2000")
    done = run_cli("run", *flags, "--quiet", env=KEY)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if f"{model} at 127.0.0.1" in line)
    assert line.endswith(", returns reasoning") is reasoning, line
