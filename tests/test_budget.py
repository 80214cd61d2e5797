"""``--max-cost``: a run stops dispatching before its estimated spend passes the cap.

A request is estimated at its prompt-token estimate plus ``max_tokens x n`` completion tokens,
at the model's price (``[prices]`` in the config overrides the built-in table). The tests price
the simulated judge high enough that one request costs about a dollar.
"""

from __future__ import annotations

import hashlib
import re
import subprocess

import orjson
import pytest
from conftest import StudyFiles, cache_snapshot, run_cli

from geval_async.sim import SimServer
from geval_async.study.config import load_config
from geval_async.study.plan import planned_requests
from geval_async.study.prepare import prepare_study
from geval_async.study.pricing import usd

PRICE_IN, PRICE_OUT = 10_000.0, 20_000.0  # USD per million tokens


def _write(study: StudyFiles, sim: SimServer) -> None:
    study.write_config(
        sim.base_url,
        prices={"sim-judge": [PRICE_IN, PRICE_OUT]},
        limits={"concurrency": 4, "backoff": 0.01},
    )


def _plan_costs(study: StudyFiles) -> list[tuple[str, float]]:
    """(sha256 of the body as sent, estimated USD) of every request, in the order sent."""
    plan = prepare_study(load_config(study.config))
    out = []
    for request in planned_requests(plan, send=True):
        completion = plan.config.sampling.max_tokens * request.n
        prompt = request.est_tokens - completion
        cost = (prompt * PRICE_IN + completion * PRICE_OUT) / 1_000_000
        out.append((hashlib.sha256(orjson.dumps(request.body)).hexdigest(), cost))
    return out


def _run(study: StudyFiles, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("run", str(study.config), "--quiet", *extra)


def _stopped_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("stopped:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_the_run_stops_before_the_cap_and_a_higher_cap_resumes(
    sim: SimServer, study: StudyFiles
) -> None:
    _write(study, sim)
    costs = _plan_costs(study)
    spent = 0.0
    prefix = []
    for _, cost in costs:
        prefix.append(spent := spent + cost)
    fits = 20  # the cap lies between the 20th and the 21st request
    cap = (prefix[fits - 1] + prefix[fits]) / 2

    result = _run(study, "--max-cost", f"{cap:.6f}")
    assert result.returncode == 1, result.stdout + result.stderr
    line = _stopped_line(result)
    assert line == (
        f"stopped: budget cap {usd(round(cap, 6))} reached after "
        f"{usd(prefix[fits - 1])} estimated; raise --max-cost to continue"
    ), line
    assert "resume with: geval-async run" in result.stderr
    # Exactly the requests that fit, in the order sent: none past the cap, none held back early.
    sent = [digest for _, digest in sim.stats.arrivals]
    assert sorted(sent) == sorted(d for d, _ in costs[:fits])
    assert len(cache_snapshot(study.cache)) == fits

    again = _run(study, "--max-cost", f"{prefix[-1] + 1:.2f}")
    assert again.returncode == 0, again.stdout + again.stderr
    assert sum(sim.stats.answered.values()) == len(sim.stats.answered) == len(costs), (
        "the rerun asked only for what the first run had not"
    )
    assert len(cache_snapshot(study.cache)) == len(costs)


def test_429s_are_not_charged(sim: SimServer, study: StudyFiles) -> None:
    sim.settings.spurious_429 = 0.25
    sim.settings.retry_after_ms = 10
    sim.settings.seed = 1  # its fault draws put 429s among the first requests (seed 0's don't)
    _write(study, sim)
    costs = dict(_plan_costs(study))
    cap = sum(costs.values()) / 2
    result = _run(study, "--max-cost", f"{cap:.2f}")
    assert result.returncode == 1, result.stdout + result.stderr
    assert sim.stats.by_status[429] > 0, (result.stderr, sim.stats.as_dict())
    answered = sum(costs[d] for d in sim.stats.answered)
    assert answered <= cap
    # The estimate in the message is what was answered: the 429s were given back.
    match = re.search(r"reached after (\$[\d,.]+) estimated", _stopped_line(result))
    assert match and match.group(1) == usd(answered), (match, usd(answered))


def test_unknown_price_is_a_config_error_before_anything_happens(
    sim: SimServer, study: StudyFiles
) -> None:
    _write(study, sim)
    result = _run(study, "--max-cost", "5", "--model", "mystery-judge-7b")
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "mystery-judge-7b" in lines[0] and "[prices]" in lines[0], lines
    assert sim.stats.received == 0
    assert not study.cache.exists()
    # Without a cap an unknown price is no problem.
    assert _run(study, "--model", "mystery-judge-7b", "--limit", "1").returncode == 0


@pytest.mark.parametrize(
    "value, needle",
    [
        ("[1.0]", "two numbers"),
        ('["cheap", 1]', "two numbers"),
        ("[-1, 2]", "0 or more"),
        ("5", "[input, output]"),
    ],
)
def test_bad_prices_are_config_errors(
    sim: SimServer, study: StudyFiles, value: str, needle: str
) -> None:
    study.write_config(sim.base_url)
    study.config.write_text(study.config.read_text() + f'\n[prices]\n"sim-judge" = {value}\n')
    result = _run(study, "--max-cost", "5")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "[prices]" in result.stderr and needle in result.stderr, result.stderr
    assert sim.stats.received == 0


@pytest.mark.parametrize("cap", ["0", "-3", "nan", "inf"])
def test_a_cap_must_be_a_positive_amount(sim: SimServer, study: StudyFiles, cap: str) -> None:
    _write(study, sim)
    result = _run(study, "--max-cost", cap)
    assert result.returncode == 2 and "--max-cost" in result.stderr, result.stderr
    assert sim.stats.received == 0


def test_dry_run_uses_the_configured_price(sim: SimServer, study: StudyFiles) -> None:
    _write(study, sim)
    total = sum(cost for _, cost in _plan_costs(study))
    result = _run(study, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert f"estimated cost: ${total:.2f}" in result.stdout, result.stdout


def test_requests_no_server_received_are_not_charged(study: StudyFiles) -> None:
    # A wrong port: every attempt is refused before any server sees it. Each used to be
    # recorded in spend.jsonl at its full estimate, eating into the study's --max-cost.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free once closed: nothing listens there
    study.write_config(
        f"http://127.0.0.1:{port}/v1",
        prices={"sim-judge": [PRICE_IN, PRICE_OUT]},
        limits={"concurrency": 4, "backoff": 0.01},
    )
    result = _run(study, "--max-cost", "100000")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "connection refused" in _stopped_line(result)
    assert not (study.cache / "spend.jsonl").exists(), (study.cache / "spend.jsonl").read_text()
