"""Bad input fails before the first request: exit 2, one line naming the problem, nothing sent
or written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import StudyFiles, run_cli

from geval_async.sim import SimServer


def _expect_refusal(sim: SimServer, study: StudyFiles, *needles: str) -> str:
    result = run_cli("run", str(study.config), "--quiet")
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got: {result.stderr!r}"
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert sim.stats.received == 0, "nothing may be requested"
    assert not study.cache.exists(), "nothing may be written to the cache"
    assert "Traceback" not in result.stderr
    return lines[0]


def _rewrite_record(study: StudyFiles, index: int, **changes: object) -> None:
    rows = [json.loads(line) for line in study.records.read_text().splitlines()]
    for key, value in changes.items():
        if value is None:
            rows[index].pop(key, None)
        else:
            rows[index][key] = value
    study.records.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_duplicate_id(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    _rewrite_record(study, 5, id="u000-A")
    _expect_refusal(sim, study, "records.jsonl", "line 6", "u000-A", "duplicate")


def test_missing_id(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    _rewrite_record(study, 3, id=None)
    _expect_refusal(sim, study, "records.jsonl", "line 4", "'id'")


def test_missing_field_a_criterion_needs(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    _rewrite_record(study, 7, reader=None)
    _expect_refusal(sim, study, "records.jsonl", "u003-B", "'reader'", "missing")


def test_wrong_field_type(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    _rewrite_record(study, 2, text=["not", "text"])
    _expect_refusal(sim, study, "records.jsonl", "u001-A", "'text'", "list")


def test_record_file_not_json(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    with study.records.open("a") as handle:
        handle.write("{broken\n")
    _expect_refusal(sim, study, "records.jsonl", f"line {study.n_records + 1}", "JSON")


def test_missing_records_file(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    study.records.unlink()
    _expect_refusal(sim, study, "records.jsonl", "not found")


def test_placeholder_without_field(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    prompt = study.root / "prompts" / "clar.txt"
    prompt.write_text(prompt.read_text().replace("{{text}}", "{{text}} for {{audience}}"))
    _expect_refusal(sim, study, "clar.txt", "{{audience}}", "'clar'")


def test_missing_prompt_file(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    (study.root / "prompts" / "fit.txt").unlink()
    _expect_refusal(sim, study, "fit.txt", "not found")


@pytest.mark.parametrize(
    "content, needle",
    [
        ("[data\npath = 1", "not valid TOML"),
        ('[data]\npath = "records.jsonl"\n[limits]\nrmp = 5\n', "unknown key 'rmp'"),
        ('[data]\npath = "records.jsonl"\n[judge]\nmodel = "m"\n', "no criteria"),
    ],
)
def test_bad_config(sim: SimServer, study: StudyFiles, content: str, needle: str) -> None:
    study.config.write_text(content)
    _expect_refusal(sim, study, "config.toml", needle)


def test_a_key_written_where_its_variable_is_named_is_refused_unshown(
    sim: SimServer, study: StudyFiles
) -> None:
    key = "sk-proj-pasted-0123456789"
    study.write_config(sim.base_url, judge={"api_key_env": key})
    line = _expect_refusal(
        sim, study, "config.toml", "[judge] 'api_key_env' must name the environment variable"
    )
    assert key not in line


@pytest.mark.parametrize("listed", [[[]], [1], [{"name": "clar"}]])
def test_composite_criteria_that_are_not_names(
    sim: SimServer, study: StudyFiles, listed: list[object]
) -> None:
    study.write_config(sim.base_url, composite={"criteria": listed})
    _expect_refusal(sim, study, "config.toml", "[composite]", "list the criteria's names")


def test_unreadable_config(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    study.config.write_bytes(b"\xff\xfe not utf-8")
    _expect_refusal(sim, study, "config.toml")


def test_missing_config(sim: SimServer, study: StudyFiles, tmp_path: Path) -> None:
    result = run_cli("run", str(tmp_path / "nope.toml"))
    assert result.returncode == 2
    assert "nope.toml" in result.stderr and "not found" in result.stderr


def test_bad_override(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    result = run_cli("run", str(study.config), "--criteria", "clar,nope")
    assert result.returncode == 2 and "nope" in result.stderr
    assert sim.stats.received == 0


def test_unwritable_cache_folder(sim: SimServer, study: StudyFiles) -> None:
    blocker = study.root / "blocked"
    blocker.write_text("a file where the cache folder should be")
    study.write_config(sim.base_url, cache={"path": "blocked/cache"})
    result = run_cli("run", str(study.config), "--quiet")
    assert result.returncode == 2, result.stderr
    assert "blocked" in result.stderr and "cache" in result.stderr
    assert sim.stats.received == 0


def test_relative_paths_resolve_against_the_config_folder(
    sim: SimServer, study: StudyFiles, tmp_path: Path
) -> None:
    study.write_config(sim.base_url)
    # run_cli runs from the repository root, not from the config's folder
    result = run_cli("run", str(study.config), "--quiet", "--limit", "1")
    assert result.returncode == 0, result.stderr
    assert (study.root / "cache" / "cache.db").exists()
