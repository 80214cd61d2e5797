"""Inputs that are not what they claim: a prompt or records path naming a device or a FIFO, a
records file of one endless line, a config nested hundreds deep, a cache folder the user may
not search.

Each is a real file, device, FIFO or folder, and the real command runs in a process of its own
(a FIFO's open would block this one): it must end at once with exit 2 and one line that names
the path and what it is, never a traceback, a hang or a memory error.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    CRITERIA,
    ROOT,
    StudyFiles,
    as_other_user,
    run_cli,
    run_process,
    study_every_user_may_read,
)

from geval_async.sim import SimServer

# A bound on a command that should end at once; a FIFO's open would hang it forever.
_BOUND = 60


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The command's one line of error (it must be one, and exit 2)."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def _with_prompt(study: StudyFiles, sim: SimServer, prompt: str) -> None:
    criteria = [{**CRITERIA[0], "prompt": prompt}, CRITERIA[1]]
    study.write_config(sim.base_url, criteria=criteria)


@pytest.mark.parametrize("command", ["status", "run"])
def test_a_prompt_path_that_is_a_device_says_so(
    sim: SimServer, study: StudyFiles, command: str
) -> None:
    _with_prompt(study, sim, "/dev/zero")
    line = _one_line_error(run_process(command, str(study.config), timeout=_BOUND))
    assert "prompt file /dev/zero is a character device, not a file" in line
    assert "not found" not in line
    assert sim.stats.received == 0


def test_a_prompt_path_that_is_a_fifo_says_so_and_never_blocks(
    sim: SimServer, study: StudyFiles
) -> None:
    fifo = study.root / "prompts" / "pipe.txt"
    os.mkfifo(fifo)
    _with_prompt(study, sim, "prompts/pipe.txt")
    line = _one_line_error(run_process("status", str(study.config), timeout=_BOUND))
    assert f"prompt file {fifo} is a FIFO (named pipe), not a file" in line


@pytest.mark.parametrize("records", ["/dev/zero", "fifo"])
def test_a_records_path_that_is_no_file_is_refused_before_it_is_read(
    sim: SimServer, study: StudyFiles, records: str
) -> None:
    path = Path(records)
    if records == "fifo":
        path = study.root / "records.fifo"
        os.mkfifo(path)
    study.write_config(sim.base_url, data={"path": str(path)})
    line = _one_line_error(run_process("status", str(study.config), timeout=_BOUND))
    kind = "a character device" if records == "/dev/zero" else "a FIFO (named pipe)"
    assert line == f"error: {path}: records file is {kind}, not a file (check [data] path)"


def test_a_records_file_of_one_endless_line_is_refused_at_its_first_64_mb(
    sim: SimServer, study: StudyFiles
) -> None:
    # Sparse: 65 MB of zero bytes that take no room on the disk, and no line break.
    with study.records.open("wb") as handle:
        handle.truncate(65 << 20)
    study.write_config(sim.base_url)
    line = _one_line_error(run_process("status", str(study.config), timeout=_BOUND))
    assert line == (
        f"error: {study.records}: line 1 is longer than 64 MB: not a records file (JSON "
        "lines, or a JSON array); check [data] path"
    )


def test_a_config_nested_500_deep_is_one_line(study: StudyFiles) -> None:
    study.config.write_text("x = " + "[" * 500 + "]" * 500 + "\n", encoding="utf-8")
    line = _one_line_error(run_process("status", str(study.config), timeout=_BOUND))
    assert line == (
        f"error: {study.config}: not a study config (tables or arrays nested too deep to read)"
    )


# --- a cache folder the user may not search ----------------------------------------------------


@pytest.fixture
def open_study() -> Iterator[StudyFiles]:
    with study_every_user_may_read(4, "locked/cache", "") as study:
        yield study


@pytest.mark.parametrize("command", ["status", "run"])
def test_a_cache_folder_behind_a_folder_the_user_may_not_search_is_one_line(
    sim: SimServer, open_study: StudyFiles, command: str
) -> None:
    study = open_study
    study.cache.mkdir(parents=True)
    study.write_config(sim.base_url)
    study.config.chmod(0o644)
    study.cache.parent.chmod(0o700)  # the owner's alone: no one else may search it
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    result = subprocess.run(
        [*as_other_user(), sys.executable, "-m", "geval_async", command, str(study.config)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=_BOUND,
    )
    line = _one_line_error(result)
    assert str(study.cache) in line
    assert "permission denied" in line.lower()
    assert sim.stats.received == 0


# --- record text a spreadsheet would run -------------------------------------------------------

# Record ids and groups as a shared records file may hold them: formulas, and groups that are
# plain numbers (which stay numbers).
_HOSTILE_RECORDS = [
    ('=HYPERLINK("http://x","y")', "=cmd|' /C calc'!A0"),
    ("@SUM(1+1)", "@g"),
    ("+1+2", "-3"),
    ("-2+3", "-3"),
    ("\t=1", "plain"),
    ("ordinary", "plain"),
]


def _read_csv(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def _runs_as_formula(cell: str) -> bool:
    """Whether a spreadsheet would take ``cell`` for a formula."""
    if cell.lstrip("\t\r")[:1] not in ("=", "+", "-", "@") and cell[:1] not in ("\t", "\r"):
        return False
    try:
        float(cell)
    except ValueError:
        return True
    return False


def test_record_text_that_a_spreadsheet_would_run_is_written_as_text(
    sim: SimServer, study: StudyFiles
) -> None:
    rows = [
        {"id": f"{record_id}", "user": group, "condition": condition, "reader": "r", "text": "t"}
        for record_id, group in _HOSTILE_RECORDS
        for condition in ("A", "B")
    ]
    for row in rows:
        row["id"] += f"-{row['condition']}"
    study.records.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    study.write_config(sim.base_url)
    assert run_cli("run", str(study.config), "--quiet").returncode == 0
    scored = run_cli("score", str(study.config))
    assert scored.returncode == 0, scored.stderr
    files = sorted((study.output / "scores").glob("*.csv"))
    assert files
    for path in files:
        cells = [cell for row in _read_csv(path) for cell in row]
        assert not [c for c in cells if _runs_as_formula(c)], path.name
    long = _read_csv(study.output / "scores" / "t_long.csv")
    header = long[0]
    ids = {row[header.index("record_id")] for row in long[1:]}
    groups = {row[header.index("group")] for row in long[1:]}
    assert '\'=HYPERLINK("http://x","y")-A' in ids
    assert "'@SUM(1+1)-B" in ids
    assert "'\t=1-A" in ids
    assert "ordinary-A" in ids
    assert "-3" in groups  # a number stays a number
    assert "'=cmd|' /C calc'!A0" in groups
    scores = [float(row[header.index("score")]) for row in long[1:]]
    assert all(1 <= s <= 5 or s != s for s in scores)  # numbers, unquoted


def test_condition_names_a_spreadsheet_would_run_are_written_as_text_in_the_pairwise_table(
    sim: SimServer, tmp_path: Path
) -> None:
    first, second = '=HYPERLINK("http://x","y")', "@SUM(1+1)"
    records = (ROOT / "examples" / "ueq" / "records.jsonl").read_text(encoding="utf-8")
    records = records.replace('"UEQ-mLLM"', json.dumps(first)).replace(
        '"UEQ-sLLM"', json.dumps(second)
    )
    (tmp_path / "records.jsonl").write_text(records, encoding="utf-8")
    config = (ROOT / "examples" / "ueq" / "pairwise.toml").read_text(encoding="utf-8")
    config = config.replace('"../../prompts/', f'"{ROOT}/prompts/')
    config = config.replace('["UEQ-mLLM", "UEQ-sLLM"]', f"['{first}', '{second}']")
    (tmp_path / "pairwise.toml").write_text(config, encoding="utf-8")
    flags = ["--base-url", sim.base_url, "--cache", str(tmp_path / "cache")]
    flags += ["--output", str(tmp_path / "out"), "--rpm", "100000000", "--tpm", "100000000"]
    judged = run_cli("run", str(tmp_path / "pairwise.toml"), *flags, "--quiet")
    assert judged.returncode == 0, judged.stdout + judged.stderr
    scored = run_cli("score", str(tmp_path / "pairwise.toml"), *flags[:-4])
    assert scored.returncode == 0, scored.stdout + scored.stderr
    table = _read_csv(tmp_path / "out" / "stats" / "ueq-pairwise_pairwise.csv")
    cells = [cell for row in table for cell in row]
    assert not [c for c in cells if _runs_as_formula(c)], table
    assert f"'{first}" in cells and f"'{second}" in cells, table
