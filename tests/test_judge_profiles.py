"""The shipped UEQ study through every profile of the simulated judge, end to end.

Each test serves the simulated judge (real HTTP on 127.0.0.1) in one of the dialects of the
endpoints people judge with now (``openai-reasoning``, ``deepseek-reasoner``, ``think-tags``,
``anthropic-compat``), runs ``geval-async run`` and ``geval-async score`` as a user would (a
subprocess each), and compares what a user reads (the run's last line, ``status``, the scores)
with what the server did: the ratings it gave (``SimStats.ratings``) and the status codes it
answered (``SimStats.by_status``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import UEQ, run_cli, summary_row, ueq_flags

from geval_async.judging.wire.failures import Action, History, decide, response_fact
from geval_async.scoring.scores.results import StudyResults, load_results
from geval_async.sim import SimServer, SimSettings, SimStats

LIMIT = 4  # the records ueq_flags judges
ITEMS = 4 * LIMIT  # four criteria
KEY = {"OPENAI_API_KEY": "sk-test-profiles"}


@pytest.fixture
def srv() -> Iterator[SimServer]:
    with SimServer(SimSettings()) as server:
        yield server


def _flags(srv: SimServer, tmp_path: Path, model: str, *extra: str) -> list[str]:
    return ueq_flags(srv.base_url, tmp_path, model, *extra)


def _run(srv: SimServer, tmp_path: Path, model: str, *extra: str) -> Any:
    return run_cli("run", *_flags(srv, tmp_path, model, *extra), "--quiet", env=KEY)


def _status(srv: SimServer, tmp_path: Path, model: str, *extra: str) -> dict[str, int]:
    done = run_cli("status", *_flags(srv, tmp_path, model, *extra), env=KEY)
    assert done.returncode in (0, 1), done.stderr
    return summary_row(done.stdout)


def _score(
    srv: SimServer, tmp_path: Path, model: str, *extra: str, invalid: bool = False
) -> StudyResults:
    """``geval-async score`` (the outputs a user reads), then the same scores in Python."""
    done = run_cli("score", *_flags(srv, tmp_path, model, *extra), env=KEY)
    assert done.returncode == 0, done.stderr
    assert "_con.csv" in done.stdout and "have no answer" not in done.stdout, done.stdout
    # An unread answer is a line a user reads: none unless the test expects them.
    assert ("invalid" in done.stdout) is invalid, done.stdout
    overrides: dict[str, Any] = {"model": model, "limit": LIMIT, "cache": tmp_path / "cache"}
    flags = dict(zip(extra[::2], extra[1::2], strict=True))
    if "--max-tokens" in flags:
        overrides["max_tokens"] = int(flags["--max-tokens"])
    if "--mode" in flags:
        overrides["mode"] = flags["--mode"]
    return load_results(UEQ, output=tmp_path / "scored", **overrides)


def _given(srv: SimServer) -> Counter[tuple[float | None, ...]]:
    """The ratings the server gave, one tuple per answer."""
    return Counter(tuple(ratings) for ratings in srv.stats.ratings.values())


def _failed(srv: SimServer) -> int:
    return sum(count for status, count in srv.stats.by_status.items() if status != 200)


# -- openai-reasoning ----------------------------------------------------------------------

GPT5 = "gpt-5-mini"
CLAUDE = "claude-sonnet-4-5"


def test_openai_reasoning_large_budget_scores_the_ratings_the_server_gave(
    srv: SimServer, tmp_path: Path
) -> None:
    srv.settings.profile = "openai-reasoning"
    done = _run(srv, tmp_path, GPT5, "--max-tokens", "2000")
    assert done.returncode == 0, done.stderr
    # Only the first wave met the max_tokens refusal; every item was answered once.
    assert set(srv.stats.by_status) <= {200, 400}
    assert srv.stats.by_status[200] == ITEMS
    assert f"{GPT5} at 127.0.0.1:{srv.port}: max_completion_tokens, n up to 10" in done.stdout
    results = _score(srv, tmp_path, GPT5, "--max-tokens", "2000")
    assert Counter(score.ratings for score in results.scores) == _given(srv)
    assert len(results.scores) == ITEMS
    assert all(score.invalid == 0 and score.valid == 10 for score in results.scores)

    # A second run against the same endpoint (four more records) sends no request that fails.
    failed = _failed(srv)
    again = _run(srv, tmp_path, GPT5, "--max-tokens", "2000", "--limit", str(2 * LIMIT))
    assert again.returncode == 0, again.stderr
    assert _failed(srv) == failed
    assert srv.stats.by_status[200] == 2 * ITEMS


def _first_wave_refused_for_the_budget(stats: SimStats) -> bool:
    # Each of the four in flight refused max_tokens once, was resent under
    # max_completion_tokens and came back empty (billed, not stored).
    return 1 <= stats.by_status[200] <= 4 and stats.by_status[400] <= 4


def _in_flight_refused(stats: SimStats) -> bool:
    # The requests in flight (each perhaps first refused for max_tokens), not the plan's 16.
    return stats.received <= 4 and stats.by_status[200] == 0


def _in_flight_answered_without_logprobs(stats: SimStats) -> bool:
    return stats.by_status[200] <= 2  # the requests in flight, not the plan's 16


@pytest.mark.parametrize(
    ("profile", "model", "flags", "line", "sent"),
    [
        pytest.param(
            "openai-reasoning",
            GPT5,
            ("--concurrency", "4"),
            # The shipped config's max_tokens = 5: the model spends it all on reasoning.
            "stopped: the judge spent all of max_tokens (5) on reasoning and gave no rating: "
            "raise [sampling] max_tokens (for example to 2000) or lower reasoning_effort",
            _first_wave_refused_for_the_budget,
            id="openai-reasoning-shipped-budget",
        ),
        pytest.param(
            "openai-reasoning",
            GPT5,
            ("--max-tokens", "2000", "--concurrency", "2", "--temperature", "0.7"),
            "stopped: [sampling] temperature = 0.7 is refused by gpt-5-mini (unsupported_value: "
            "only the default (1) value is supported): set temperature = 1",
            _in_flight_refused,
            id="openai-reasoning-temperature",
        ),
        pytest.param(
            "openai-reasoning",
            GPT5,
            ("--max-tokens", "2000", "--concurrency", "2", "--mode", "logprobs"),
            'stopped: [sampling] mode = "logprobs" is refused by gpt-5-mini (HTTP 403: You are '
            'not allowed to request logprobs from this model): set mode = "samples"',
            _in_flight_refused,
            id="openai-reasoning-logprobs",
        ),
        pytest.param(
            # The endpoint ignores logprobs: the answers come without them, and none could be
            # scored.
            "anthropic-compat",
            CLAUDE,
            ("--mode", "logprobs", "--concurrency", "2"),
            f'stopped: [sampling] mode = "logprobs": {CLAUDE} answered without logprobs (the '
            'endpoint ignores them): set mode = "samples"',
            _in_flight_answered_without_logprobs,
            id="anthropic-compat-logprobs",
        ),
    ],
)
def test_a_setting_the_endpoint_refuses_stops_the_first_wave_and_stores_nothing(
    srv: SimServer,
    tmp_path: Path,
    profile: str,
    model: str,
    flags: tuple[str, ...],
    line: str,
    sent: Callable[[SimStats], bool],
) -> None:
    srv.settings.profile = profile
    done = _run(srv, tmp_path, model, *flags)
    assert done.returncode == 1, done.stderr
    assert line in done.stderr
    assert sent(srv.stats), srv.stats.by_status
    row = _status(srv, tmp_path, model, *flags)
    assert (row["answered"], row["refused"], row["missing"]) == (0, 0, ITEMS)


# -- reasoning before the rating -----------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "field", "model"),
    [
        ("think-tags", "reasoning_content", "qwen3"),
        ("deepseek-reasoner", "reasoning_content", "deepseek-reasoner"),
        ("deepseek-reasoner", "reasoning", "deepseek-r1"),
    ],
    ids=["think-tags", "reasoning_content", "reasoning"],
)
def test_reasoning_judges_score_the_ratings_after_the_reasoning(
    srv: SimServer, tmp_path: Path, profile: str, field: str, model: str
) -> None:
    srv.settings.profile, srv.settings.reasoning_field = profile, field
    done = _run(srv, tmp_path, model, "--max-tokens", "2000")
    assert done.returncode == 0, done.stderr
    assert srv.stats.by_status == Counter({200: ITEMS})
    results = _score(srv, tmp_path, model, "--max-tokens", "2000")
    # Every reasoning holds numbers that disagree with its rating: none is read as one.
    assert Counter(score.ratings for score in results.scores) == _given(srv)
    assert all(score.invalid == 0 and score.valid == 10 for score in results.scores)
    assert all(all(r and r.strip() for r in score.reasonings) for score in results.scores) or (
        profile == "think-tags"
    )


def test_think_tags_in_logprobs_mode_score_as_a_judge_without_reasoning(
    srv: SimServer, tmp_path: Path
) -> None:
    flags = ("--max-tokens", "2000", "--mode", "logprobs")
    srv.settings.profile = "think-tags"
    thinking = tmp_path / "thinking"
    assert _run(srv, thinking, "qwen3", *flags).returncode == 0
    # The same requests to a judge that does not think: the rating token's distribution is the
    # same, so the scores must be too.
    srv.settings.profile = "default"
    plain = tmp_path / "plain"
    assert _run(srv, plain, "qwen3", *flags).returncode == 0
    thought = _score(srv, thinking, "qwen3", *flags).scores
    direct = _score(srv, plain, "qwen3", *flags).scores
    assert len(thought) == ITEMS and all(score.invalid == 0 for score in thought)
    by_item = {(s.record_id, s.criterion): s.weighted_score for s in direct}
    assert {(s.record_id, s.criterion): s.weighted_score for s in thought} == by_item
    assert all(score is not None for score in by_item.values())


def test_think_tags_cut_off_inside_the_reasoning_are_cut_off(
    srv: SimServer, tmp_path: Path
) -> None:
    srv.settings.profile, srv.settings.think_cut_off = "think-tags", 0.3
    assert _run(srv, tmp_path, "qwen3", "--max-tokens", "2000").returncode == 0
    results = _score(srv, tmp_path, "qwen3", "--max-tokens", "2000", invalid=True)
    reasons = Counter(reason for score in results.scores for reason in score.reasons)
    # About 30% of the 160 answers were cut inside their reasoning, and nothing else is lost.
    assert set(reasons) == {None, "cut_off"} and 20 <= reasons["cut_off"] <= 80, reasons
    record = next(s.record_id for s in results.scores if "cut_off" in s.reasons)
    shown = run_cli(
        "answers",
        *_flags(srv, tmp_path, "qwen3", "--max-tokens", "2000"),
        "--record",
        str(record),
        env=KEY,
    )
    assert shown.returncode == 0, shown.stderr
    assert "cut_off (cut off inside its reasoning)" in shown.stdout


# -- anthropic-compat ----------------------------------------------------------------------


def test_anthropic_compat_asks_one_choice_per_request_and_completes(
    srv: SimServer, tmp_path: Path
) -> None:
    srv.settings.profile = "anthropic-compat"
    done = _run(srv, tmp_path, CLAUDE, "--concurrency", "4")
    assert done.returncode == 0, done.stderr
    # The first wave learns n = 1 (each a 400 with param "n"); then ten calls an item.
    assert srv.stats.by_status[400] <= 4
    assert srv.stats.by_status[200] == 10 * ITEMS
    assert f"{CLAUDE} at 127.0.0.1:{srv.port}: max_tokens, n = 1 only" in done.stdout
    results = _score(srv, tmp_path, CLAUDE)
    assert all(score.valid == 10 and score.invalid == 0 for score in results.scores)
    scored = sorted(r for score in results.scores for r in score.ratings)
    assert scored == sorted(r for rs in srv.stats.ratings.values() for r in rs)

    # Remembered: the next run (four more records) sends n = 1 from its first request.
    failed = _failed(srv)
    again = _run(srv, tmp_path, CLAUDE, "--concurrency", "4", "--limit", str(2 * LIMIT))
    assert again.returncode == 0, again.stderr
    assert _failed(srv) == failed
    assert srv.stats.by_status[200] == 20 * ITEMS


def test_a_refused_n_is_read_from_the_bodys_param_not_its_words() -> None:
    body = {"error": {"message": "Invalid request (sim).", "type": "invalid_request_error"}}
    history = History("http://127.0.0.1:9/v1/chat/completions", "K")
    raw = json.dumps({"error": {**body["error"], "param": "n", "code": None}}).encode()
    assert decide(response_fact(400, raw, {}), history, n=10).action is Action.ONE_CHOICE
    # The same words about another parameter are a refusal of that request, not of n.
    raw = json.dumps({"error": {**body["error"], "param": "messages", "code": None}}).encode()
    assert decide(response_fact(400, raw, {}), history, n=10).action is Action.REFUSE


# -- batch jobs use what the endpoint has taught -------------------------------------------

BATCH = ("--batch", "--poll", "0.05")


def test_batch_learns_max_completion_tokens_and_sends_the_refused_lines_again(
    srv: SimServer, tmp_path: Path
) -> None:
    srv.settings.profile = "openai-reasoning"
    done = _run(srv, tmp_path, GPT5, "--max-tokens", "2000", *BATCH)
    assert done.returncode == 0, done.stderr
    # The first batch was refused line by line for max_tokens; the second asked again.
    assert (srv.stats.batches, srv.stats.batch_lines) == (2, 2 * ITEMS)
    assert srv.stats.received == 0  # not one online request
    results = _score(srv, tmp_path, GPT5, "--max-tokens", "2000")
    assert Counter(score.ratings for score in results.scores) == _given(srv)
    assert all(score.valid == 10 for score in results.scores)
    # Remembered: the next batch (four more records) holds no line the endpoint refuses.
    again = _run(srv, tmp_path, GPT5, "--max-tokens", "2000", "--limit", str(2 * LIMIT), *BATCH)
    assert again.returncode == 0, again.stderr
    assert (srv.stats.batches, srv.stats.batch_lines) == (3, 3 * ITEMS)
    assert _status(srv, tmp_path, GPT5, "--max-tokens", "2000", "--limit", "8")["answered"] == (
        2 * ITEMS
    )


def test_batch_after_an_online_run_sends_max_completion_tokens_from_the_start(
    srv: SimServer, tmp_path: Path
) -> None:
    srv.settings.profile = "openai-reasoning"
    assert _run(srv, tmp_path, GPT5, "--max-tokens", "2000").returncode == 0
    done = _run(srv, tmp_path, GPT5, "--max-tokens", "2000", "--limit", str(2 * LIMIT), *BATCH)
    assert done.returncode == 0, done.stderr
    assert (srv.stats.batches, srv.stats.batch_lines) == (1, ITEMS)
    row = _status(srv, tmp_path, GPT5, "--max-tokens", "2000", "--limit", str(2 * LIMIT))
    assert (row["answered"], row["missing"]) == (2 * ITEMS, 0)


def test_batch_line_refused_for_a_setting_stops_the_run_as_online(
    srv: SimServer, tmp_path: Path
) -> None:
    srv.settings.profile = "openai-reasoning"
    flags = ("--max-tokens", "2000", "--temperature", "0.7")
    online = _run(srv, tmp_path / "online", GPT5, *flags)
    line = (
        "stopped: [sampling] temperature = 0.7 is refused by gpt-5-mini (unsupported_value: "
        "only the default (1) value is supported): set temperature = 1"
    )
    assert online.returncode == 1 and line in online.stderr
    srv.stats.reset()
    done = _run(srv, tmp_path, GPT5, *flags, *BATCH)
    assert done.returncode == 1 and line in done.stderr
    # One batch (max_tokens then refused line by line) is learned and sent again; the second
    # is refused for the temperature: no third, and nothing stored for the items.
    assert srv.stats.batches == 2
    row = _status(srv, tmp_path, GPT5, *flags)
    assert (row["answered"], row["refused"], row["missing"]) == (0, 0, ITEMS)


def test_a_batch_refused_for_n_learns_n_1_completes_and_teaches_the_online_run(
    srv: SimServer, tmp_path: Path
) -> None:
    # One learning step serves both paths: a batch refused line by line for n learns the
    # endpoint's n = 1, sends every draw of every item in the next batch, and an online run
    # then starts from what it learned.
    srv.settings.profile = "anthropic-compat"
    done = _run(srv, tmp_path, CLAUDE, *BATCH)
    assert done.returncode == 0, done.stderr
    assert srv.stats.received == 0  # not one online request
    # The first batch was refused for n; the second asked for each of the ten draws alone.
    assert (srv.stats.batches, srv.stats.batch_lines) == (2, ITEMS + 10 * ITEMS)
    status = run_cli("status", *_flags(srv, tmp_path, CLAUDE), env=KEY)
    assert f"{CLAUDE} at 127.0.0.1:{srv.port}: max_tokens, n = 1 only" in status.stdout
    results = _score(srv, tmp_path, CLAUDE)
    assert all(score.valid == 10 and score.invalid == 0 for score in results.scores)
    scored = sorted(r for score in results.scores for r in score.ratings)
    assert scored == sorted(r for rs in srv.stats.ratings.values() for r in rs)
    again = _run(srv, tmp_path, CLAUDE, "--concurrency", "4", "--limit", str(2 * LIMIT))
    assert again.returncode == 0, again.stderr
    assert srv.stats.by_status[400] == 0  # online: n = 1 from the first request
    assert srv.stats.by_status[200] == 10 * ITEMS  # the four new records' draws


def test_deciding_reads_the_history_and_the_run_records_each_attempt() -> None:
    """A wrong port: each refused connection seen counts, the third stops the run with the
    line that names the cause; deciding alone, however often, changes nothing."""
    from dataclasses import asdict

    from geval_async.errors import Connection, FailureFact

    history = History("http://127.0.0.1:9/v1/chat/completions", "K")
    refused = FailureFact(connection=Connection.REFUSED)
    before = asdict(history)
    for _ in range(5):
        assert decide(refused, history).action is Action.BACKOFF
    assert asdict(history) == before
    actions = []
    for _ in range(3):
        history.saw(refused)
        actions.append(decide(refused, history))
    assert [d.action for d in actions] == [Action.BACKOFF, Action.BACKOFF, Action.STOP]
    assert "is the server running on that host and port?" in actions[-1].message
    # Once the endpoint has answered, a refused connection is a transient failure, not a
    # wrong URL: it is retried.
    answered = History("http://127.0.0.1:9/v1/chat/completions", "K")
    answered.saw(FailureFact(status=500))
    for _ in range(4):
        answered.saw(refused)
        assert decide(refused, answered, attempt=1).action is Action.BACKOFF
