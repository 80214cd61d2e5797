"""No silent harm: each way a run could go quietly wrong, through the CLI as a user runs it.

Every test drives ``python -m geval_async`` in a subprocess against the simulated judge (or a
plain aiohttp.web app standing in for another provider) with its own cache and output folders.
"""

from __future__ import annotations

import csv
import os
import re
import socket
import stat
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, PlainJudge, StudyFiles, judge_study, run_cli, run_study, start_process

from geval_async.sim import SimServer


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- 3. a wrong base URL stops the run with one line ------------------------------------------


def test_refused_connection_stops_the_run_naming_the_url(study: StudyFiles) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    study.write_config(url, limits={"retries": 8, "backoff": 2.0})
    result = run_study(study)
    assert result.returncode == 1, result.stderr
    stops = [line for line in result.stderr.splitlines() if line.startswith("stopped:")]
    assert len(stops) == 1, result.stderr
    assert f"{url}/chat/completions" in stops[0]
    assert "connection refused" in stops[0] and "base_url" in stops[0]
    # Stopped after a few attempts, not after 8 retries of each of the 48 requests.
    sent = int(result.stdout.split("requests sent ")[1].split(",")[0])
    assert 1 <= sent <= 8, result.stdout


def test_unknown_host_stops_the_run_naming_the_url(study: StudyFiles) -> None:
    url = "http://no-such-judge.invalid/v1"
    study.write_config(url, limits={"retries": 8, "backoff": 2.0})
    result = run_study(study, env={"OPENAI_API_KEY": "sk-test"})
    assert result.returncode == 1, result.stderr
    assert f"stopped: cannot reach the judge at {url}/chat/completions (unknown host" in (
        result.stderr
    )


def test_a_quiet_run_says_it_is_retrying(sim: SimServer, study: StudyFiles) -> None:
    sim.settings.error_503 = 1.0
    study.write_config(sim.base_url, limits={"retries": 2, "backoff": 0.5})
    # Two items, each retried for 1.5 s or so: said at the first retry, not 5 s later.
    result = run_study(study, "--limit", "1")  # --quiet
    assert result.returncode == 1
    retrying = [line for line in result.stderr.splitlines() if line.startswith("retrying:")]
    assert retrying, result.stderr
    assert "(last: http 503)" in retrying[0]
    # Not a line a retry (4 of them): the next comes 5 s after the first at the earliest.
    assert "retries: http 503 4," in result.stdout
    assert len(retrying) < 4, result.stderr


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# --- 1. a mistyped --cache never replaces good results -----------------------------------------


def test_a_mistyped_cache_leaves_the_results_alone(judged: StudyFiles) -> None:
    assert run_cli("report", str(judged.config)).returncode == 0
    before = _files(judged.output)
    a_file = judged.root / "records.jsonl"
    for wrong in (judged.root / "cahce", a_file):
        result = run_cli("report", str(judged.config), "--cache", str(wrong))
        assert result.returncode == 2, result.stdout + result.stderr
        # Said at once, not read as an empty cache: a file, or no folder there.
        assert f"{wrong}: " in result.stderr, result.stderr
        assert "not a cache folder" in result.stderr or "no cache folder there" in result.stderr
        assert _files(judged.output) == before


def test_far_fewer_answers_do_not_replace_the_results(sim: SimServer, study: StudyFiles) -> None:
    judge_study(study, sim.base_url)
    assert run_cli("score", str(study.config)).returncode == 0
    before = _files(study.output)
    # Another cache holding the answers of one criterion only (--criteria at run time).
    other = study.root / "other"
    assert (
        run_study(study, "--cache", str(other), "--criteria", "fit", "--limit", "4").returncode == 0
    )
    result = run_cli("score", str(study.config), "--cache", str(other))
    assert result.returncode == 2
    assert f"the cache {other} holds answers for 4 items" in result.stderr
    assert _files(study.output) == before


# --- 7. outputs never overwrite each other --------------------------------------------------


def test_other_tests_subsets_and_limits_get_their_own_files(judged: StudyFiles) -> None:
    config = str(judged.config)
    assert run_cli("report", config).returncode == 0
    main_files = _files(judged.output)
    assert run_cli("ttest", config, "--test", "wilcoxon").returncode == 0
    assert run_cli("report", config, "--criteria", "clar").returncode == 0
    assert run_cli("score", config, "--limit", "4").returncode == 0
    after = _files(judged.output)
    assert {k: after[k] for k in main_files} == main_files, "the study's outputs are unchanged"
    stats = judged.output / "stats"
    assert "wilcoxon" in (stats / "t_ttest-wilcoxon.csv").read_text()
    assert (judged.output / "t-criteria-clar_report.md").is_file()
    assert (judged.output / "scores" / "t-limit-4_long.csv").read_text().count("\n") == 1 + 4 * 2


def test_rescoring_with_fewer_draws_gets_its_own_files(judged: StudyFiles) -> None:
    # Scoring the first 2 of each item's 3 draws (the cheap re-scoring the cache is for)
    # overwrote the study's own report and tables with the 2-draw ones.
    config = str(judged.config)
    assert run_cli("report", config).returncode == 0
    main_files = _files(judged.output)
    assert run_cli("report", config, "--n", "2").returncode == 0
    after = _files(judged.output)
    assert {k: after[k] for k in main_files} == main_files, "the study's outputs are unchanged"
    fewer = (judged.output / "scores" / "t-n-2_long.csv").read_text()
    assert fewer != main_files[str(Path("scores") / "t_long.csv")].decode()
    assert (judged.output / "t-n-2_report.md").is_file()


def test_a_composite_on_a_subset_names_the_missing_criteria(judged: StudyFiles) -> None:
    result = run_cli("average", str(judged.config), "--criteria", "clar")
    assert result.returncode == 2
    assert "--criteria leaves out fit" in result.stderr
    assert "no criterion named" not in result.stderr


# --- 8. smaller things users see at once ----------------------------------------------------


def test_a_closed_pipe_ends_cleanly_with_the_report_written(judged: StudyFiles) -> None:
    process = start_process("report", str(judged.config))
    assert process.stdout is not None
    process.stdout.close()  # `| head` that has read enough
    _, stderr = process.communicate(timeout=120)
    assert "BrokenPipe" not in stderr and "Traceback" not in stderr
    assert process.returncode == 0
    assert (judged.output / "t_report.md").is_file()


def test_outputs_are_readable_by_colleagues_and_rounded(judged: StudyFiles) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "geval_async", "report", str(judged.config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        preexec_fn=lambda: os.umask(0o022),
    )
    assert result.returncode == 0, result.stderr
    for path in judged.output.rglob("*.*"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    digits = re.compile(r"\.\d{4,}")
    for name in ("t_clar.csv", "t_fit.csv", "t_average.csv"):
        assert not digits.search((judged.output / "scores" / name).read_text()), name
    assert digits.search((judged.output / "scores" / "t_long.csv").read_text()), "raw values"


def test_paired_design_gets_the_paired_test_in_the_summary(judged: StudyFiles) -> None:
    # Every user in both conditions; [stats] test is Welch by default.
    result = run_cli("ttest", str(judged.config))
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("composite")]
    assert rows and "paired-t" in rows[0], result.stdout
    report = run_cli("report", str(judged.config))
    assert report.returncode == 0
    text = (judged.output / "t_report.md").read_text()
    assert "## paired-t test" in text and "## welch test" in text
    assert "`stats/t_paired.csv`" in text and (judged.output / "stats" / "t_paired.csv").exists()
    # A subset's report names the subset's own paired file.
    subset = run_cli("report", str(judged.config), "--limit", "4")
    assert subset.returncode == 0, subset.stderr
    text = (judged.output / "t-limit-4_report.md").read_text()
    assert "`stats/t-limit-4_paired.csv`" in text, text
    assert (judged.output / "stats" / "t-limit-4_paired.csv").exists()


def _summary_tests(study: StudyFiles) -> set[str]:
    """The ``test`` column of the summary file a report wrote."""
    with (study.output / "stats" / "t_ttest.csv").open() as handle:
        return {row["test"] for row in csv.DictReader(handle)}


def test_a_paired_design_with_no_test_named_gets_the_paired_test_beside_welch(
    sim: SimServer, study: StudyFiles
) -> None:
    judge_study(study, sim.base_url)  # every user in both conditions; no [stats] test
    assert "test" not in study.config.read_text()
    report = run_cli("report", str(study.config))
    assert report.returncode == 0, report.stderr
    assert _summary_tests(study) == {"paired-t"}
    assert (study.output / "stats" / "t_ttest-welch.csv").exists()
    text = (study.output / "t_report.md").read_text()
    assert "The welch test, for independent groups. `[stats] test` names no test" in text
    assert "because `[stats] test` names it" not in text


def test_a_named_welch_test_is_honoured_in_a_paired_design(judged: StudyFiles) -> None:
    """A user who wrote ``test = "welch"`` (a pairing that is not real) gets Welch's test in
    the summary, with the paired tests still beside it; nothing switches it silently."""
    judged.write_config(judged.judge_url, stats={"test": "welch"})
    result = run_cli("ttest", str(judged.config))
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("composite")]
    assert rows and "welch" in rows[0] and "paired-t" not in rows[0], result.stdout
    assert "(welch: as [stats] test names it)" in result.stdout
    for stale in (judged.output / "stats").glob("*"):
        stale.unlink()
    report = run_cli("report", str(judged.config))
    assert report.returncode == 0, report.stderr
    assert _summary_tests(judged) == {"welch"}
    assert not (judged.output / "stats" / "t_ttest-welch.csv").exists()
    assert (judged.output / "stats" / "t_paired.csv").exists()
    text = (judged.output / "t_report.md").read_text()
    assert "## welch test" in text and "## paired-t test" not in text
    assert "The summary uses Welch's test because `[stats] test` names it." in text


def test_an_unknown_test_in_the_config_is_one_line_and_exit_2(judged: StudyFiles) -> None:
    judged.write_config(judged.judge_url, stats={"test": "student"})
    report = run_cli("report", str(judged.config))
    assert report.returncode == 2
    assert report.stderr.strip().splitlines() == [
        f"error: {judged.config}: [stats] 'test' must be one of welch, paired-t, wilcoxon, "
        "not 'student'"
    ]


def test_the_wrong_key_stop_counts_the_requests_sent(sim: SimServer, study: StudyFiles) -> None:
    sim.settings.api_key = "sk-right"
    study.write_config(sim.base_url)
    result = run_study(study, env={"OPENAI_API_KEY": "sk-wrong"})
    assert result.returncode == 1
    assert "refused the API key" in result.stderr
    sent = int(result.stdout.split("requests sent ")[1].split(",")[0])
    assert sent == sim.stats.received > 0


def test_progress_lines_fit_an_80_column_terminal(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    result = run_cli("run", str(study.config))  # not --quiet: the final progress line prints
    assert result.returncode == 0, result.stderr
    progress = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert progress and all(len(line) < 80 for line in progress), progress


def test_dry_run_gives_the_expected_duration(study: StudyFiles) -> None:
    study.write_config("http://127.0.0.1:9/v1", limits={"rpm": 12})
    result = run_cli("run", str(study.config), "--dry-run")
    assert result.returncode == 0, result.stderr
    # 48 requests at 12 per minute.
    assert "expected duration: at least 4m00s under the limits (48 requests at rpm 12)" in (
        result.stdout
    )


# --- 2. a template that never inserts a listed field is found at load time -----------------


def test_a_listed_field_the_template_never_inserts_stops_before_sending(
    sim: SimServer, study: StudyFiles
) -> None:
    fit = study.root / "prompts" / "fit.txt"
    fit.write_text(fit.read_text().replace("Reader: {{reader}}", "Reader: see above"))
    study.write_config(sim.base_url)
    result = run_study(study)
    assert result.returncode == 2
    assert f"{fit}: criterion 'fit' lists the record field 'reader'" in result.stderr
    assert "{{reader}}" in result.stderr
    assert sim.stats.received == 0 and not study.cache.exists()


# --- 5. [stats] mistakes are found before the money is spent --------------------------------


def test_a_stats_condition_in_no_record_stops_before_sending(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url, stats={"conditions": ["A", "C"]})
    result = run_study(study)
    assert result.returncode == 2
    assert "[stats] condition 'C' occurs in no record" in result.stderr
    assert sim.stats.received == 0


def test_a_paired_test_with_unpaired_groups_stops_before_sending(
    sim: SimServer, study: StudyFiles
) -> None:
    lines = study.records.read_text().splitlines(keepends=True)
    study.records.write_text("".join(line for line in lines if '"u003-B"' not in line))
    study.write_config(sim.base_url, stats={"test": "paired-t"})
    result = run_study(study)
    assert result.returncode == 2
    assert "1 groups appear under 'A' only (e.g. 'u003'" in result.stderr
    assert sim.stats.received == 0


# --- 4. simulated answers never satisfy a run against another server ------------------------


def test_simulated_answers_never_satisfy_another_server(sim: SimServer, study: StudyFiles) -> None:
    judge_study(study, sim.base_url)  # the simulated judge, with the model name of the real study
    assert sim.stats.received == 48
    with PlainJudge() as real:
        study.write_config(real.base_url)
        result = run_study(study)
        assert result.returncode == 0, result.stderr
        assert real.received == 48, "every synthetic answer is asked for again"
        assert "SIMULATED" not in result.stdout
    scored = run_cli("score", str(study.config))
    assert scored.returncode == 0, scored.stderr
    assert "SIMULATED" not in scored.stdout
    # And the reverse: the real answers do not satisfy the simulated judge.
    sim.stats.reset()
    study.write_config(sim.base_url)
    assert run_study(study, "--limit", "2").returncode == 0
    assert sim.stats.received == 4
    mixed = run_cli("score", str(study.config))
    assert mixed.returncode == 2
    assert "simulated judge and of another server" in mixed.stderr


# --- 6. --max-cost caps the study, not each command -----------------------------------------


def test_max_cost_caps_the_study_across_resumes(sim: SimServer, study: StudyFiles) -> None:
    # Priced so that one request is estimated at about a dollar.
    study.write_config(sim.base_url, prices={"sim-judge": [10_000.0, 20_000.0]})
    first = run_study(study, "--max-cost", "10")
    assert first.returncode == 1, first.stderr
    sent = sim.stats.received
    assert 0 < sent < 48
    assert "study budget --max-cost $10.00:" in first.stderr and " left" in first.stderr
    again = run_study(study, "--max-cost", "10")  # the resume command as printed
    assert again.returncode == 1
    assert sim.stats.received == sent, "the resume spends no second $10"
    assert "budget cap $10.00 reached" in again.stderr
    left = re.search(r"estimated so far, \$(\d+\.\d+) left", again.stderr)
    assert left and float(left.group(1)) < 1.5, again.stderr
    more = run_study(study, "--max-cost", "20")
    assert more.returncode == 1
    assert sent < sim.stats.received <= 2 * sent + 1


def test_yes_no_rubrics_read_answer_yes(sim: SimServer, tmp_path: Path) -> None:
    config = str(ROOT / "examples" / "chatbot" / "config.toml")
    where = ("--cache", str(tmp_path / "cache"), "--output", str(tmp_path / "out"))
    judged = run_cli(
        "run", config, *where, "--base-url", sim.base_url, "--rpm", "1e6", "--tpm", "1e9"
    )
    assert judged.returncode == 0, judged.stderr
    scored = run_cli("score", config, *where)
    assert scored.returncode == 0, scored.stderr
    # The simulated judge answers rubrics "Yes", " yes", "Yes.", "Answer: Yes", "Yes, it does.".
    assert "invalid samples" not in scored.stdout, scored.stdout


def test_retry_failed_with_batch_is_refused_not_ignored(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    result = run_study(study, "--batch", "--retry-failed")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--retry-failed does not re-ask refused requests through the Batch API" in (
        result.stderr
    )
    assert sim.stats.received == 0 and sim.stats.batches == 0, "nothing was asked"
