"""Evaluation methods beyond the G-Eval rating: Likert, AND, OR and weighted-sum rubrics.

Hand-written judge responses are stored in a real cache under the keys the plan computes;
the scores must equal the values worked out by hand here, in samples and in logprobs mode.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import ROOT, StudyFiles, answer_to, run_cli

from geval_async.judging.store.cache import JudgeCache
from geval_async.scoring.scores.results import load_results
from geval_async.sim import SimServer
from geval_async.study.config import load_config
from geval_async.study.plan import first_request, plan_items
from geval_async.study.prepare import prepare_study

RUBRIC = "Statement: {{rubric}}\nReply: {{reply}}\nDoes it hold? Answer Yes or No."
LIKERT = "Options:\n{{points}}\nReply: {{reply}}\nAnswer with the option number (1-3):"

# Four criteria of the kinds beyond the G-Eval rating, on one reply.
CRITERIA: list[dict[str, object]] = [
    {
        "name": "empathy",
        "kind": "likert",
        "prompt": "likert.txt",
        "points": [0, 0.5, 1],
        "labels": ["none", "some", "much"],
        "answer": "option",
        "fields": ["reply"],
    },
    {
        "name": "fair",
        "kind": "and",
        "prompt": "rubric.txt",
        "fields": ["reply"],
        "rubrics": [{"name": "a", "text": "A"}, {"name": "b", "text": "B"}],
    },
    {
        "name": "hate",
        "kind": "or",
        "prompt": "rubric.txt",
        "fields": ["reply"],
        "rubrics": [{"name": "a", "text": "H1"}, {"name": "b", "text": "H2"}],
    },
    {
        "name": "clear",
        "kind": "weighted",
        "prompt": "rubric.txt",
        "fields": ["reply"],
        "rubrics": [
            {"name": "a", "text": "C1", "weight": 0.4},
            {"name": "b", "text": "C2", "weight": 0.3},
            {"name": "c", "text": "C3", "weight": 0.3},
        ],
    },
]


# Rubric texts differ between criteria: identical requests share one cache entry by design
# (same question, same answer), which would make the hand-written answers collide.


def _study(tmp_path: Path, mode: str) -> Path:
    (tmp_path / "rubric.txt").write_text(RUBRIC)
    (tmp_path / "likert.txt").write_text(LIKERT)
    records = tmp_path / "replies.jsonl"
    records.write_text(
        json.dumps({"id": "r1", "conversation": "c1", "bot": "A", "reply": "Hello"}) + "\n"
    )
    return StudyFiles.in_folder(tmp_path, records).write_config(
        "http://127.0.0.1:9/v1",
        criteria=CRITERIA,
        data={"path": "replies.jsonl", "id": None, "group": "conversation", "condition": "bot"},
        judge={"model": "m"},
        sampling={"mode": mode, "n": 4, "temperature": None, "max_tokens": None},
        limits=None,
        output=None,
        stats=None,
    )


def _body_samples(texts: list[str]) -> dict:
    return {
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": t}}
            for i, t in enumerate(texts)
        ]
    }


def _body_logprobs(top: dict[str, float]) -> dict:
    best = max(top, key=top.get)  # type: ignore[arg-type]
    return {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": best},
                "logprobs": {
                    "content": [
                        {
                            "token": best,
                            "logprob": math.log(top[best]),
                            "top_logprobs": [
                                {"token": t, "logprob": math.log(p)} for t, p in top.items()
                            ],
                        }
                    ]
                },
            }
        ]
    }


def _store(config_path: Path, answers: dict[tuple[str, str | None], dict]) -> None:
    config = load_config(config_path)
    study = prepare_study(config)
    with JudgeCache(config.cache_path) as cache:
        for item in plan_items(study):
            body = answers[(item.criterion.name, item.rubric.name if item.rubric else None)]
            cache.put(answer_to(first_request(item, config), body))


def _scores(config: Path) -> dict[str, object]:
    results = load_results(config)
    assert results.missing == 0
    return {s.criterion: s for s in results.scores}


def test_samples_mode_by_hand(tmp_path: Path) -> None:
    config = _study(tmp_path, "samples")
    yes, no = "Yes", "No"
    _store(
        config,
        {
            # options 3, 3, 2 and an unparseable answer: points 1, 1, 0.5 -> mean 2.5/3
            ("empathy", None): _body_samples(["3", "Option 3.", " 2", "hmm"]),
            # AND: a holds 3/4 (judged true), b holds 2/4 (not > 0.5) -> FALSE; P = 0.75 * 0.5
            ("fair", "a"): _body_samples([yes, yes, " yes.", no]),
            ("fair", "b"): _body_samples([yes, no, yes, "No."]),
            # OR: a 1/4, b 3/4 -> TRUE; P = 1 - 0.75 * 0.25
            ("hate", "a"): _body_samples([no, no, no, yes]),
            ("hate", "b"): _body_samples([yes, yes, yes, no]),
            # weighted: a 4/4 (0.4), b 1/4 (no), c 3/4 (0.3) -> 0.7; expectation 0.4 + 0.075 + 0.225
            ("clear", "a"): _body_samples([yes] * 4),
            ("clear", "b"): _body_samples([no, no, no, yes]),
            ("clear", "c"): _body_samples([yes, yes, no, "TRUE"]),
        },
    )
    s = _scores(config)
    assert s["empathy"].weighted_score == pytest.approx(2.5 / 3)
    assert s["empathy"].invalid == 1 and s["empathy"].valid == 3
    assert s["fair"].weighted_score == 0.0
    assert s["fair"].outcome.holds == {"a": 0.75, "b": 0.5}
    assert s["fair"].outcome.probability == pytest.approx(0.375)
    assert s["hate"].weighted_score == 1.0
    assert s["hate"].outcome.probability == pytest.approx(1 - 0.75 * 0.25)
    assert s["clear"].weighted_score == pytest.approx(0.7)
    assert s["clear"].outcome.probability == pytest.approx(0.4 + 0.3 * 0.25 + 0.3 * 0.75)


def test_logprobs_mode_by_hand(tmp_path: Path) -> None:
    config = _study(tmp_path, "logprobs")
    _store(
        config,
        {
            # option tokens "1", "2", " 2", "3" and a non-rating token: renormalised over 1-3
            ("empathy", None): _body_logprobs(
                {"1": 0.1, "2": 0.3, " 2": 0.1, "3": 0.4, "The": 0.1}
            ),
            # "Yes" and " yes" add up; "No" -> p(a) = 0.6 / 0.9; b: 0.2 / 0.8
            ("fair", "a"): _body_logprobs({"Yes": 0.5, " yes": 0.1, "No": 0.3, "I": 0.1}),
            ("fair", "b"): _body_logprobs({"Yes": 0.2, "No": 0.6, "\n": 0.2}),
            ("hate", "a"): _body_logprobs({"Yes": 0.2, "No": 0.6}),
            ("hate", "b"): _body_logprobs({"Yes": 0.1, "No": 0.7}),
            ("clear", "a"): _body_logprobs({"Yes": 0.9, "No": 0.1}),
            ("clear", "b"): _body_logprobs({"Yes": 0.6, "No": 0.3}),
            ("clear", "c"): _body_logprobs({"Yes": 0.2, "No": 0.6}),
        },
    )
    s = _scores(config)
    p = {0.0: 0.1 / 0.9, 0.5: 0.4 / 0.9, 1.0: 0.4 / 0.9}
    assert s["empathy"].weighted_score == pytest.approx(sum(k * v for k, v in p.items()))
    pa, pb = 0.6 / 0.9, 0.2 / 0.8
    assert s["fair"].weighted_score == 0.0  # b does not hold
    assert s["fair"].outcome.probability == pytest.approx(pa * pb)
    assert s["hate"].weighted_score == 0.0  # neither holds
    assert s["hate"].outcome.probability == pytest.approx(1 - (1 - 0.25) * (1 - 0.125))
    assert s["clear"].weighted_score == pytest.approx(0.4 + 0.3)  # a and b hold, c does not
    assert s["clear"].outcome.probability == pytest.approx(0.4 * 0.9 + 0.3 * 0.6 / 0.9 + 0.3 * 0.25)


def test_chatbot_example_end_to_end_and_rubric_edit(tmp_path: Path) -> None:
    example = ROOT / "examples" / "chatbot"
    for name in ("config.toml", "replies.jsonl"):
        (tmp_path / name).write_text((example / name).read_text())
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    config_text = (
        (tmp_path / "config.toml").read_text().replace("../../prompts/chatbot/", "prompts/")
    )
    for prompt in (ROOT / "prompts" / "chatbot").iterdir():
        (prompts / prompt.name).write_text(prompt.read_text())
    (tmp_path / "config.toml").write_text(config_text.replace("../../cache/chatbot", "cache"))
    with SimServer() as server:
        run = run_cli(
            "run", str(tmp_path / "config.toml"), "--quiet", "--base-url", server.base_url
        )
        assert run.returncode == 0, run.stderr
        assert server.stats.received == 24 * (1 + 1 + 3 + 3 + 5)
        # Editing one rubric's text re-asks exactly that rubric, for every record.
        edited = (
            (tmp_path / "config.toml")
            .read_text()
            .replace(
                "It uses plain words a non-expert understands.", "It uses plain, everyday words."
            )
        )
        (tmp_path / "config.toml").write_text(edited)
        again = run_cli(
            "run", str(tmp_path / "config.toml"), "--quiet", "--base-url", server.base_url
        )
        assert again.returncode == 0
        assert server.stats.received == 24 * 13 + 24
    report = run_cli("report", str(tmp_path / "config.toml"))
    assert report.returncode == 0, report.stderr
    long = (tmp_path / "out" / "scores" / "chatbot_long.csv").read_text()
    assert '""rubrics""' in long and '""probability""' in long
