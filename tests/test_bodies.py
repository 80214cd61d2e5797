"""The body a run sends hashes to the key the plan made the request under: a body that
differed would store an answer under a key that never asked for it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from geval_async.study.config import load_config
from geval_async.study.judge_choice import apply_overrides
from geval_async.study.keys import request_key
from geval_async.study.plan import chunk_request, planned_requests
from geval_async.study.prepare import prepare_study

EXAMPLES = ROOT / "examples"


@pytest.mark.parametrize("example", ["chatbot", "ueq"])  # rubrics; a study of several fields
@pytest.mark.parametrize(
    "overrides",
    [{}, {"mode": "logprobs"}, {"reasoning_effort": "low", "n": 3}, {"seed": 11}],
    ids=["samples", "logprobs", "reasoning-effort", "seed"],
)
def test_each_body_sent_is_the_requests_own_and_hashes_to_its_key(
    example: str, overrides: dict[str, Any], tmp_path: Path
) -> None:
    config = load_config(EXAMPLES / example / "config.toml")
    seed = overrides.pop("seed", None)
    config = apply_overrides(config, cache=tmp_path / "cache", **overrides)
    if seed is not None:
        config = replace(config, sampling=replace(config.sampling, seed=seed))
    study = prepare_study(config)
    requests = list(planned_requests(study, send=True))
    assert len({(r.item.criterion.name, r.item.rubric) for r in requests}) > 1
    # And the later chunks a worker asks for when an answer came back short.
    later = [chunk_request(r, 1, config) for r in requests[:40] if r.n > 1]
    for request in requests + later:
        body = request.body
        assert body["messages"][0]["content"] and body["model"] == config.judge.model
        assert request_key(body, request.draw) == request.key
