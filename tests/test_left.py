"""What is left to send, decided once: ``run --dry-run`` counts what the run then sends.

A real simulated judge and a plain OpenAI-compatible stub on loopback, a real cache folder, the
command line in a subprocess. The cache key leaves the server out, so the simulated judge's
answers sit under the keys a real server's run asks for: the dry run reads the cache as the
run will (the origin rule), and never counts a refused item as cached.
"""

from __future__ import annotations

import re

from conftest import PlainJudge, StudyFiles, run_cli, run_study

from geval_async.sim import SimServer


def _dry(study: StudyFiles, *extra: str) -> dict[str, int]:
    """``run --dry-run``'s counts: cached, refused, in batch and requests to send."""
    result = run_cli("run", str(study.config), "--dry-run", *extra)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "requests to send" in line)
    counts = {"cached": 0, "refused": 0, "in batch": 0}
    for name, pattern in (
        ("cached", r"already cached: (\d+)"),
        ("refused", r"refused \(not asked again\): (\d+)"),
        ("in batch", r"in live batch jobs: (\d+)"),
        ("to send", r"requests to send: (\d+)"),
    ):
        found = re.search(pattern, line)
        if found:
            counts[name] = int(found.group(1))
    return counts


def test_dry_run_against_a_real_endpoint_counts_the_simulated_answers_as_to_send(
    sim: SimServer, study: StudyFiles
) -> None:
    items = 2 * study.n_records
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    assert sim.stats.received == items
    assert _dry(study)["cached"] == items, "against the simulated judge, its answers count"
    with PlainJudge() as real:
        # Another server, the same model: the same keys, the simulated judge's answers under them.
        study.write_config(real.base_url)
        dry = _dry(study)
        assert dry == {"cached": 0, "refused": 0, "in batch": 0, "to send": items}
        assert real.received == 0, "the dry run sends nothing"
        assert run_study(study).returncode == 0
        assert real.received == dry["to send"], "the run sends what the dry run counted"
        assert _dry(study) == {"cached": items, "refused": 0, "in batch": 0, "to send": 0}


def test_dry_run_counts_refused_items_apart_and_to_send_is_what_the_run_sends(
    sim: SimServer, study: StudyFiles
) -> None:
    rows = study.records.read_text().splitlines()
    rows[0] = rows[0].replace("Text 0A", "Text 0A [[FILTER]]")  # both criteria refused
    study.records.write_text("\n".join(rows) + "\n")
    study.write_config(sim.base_url)
    items = 2 * study.n_records
    assert run_study(study, "--limit", "5").returncode == 1  # 10 items, 2 refused
    before = sim.stats.received
    dry = _dry(study)
    assert dry == {"cached": 8, "refused": 2, "in batch": 0, "to send": items - 10}
    assert run_study(study).returncode == 1
    assert sim.stats.received - before == dry["to send"]
    # --retry-failed asks the refused ones again: the dry run counts them so.
    retry = _dry(study, "--retry-failed")
    assert retry == {"cached": items - 2, "refused": 0, "in batch": 0, "to send": 2}
    before = sim.stats.received
    assert run_study(study, "--retry-failed").returncode == 1
    assert sim.stats.received - before == retry["to send"]


def test_dry_run_counts_the_chunk_an_item_still_lacks(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    assert run_study(study, "--n", "2", "--limit", "3").returncode == 0
    before = sim.stats.received
    # n = 3 now: the 6 items judged with n = 2 lack their third sample (one request each).
    dry = _dry(study, "--limit", "3")
    assert dry == {"cached": 0, "refused": 0, "in batch": 0, "to send": 6}
    assert run_study(study, "--limit", "3").returncode == 0
    assert sim.stats.received - before == 6
    assert _dry(study, "--limit", "3")["cached"] == 6


# --- status: one walk of the answers, numbers only --------------------------------------------


def test_status_counts_the_invalid_shares_that_scoring_finds(study: StudyFiles) -> None:
    from pandas.testing import assert_frame_equal

    from geval_async.scoring.scores.results import load_results
    from geval_async.scoring.scores.status import study_status
    from geval_async.sim import SimSettings
    from geval_async.study.config import load_config
    from geval_async.study.prepare import prepare_study

    rows = study.records.read_text().splitlines()
    rows[0] = rows[0].replace("Text 0A", "Text 0A [[FILTER]]")  # both criteria refused
    study.records.write_text("\n".join(rows) + "\n")
    with SimServer(SimSettings(invalid_answers=0.3, seed=3)) as server:
        study.write_config(server.base_url, sampling={"n": 4})
        assert run_study(study, "--limit", "20").returncode == 1  # the refused record
    status = study_status(prepare_study(load_config(study.config)))
    results = load_results(study.config)
    shares = results.invalid_shares()
    assert shares["invalid"].sum() > 0 and (shares["invalid"] < shares["samples"]).all()
    assert_frame_equal(status.invalid_shares(), shares)
    assert status.share_differences() == results.share_differences()
    items = study.n_records
    assert {name: (c.answered, c.refused, c.missing) for name, c in status.coverage.items()} == {
        "clar": (19, 1, items - 20),
        "fit": (19, 1, items - 20),
    }
    # The command prints those numbers: the same invalid-samples table as `score`.
    shown = run_cli("status", str(study.config))
    scored = run_cli("score", str(study.config))
    assert shown.returncode == 0, shown.stderr
    table = scored.stdout[scored.stdout.index("invalid samples") :].split("\n\n")[0]
    assert (
        table.splitlines()[:4]
        == shown.stdout[shown.stdout.index("invalid samples") :].splitlines()[:4]
    )


def test_status_says_when_simulated_and_real_answers_mix(sim: SimServer, study: StudyFiles) -> None:
    with PlainJudge() as real:
        study.write_config(real.base_url)
        assert run_study(study, "--limit", "4").returncode == 0
    study.write_config(sim.base_url)  # asks the first 2 records again: the rest stay real
    assert run_study(study, "--limit", "2").returncode == 0
    assert run_cli("score", str(study.config)).returncode == 2, "score refuses the mix"
    status = run_cli("status", str(study.config))
    assert status.returncode == 0, status.stderr
    assert "simulated judge and from another server" in status.stdout
    assert "answered" in status.stdout


def test_the_report_compares_with_human_scores_from_the_scores_in_hand(
    sim: SimServer, study: StudyFiles
) -> None:
    import json
    import shutil

    from geval_async.api import human_comparison
    from geval_async.scoring.scores.results import load_results

    rows = [json.loads(line) for line in study.records.read_text().splitlines()]
    for i, row in enumerate(rows):
        row["human"] = {"clar": 1 + i % 5}
    study.records.write_text("".join(json.dumps(row) + "\n" for row in rows))
    study.write_config(sim.base_url)
    config = study.config
    config.write_text(config.read_text() + '[meta]\nhuman = { clar = "human.clar" }\n')
    assert run_study(study).returncode == 0
    results = load_results(config)
    expected = human_comparison(results)
    assert expected is not None and expected.correlations
    # `report --html` hands the comparison the results it scored: it reads no cache again.
    shutil.move(study.cache, study.root / "elsewhere")
    again = human_comparison(results)
    assert again is not None and again.correlations == expected.correlations
