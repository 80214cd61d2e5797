"""Gradings in the MT-Bench form, replayed through ``run`` and scored: the mark is the rating.

A stub judge (an aiohttp.web app on 127.0.0.1, not geval-async's simulated judge) answers each
draw with one of the corpus's gradings in the MT-Bench form: a paragraph or more of reasoning
with figures, labelled aspects and quoted code full of numbers and brackets, then the verdict
as ``Rating: [[N]]``, quoted, in bold or with a full stop. The study runs as a user runs it
and is scored from its cache; every answer must read as the mark it closes with.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from aiohttp import web
from conftest import LoopbackApp, StudyFiles, run_cli
from corpus.agreement import load_corpus

import geval_async as ga

# The corpus's gradings on a 1-10 scale that close with a mark, and the mark each closes with.
MARKED = {
    row["text"]: row["label"]
    for row in load_corpus()
    if row["style"] == "verdict_after_reasoning"
    and row["scale"] == [1, 10]
    and row["label"] is not None
}


class GradingJudge(LoopbackApp):
    """An OpenAI-compatible judge that grades in the MT-Bench form, a grading chosen for each
    draw by a hash of the request."""

    def __init__(self) -> None:
        super().__init__()
        self.gradings = sorted(MARKED)
        self.sent: list[str] = []

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        prompt = json.dumps(body["messages"], sort_keys=True)
        choices = []
        for index in range(body.get("n", 1)):
            digest = hashlib.sha256(f"{prompt}|{index}".encode()).digest()
            text = self.gradings[int.from_bytes(digest[:4], "big") % len(self.gradings)]
            self.sent.append(text)
            message = {"role": "assistant", "content": text}
            choices.append({"index": index, "message": message, "finish_reason": "stop"})
        usage = {"prompt_tokens": 50, "completion_tokens": 400, "total_tokens": 450}
        return web.json_response({"choices": choices, "usage": usage})

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/chat/completions", self._complete)]


@pytest.fixture
def judge() -> Any:
    with GradingJudge() as server:
        yield server


def test_every_grading_reads_as_the_mark_it_closes_with(
    judge: GradingJudge, study: StudyFiles
) -> None:
    criterion = {
        "name": "help",
        "display_name": "Helpfulness",
        "prompt": "prompts/clar.txt",
        "scale": [1, 10],
        "fields": ["text"],
    }
    config = study.write_config(
        judge.base_url, criteria=[criterion], sampling={"n": 4, "max_tokens": 1024}
    )
    run = run_cli("run", str(config), "--quiet")
    assert run.returncode == 0, run.stderr
    samples = ga.load_results(config).samples
    assert len(samples) == 4 * study.n_records == len(judge.sent)
    assert samples["reason"].isna().all(), samples[samples["reason"].notna()].head()
    assert [MARKED[text] for text in samples["text"]] == samples["rating"].tolist()
    assert len(set(samples["text"])) >= 30  # many shapes of reasoning and mark, not a few
