"""Draws spent by need: items asked ``first_draws``, then more in rounds while their standard
error is above ``target_se`` (or a budget of ``draws`` spent where ratings disagree), against
the simulated judge whose items differ in how sure it is (``certainty = "varied"``).

Every count here is what the judge was asked (the simulated judge's own counts) or what a
user reads (``load_results``, ``status``, exit codes), never the run's own bookkeeping.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import StudyFiles, run_cli, run_study, start_process, wait_for

import geval_async as ga
from geval_async.scoring.stats.adaptive import allot_budget, stopping_point
from geval_async.sim import SimServer, SimSettings, item_certainty, item_digest
from geval_async.study.config import load_config
from geval_async.study.plan import plan_items, render_messages
from geval_async.study.prepare import prepare_study

VARIED = SimSettings(certainty="varied", seed=7)
N = 12
FIRST = 3
ADAPTIVE = {"n": N, "target_se": 0.2, "first_draws": FIRST, "seed": 11}


@pytest.fixture
def varied() -> Iterator[SimServer]:
    with SimServer(SimSettings(certainty="varied", seed=7)) as server:
        yield server


def draws_used(study: StudyFiles, **overrides: object) -> pd.Series:
    """Each item's draws as its score reads them: ``(criterion, record_id) -> draws``."""
    results = ga.load_results(study.config, **overrides)
    long = results.long
    scored = long[long["status"] == "scored"]
    draws = scored["valid"] + scored["invalid"]
    return pd.Series(
        draws.to_numpy(), index=pd.MultiIndex.from_frame(scored[["criterion", "record_id"]])
    )


def past_the_opening_round(server: SimServer, items: int) -> None:
    """Wait until the judge has answered every item once and more: a later round is asked."""
    wait_for(lambda: server.stats.received > items + 2, "a later round")


def rounds(ratings: tuple[float | None, ...]) -> int:
    """The rounds the target rule took to settle an item with these ratings (in draw order)."""
    draws, taken = FIRST, 1
    while not (stop := stopping_point(ratings[:draws], N, FIRST, 0.2)).settled:
        draws, taken = stop.draws, taken + 1
    return taken


def item_messages(study: StudyFiles) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The messages the judge is sent for each item: ``(criterion, record_id) -> messages``."""
    prepared = prepare_study(load_config(study.config))
    return {
        (item.criterion.name, item.record.id): render_messages(item)
        for item in plan_items(prepared)
    }


def kinds(study: StudyFiles) -> dict[tuple[str, str], str]:
    """How sure the simulated judge is of each item: ``(criterion, record_id) -> kind``."""
    return {key: item_certainty(m, VARIED) for key, m in item_messages(study).items()}


def answered(study: StudyFiles, server: SimServer) -> pd.Series:
    """The draws the judge answered for each item, over all its rounds, by its own counts:
    ``(criterion, record_id) -> draws``."""
    counts = server.stats.item_draws
    asked = {key: counts[item_digest(m)] for key, m in item_messages(study).items()}
    return pd.Series(asked).rename_axis(["criterion", "record_id"]).sort_index()


def test_draws_stop_where_ratings_agree_and_go_on_where_they_do_not(
    study: StudyFiles, varied: SimServer
) -> None:
    study.write_config(varied.base_url, sampling=ADAPTIVE)
    assert run_study(study).returncode == 0
    used = draws_used(study)
    asked = answered(study, varied)  # the judge's own count of each item's draws
    kind = kinds(study)
    assert len(used) == study.n_records * 2  # every item scored
    sure = [asked[key] for key, k in kind.items() if k == "sure"]
    spread = [asked[key] for key, k in kind.items() if k == "spread"]
    assert sure and spread
    assert set(sure) == {3}  # three equal ratings: a standard error of 0, settled at once
    # A judge torn across the scale is asked on, most items up to n.
    assert min(spread) > 3 and sum(d == N for d in spread) > len(spread) / 2
    # Each item was asked exactly the draws its score reads: none twice, none wasted.
    pd.testing.assert_series_equal(asked, used.sort_index(), check_names=False)
    assert varied.stats.samples == used.sum()
    assert used.sum() < N * len(used)
    # Every settled item meets the target or has all n draws.
    results = ga.load_results(study.config)
    long = results.long
    assert ((long["se"] <= 0.2) | (long["valid"] + long["invalid"] == N)).all()
    # On an endpoint that takes n, a round is one request asking for that round's draws.
    assert varied.stats.received == sum(rounds(score.ratings) for score in results.scores)


def test_a_rerun_sends_nothing_and_status_counts_every_item_settled(
    study: StudyFiles, varied: SimServer
) -> None:
    study.write_config(varied.base_url, sampling=ADAPTIVE)
    assert run_study(study).returncode == 0
    received = varied.stats.received
    again = run_study(study)
    assert again.returncode == 0, again.stderr
    assert varied.stats.received == received
    status = run_cli("status", str(study.config))
    assert status.returncode == 0
    assert "draws spent by need (target_se = 0.2, first_draws = 3, n = 12):" in status.stdout
    assert "0 still drawing" in status.stdout
    items = study.n_records * 2
    assert re.search(rf"^total\s+{items}\s+{items}\s+0\s+0$", status.stdout, re.MULTILINE)


def test_raising_the_target_or_asking_the_full_n_sends_only_the_new_draws(
    study: StudyFiles, varied: SimServer
) -> None:
    study.write_config(varied.base_url, sampling={**ADAPTIVE, "target_se": 0.5})
    assert run_study(study).returncode == 0
    loose = draws_used(study)
    assert varied.stats.samples == loose.sum()
    study.write_config(varied.base_url, sampling={**ADAPTIVE, "target_se": 0.1})
    assert run_study(study).returncode == 0
    tight = draws_used(study)
    # Each item asked only the draws past those it had: the earlier ones are the same keys.
    asked = answered(study, varied)
    pd.testing.assert_series_equal(
        asked, pd.concat([loose, tight], axis=1).max(axis=1).sort_index(), check_names=False
    )
    assert varied.stats.samples == loose.sum() + (tight - loose).clip(lower=0).sum()
    assert (tight >= loose).mean() > 0.9
    # The fixed study with the same settings reads every adaptive draw as its first ones.
    before = varied.stats.samples
    fixed = {**ADAPTIVE, "target_se": None}
    study.write_config(varied.base_url, sampling=fixed)
    assert run_study(study).returncode == 0
    have = pd.concat([loose, tight], axis=1).max(axis=1)
    assert varied.stats.samples - before == (N - have).sum()
    # ... and its scores of the sure items are the adaptive ones (all their draws agree).
    full = ga.load_results(study.config).long.set_index(["criterion", "record_id"])["score"]
    study.write_config(varied.base_url, sampling={**ADAPTIVE, "target_se": 0.1})
    adaptive = ga.load_results(study.config).long.set_index(["criterion", "record_id"])["score"]
    sure = [key for key, k in kinds(study).items() if k == "sure"]
    assert (full[sure] == adaptive[sure]).all()


def test_an_endpoint_of_one_answer_a_request_draws_the_same_as_one_that_takes_n(
    tmp_path: Path,
) -> None:
    from conftest import write_study

    answers = {}
    for name, settings in (
        ("n", SimSettings(certainty="varied", seed=7)),
        ("one", SimSettings(certainty="varied", seed=7, max_n=1)),
    ):
        root = tmp_path / name
        root.mkdir()
        files = write_study(root)
        with SimServer(settings) as server:
            files.write_config(server.base_url, sampling=ADAPTIVE)
            result = run_study(files)
            assert result.returncode == 0, result.stderr
            answers[name] = draws_used(files)
            if name == "one":
                # One request a draw once the endpoint refused n > 1 (the first request).
                assert server.stats.samples == answers[name].sum()
    pd.testing.assert_series_equal(answers["n"], answers["one"])


def test_a_budget_goes_to_the_items_the_judge_is_torn_on(
    study: StudyFiles, varied: SimServer
) -> None:
    items = study.n_records * 2
    budget = items * N // 2
    study.write_config(varied.base_url, sampling={**ADAPTIVE, "target_se": None, "draws": budget})
    assert run_study(study).returncode == 0
    used = draws_used(study)
    assert varied.stats.samples == used.sum() <= budget
    assert used.sum() > budget * 0.9  # spent, not left over
    kind = kinds(study)
    mean = {k: used[[key for key, v in kind.items() if v == k]].mean() for k in ("sure", "spread")}
    assert mean["spread"] > 2 * mean["sure"]
    # Its largest per-item standard error is below the same budget spread evenly.
    adaptive_se = ga.load_results(study.config).long["se"].max()
    even = budget // items
    study.write_config(varied.base_url, sampling={**ADAPTIVE, "target_se": None, "n": even})
    assert run_study(study).returncode == 0
    assert adaptive_se < ga.load_results(study.config).long["se"].max()


def test_sigkill_between_rounds_resumes_without_asking_a_draw_twice(
    study: StudyFiles, tmp_path: Path
) -> None:
    with SimServer(SimSettings(certainty="varied", seed=7, latency_ms=30)) as server:
        study.write_config(server.base_url, sampling=ADAPTIVE, limits={"concurrency": 2})
        process = start_process("run", str(study.config), "--quiet", quiet=True)
        items = study.n_records * 2
        past_the_opening_round(server, items)
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        assert server.stats.received > items
        asked = server.stats.samples
        result = run_study(study)
        assert result.returncode == 0, result.stderr
        used = draws_used(study)
        # Only the answers in flight at the kill (two requests at most) are asked again.
        assert used.sum() <= server.stats.samples <= used.sum() + 2 * N
        assert server.stats.samples > asked
        again = answered(study, server) - used.sort_index()
        assert (again >= 0).all() and (again > 0).sum() <= 2, again[again != 0]
    # The same draws, and so the same scores, as a run never interrupted.
    clean = tmp_path / "clean"
    clean.mkdir()
    from conftest import write_study

    files = write_study(clean)
    with SimServer(SimSettings(certainty="varied", seed=7)) as server:
        files.write_config(server.base_url, sampling=ADAPTIVE)
        assert run_study(files).returncode == 0
        pd.testing.assert_series_equal(used, draws_used(files))


def test_batch_api_rounds_are_batches(study: StudyFiles, varied: SimServer) -> None:
    study.write_config(varied.base_url, sampling=ADAPTIVE)
    result = run_cli("run", str(study.config), "--batch", "--poll", "0.05", "--quiet")
    assert result.returncode == 0, result.stderr
    used = draws_used(study)
    assert varied.stats.batches >= 2  # the opening round, then the items still drawing
    assert varied.stats.samples == used.sum()
    pd.testing.assert_series_equal(answered(study, varied), used.sort_index(), check_names=False)
    online = draws_used(study)
    assert len(online) == study.n_records * 2


@pytest.mark.parametrize(
    ("sampling", "message"),
    [
        ({"target_se": 0.2, "draws": 100}, "not both"),
        ({"target_se": 0.0}, "'target_se' must be above 0"),
        ({"target_se": 0.2, "mode": "logprobs"}, 'need mode = "samples"'),
        ({"target_se": 0.2, "first_draws": 20}, "'first_draws' (20) must be at most 'n' (12)"),
        ({"target_se": None, "draws": 10}, "cannot give each of the 48 items its first_draws"),
    ],
)
def test_a_setting_that_cannot_be_spent_is_one_line(
    study: StudyFiles, varied: SimServer, sampling: dict[str, object], message: str
) -> None:
    study.write_config(varied.base_url, sampling={**ADAPTIVE, **sampling})
    result = run_study(study)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert varied.stats.received == 0


def test_the_command_line_sets_the_target_for_one_run(study: StudyFiles, varied: SimServer) -> None:
    study.write_config(varied.base_url, sampling={"n": N, "seed": 11})
    assert run_study(study, "--target-se", "0.2").returncode == 0
    assert varied.stats.samples < N * study.n_records * 2
    dry = run_cli("run", str(study.config), "--dry-run", "--n", "20", "--target-se", "0.2")
    assert dry.returncode == 0, dry.stderr
    assert "draws spent by need (target_se = 0.2, first_draws = 3, n = 20)" in dry.stdout
    assert "estimate: about" in dry.stdout


def dry_run_bounds(study: StudyFiles, *flags: str) -> tuple[tuple[int, float], tuple[int, float]]:
    """``run --dry-run``'s least and most: ``(draws, USD)`` each."""
    dry = run_cli("run", str(study.config), "--dry-run", *flags)
    assert dry.returncode == 0, dry.stderr
    found = [
        re.search(rf"^  {bound}: (-?\d+) draws, \d+ requests, \$([\d.]+)", dry.stdout, re.MULTILINE)
        for bound in ("least", "most")
    ]
    assert all(found), dry.stdout
    return tuple((int(m[1]), float(m[2])) for m in found if m)  # type: ignore[return-value]


def test_the_dry_run_of_a_budget_brackets_what_the_run_then_asks(
    study: StudyFiles, varied: SimServer
) -> None:
    # Prices at which the prompt is most of the bill: a draw past the first ones costs little.
    prices = {"sim-judge": [10_000.0, 20_000.0]}
    study.write_config(varied.base_url, sampling={**ADAPTIVE, "target_se": None}, prices=prices)
    items = study.n_records * 2
    budget = items * 6
    (least, low), (most, high) = dry_run_bounds(study, "--draws", str(budget))
    assert (least, most) == (3 * items, budget)  # first_draws each; the whole budget
    assert low < high
    assert run_study(study, "--draws", str(budget)).returncode == 0
    spent = varied.stats.samples
    # A budget raised: its rounds are replayed on draws the smaller one placed elsewhere.
    raised = str(budget + 100)
    (least, low), (most, high) = dry_run_bounds(study, "--draws", raised)
    assert 0 <= least <= most <= budget + 100 - spent
    assert low <= high
    assert run_study(study, "--draws", raised).returncode == 0
    assert least <= varied.stats.samples - spent <= most


def test_the_dry_run_of_a_target_bounds_the_requests_and_cost_of_its_rounds(
    study: StudyFiles, varied: SimServer
) -> None:
    # Prices at which the prompt is most of the bill: on an endpoint that takes n, every
    # round after the first pays it again, and the most must say so.
    study.write_config(varied.base_url, sampling=ADAPTIVE, prices={"sim-judge": [1e4, 2e4]})
    dry = run_cli("run", str(study.config), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    bound = r"^  {}: (\d+) draws, (\d+) requests, \$([\d.]+)"
    least = re.search(bound.format("least"), dry.stdout, re.MULTILINE)
    most = re.search(bound.format("most"), dry.stdout, re.MULTILINE)
    assert least and most, dry.stdout
    run = run_cli("run", str(study.config))
    assert run.returncode == 0, run.stderr
    billed = re.search(r"^billed: \$([\d.]+)", run.stdout, re.MULTILINE)
    assert billed, run.stdout
    assert int(least[1]) <= varied.stats.samples <= int(most[1])
    assert int(least[2]) < varied.stats.received <= int(most[2])  # later rounds were asked
    assert float(least[3]) < float(billed[1]) <= float(most[3])


# --- the rules, on ratings given --------------------------------------------------------------


def test_the_target_rule_stops_on_agreement_and_asks_what_the_spread_needs() -> None:
    assert stopping_point([4, 4, 4], 20, 3, 0.2) == (3, True)
    assert stopping_point([4, 4], 20, 3, 0.2) == (3, False)  # its first round is not in
    # 1, 3, 5: s = 2, so (2 / 0.5)^2 = 16 draws; a round at most doubles: 6 asked next.
    assert stopping_point([1, 3, 5], 20, 3, 0.5) == (6, False)
    assert stopping_point([1, 3, 5] * 7, 20, 3, 0.01) == (20, True)  # n is the most
    # Answers without a rating leave the spread unknown: the next round doubles.
    assert stopping_point([None, None, 4], 20, 3, 0.2) == (6, False)


def test_the_budget_goes_to_the_least_sure_items_first() -> None:
    items = [[3, 3, 3] + [3] * 17, [1, 5, 2] + [4, 1, 5] * 6 + [3, 3], [2, 3, 2] + [2] * 17]
    stops = allot_budget(items, [4.0, 4.0, 4.0], 20, 3, 3 * 3 + 6)
    # The torn item takes the whole budget, over two rounds (a round at most doubles it).
    assert [s.draws for s in stops] == [3, 9, 3]
    assert all(s.settled for s in stops)
    # Its second round is read from its new ratings: until they are in, nothing is settled.
    assert allot_budget([items[0][:3], items[1][:3], items[2][:3]], [4.0] * 3, 20, 3, 15) == [
        (3, False),
        (6, False),
        (3, False),
    ]


def test_each_judge_of_a_panel_asks_its_own_rounds_of_its_own_items(study: StudyFiles) -> None:
    from conftest import running_sims, sim_judges

    with running_sims(("a", "b"), lambda: SimSettings(certainty="varied", seed=7)) as sims:
        study.write_panel(sim_judges(sims), sampling=ADAPTIVE)
        result = run_study(study)
        assert result.returncode == 0, result.stderr
        panel = ga.load_results(study.config)
        for name, server in sims.items():
            own = panel.members[name]
            used = own.long["valid"] + own.long["invalid"]
            assert own.draws is not None and sum(own.draws.drawing.values()) == 0
            assert server.stats.samples == used.sum() < N * len(used)


def test_max_cost_stops_between_rounds_and_a_higher_cap_resumes(
    study: StudyFiles, varied: SimServer
) -> None:
    # Prices that make the cap bite in a later round: the opening round (48 requests of 3
    # draws) fits, the whole study does not.
    study.write_config(
        varied.base_url, sampling=ADAPTIVE, prices={"sim-judge": [10_000.0, 20_000.0]}
    )
    opening = run_cli("run", str(study.config), "--quiet", "--dry-run")
    first = float(re.search(r"least: \d+ draws, \d+ requests, \$([\d.]+)", opening.stdout)[1])
    stopped = run_study(study, "--max-cost", f"{first * 1.3:.2f}")
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert "stopped: budget cap" in stopped.stderr
    assert varied.stats.received > study.n_records * 2  # past the opening round
    resumed = run_study(study, "--max-cost", "1000000")
    assert resumed.returncode == 0, resumed.stderr
    used = draws_used(study)
    assert varied.stats.samples == used.sum()  # no draw asked twice across the stop


def test_shards_ask_their_own_items_rounds_and_merge_into_one_run(
    study: StudyFiles, varied: SimServer
) -> None:
    study.write_config(varied.base_url, sampling=ADAPTIVE)
    caches = []
    for index in (1, 2):
        cache = study.root / f"shard{index}"
        result = run_study(study, "--shard", f"{index}/2", "--cache", str(cache))
        assert result.returncode == 0, result.stderr
        caches.append(cache)
    merged = study.root / "merged"
    assert run_cli("cache", "merge", str(merged), *map(str, caches)).returncode == 0
    sharded = draws_used(study, cache=str(merged))
    assert varied.stats.samples == sharded.sum()
    assert len(sharded) == study.n_records * 2
    # A budget is the whole study's: it refuses a shard, in one line.
    study.write_config(varied.base_url, sampling={**ADAPTIVE, "target_se": None, "draws": 400})
    refused = run_study(study, "--shard", "1/2")
    assert refused.returncode == 2
    assert "run it without --shard" in refused.stderr


def test_two_runs_on_one_cache_share_the_rounds_and_ask_each_draw_once(study: StudyFiles) -> None:
    # Two runs of the study on one cache folder (two terminals, or array jobs on a shared file
    # system) race on the same items in every round; the claim on each request in flight makes
    # one wait for the other's answer instead of asking again.
    with SimServer(SimSettings(certainty="varied", seed=7, latency_ms=20)) as server:
        study.write_config(server.base_url, sampling=ADAPTIVE, limits={"concurrency": 4})
        processes = [start_process("run", str(study.config), "--quiet") for _ in range(2)]
        for process in processes:
            stdout, stderr = process.communicate(timeout=120)
            assert process.returncode == 0, stdout + stderr
        used = draws_used(study)
        assert len(used) == study.n_records * 2
        assert server.stats.received > len(used)  # later rounds were asked
        assert max(server.stats.answered.values()) == 1  # no request answered twice
        pd.testing.assert_series_equal(
            answered(study, server), used.sort_index(), check_names=False
        )


def test_ctrl_c_in_a_later_round_keeps_every_answer_and_asks_no_more_rounds(
    study: StudyFiles,
) -> None:
    with SimServer(SimSettings(certainty="varied", seed=7, latency_ms=30)) as server:
        study.write_config(server.base_url, sampling=ADAPTIVE, limits={"concurrency": 2})
        process = start_process("run", str(study.config), "--quiet")
        past_the_opening_round(server, study.n_records * 2)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == 130, stderr
        assert "interrupted: answers received so far are saved" in stderr
        asked = server.stats.samples
        time.sleep(0.2)
        assert server.stats.samples == asked  # nothing sent after the stop
        result = run_study(study)
        assert result.returncode == 0, result.stderr
        # Every answer received before the stop was kept: none is asked twice.
        assert server.stats.samples == draws_used(study).sum()


def test_a_panels_status_and_dry_run_say_each_judges_draws(study: StudyFiles) -> None:
    from conftest import running_sims, sim_judges

    with running_sims(("a", "b"), lambda: SimSettings(certainty="varied", seed=7)) as sims:
        study.write_panel(sim_judges(sims), sampling=ADAPTIVE)
        assert run_study(study).returncode == 0
        status = run_cli("status", str(study.config))
        assert status.returncode == 0, status.stderr
        assert status.stdout.count("draws spent by need (target_se = 0.2") == 2
        dry = run_cli("run", str(study.config), "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.count(f"{study.n_records * 2} items settled, 0 still drawing") == 2
        assert "requests to send: 0;" in dry.stdout  # the panel's total: nothing left


def test_batch_submit_and_collect_step_through_the_rounds_by_hand(
    study: StudyFiles, varied: SimServer
) -> None:
    study.write_config(varied.base_url, sampling=ADAPTIVE)
    config = str(study.config)
    for _ in range(10):
        assert run_cli("batch", "submit", config).returncode == 0
        collected = run_cli("batch", "collect", config)
        if collected.returncode == 0:
            break
        # A round collected, another to ask: said, and not reported complete.
        assert collected.returncode == 1, collected.stderr
        assert "still drawing; `geval-async batch submit" in collected.stdout
    else:
        raise AssertionError("the rounds never settled")
    assert varied.stats.batches >= 2
    assert varied.stats.samples == draws_used(study).sum()


def test_items_that_fail_in_a_later_round_are_counted_once_as_failed(
    study: StudyFiles, varied: SimServer
) -> None:
    import threading

    from conftest import summary_row

    study.write_config(
        varied.base_url,
        sampling=ADAPTIVE,
        limits={"concurrency": 2, "retries": 1, "backoff": 0.01, "timeout": 5},
    )
    items = study.n_records * 2

    # Once the opening round is answered, every later request fails (5xx, retries spent).
    def break_later_rounds() -> None:
        deadline = time.monotonic() + 30
        while varied.stats.received < items and time.monotonic() < deadline:
            time.sleep(0.001)
        varied.settings.error_500 = 1.0

    breaker = threading.Thread(target=break_later_rounds)
    breaker.start()
    result = run_study(study)
    breaker.join()
    assert result.returncode == 1, result.stdout + result.stderr  # incomplete
    row = summary_row(result.stdout)
    status = run_cli("status", str(study.config))
    drawing = sum(
        int(line.split(", ")[1].split()[0])
        for line in status.stdout.splitlines()
        if "still drawing" in line and line.startswith("  ")
    )
    assert drawing > 0
    # Each item counted once: the ones still drawing as failed, the others as new.
    assert row["items"] == items
    assert row["failed"] == drawing
    assert row["new"] + row["cached"] + row["failed"] + row["refused"] + row["missing"] == items
    assert row["new"] == items - drawing


def test_engine_files_carry_one_round_at_a_time(study: StudyFiles, varied: SimServer) -> None:
    """``batch export`` writes the round the cache stands at, as a batch submit asks it;
    ``batch import`` of its answers says how many items still draw, and the next export asks
    only their next round, until every item has settled and export writes nothing."""
    from openai import OpenAI

    study.write_config(varied.base_url, sampling=ADAPTIVE)
    client = OpenAI(api_key="unused", base_url=varied.base_url)
    exported, output = study.root / "in.jsonl", study.root / "out.jsonl"
    bodies: list[list[bytes]] = []
    while True:
        result = run_cli("batch", "export", str(study.config), str(exported))
        assert result.returncode == 0, result.stderr
        lines = exported.read_bytes().splitlines()
        if not lines:
            break
        bodies.append(lines)
        assert len(bodies) <= N - FIRST + 1, "a round asks at least one draw of every item"
        # Another engine's run-batch, here the simulated judge's Batch API by hand.
        uploaded = client.files.create(file=exported, purpose="batch")
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        batch = client.batches.retrieve(batch.id)
        assert batch.status == "completed" and batch.output_file_id is not None
        output.write_bytes(client.files.content(batch.output_file_id).content)
        imported = run_cli("batch", "import", str(study.config), str(output))
        assert "lines name no request" not in imported.stdout
        drawing = re.search(r"draws spent by need: (\d+) items? still drawing", imported.stdout)
        assert imported.returncode == (1 if drawing else 0), imported.stdout + imported.stderr
    assert len(bodies[0]) == study.n_records * 2  # the opening round: every item, first_draws
    assert all(f'"n":{FIRST}'.encode() in line for line in bodies[0])
    assert len(bodies) >= 2 and all(len(b) < len(bodies[0]) for b in bodies[1:])
    used = draws_used(study)
    assert varied.stats.samples == used.sum()
    pd.testing.assert_series_equal(answered(study, varied), used.sort_index(), check_names=False)
