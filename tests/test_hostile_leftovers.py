"""The cache folder under the last hostile conditions: a disk that fills while answers are in
flight, a folder made read-only while a run writes to it, a Batch API that quotes the key back.

Each drives the real command against the simulated judge on 127.0.0.1 (in a process of its own
where a signal, a full disk or another user is involved) and looks where a user would: what is
printed, the exit code, every file of the cache folder, the simulated judge's request counts.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import StudyFiles, cache_snapshot, run_cli, summary_cells

from geval_async.judging.store.cache import CachedResponse
from geval_async.sim import SimServer

KEY = "sk-leftover-7d2e91c4a06b3f58"
KEY_ENV = {"LEFTOVER_JUDGE_KEY": KEY}


def _files_holding(folder: Path, needle: bytes) -> list[Path]:
    """The files under ``folder`` holding ``needle`` as they lie on disk, and the cache's
    entries holding it once their bodies are inflated (a stored body is deflated)."""
    found = [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]
    for key, value in cache_snapshot(folder).items():
        if needle.decode() in repr(CachedResponse.decode(value)):
            found.append(folder / key)
    return found


# --- the Batch API quoting the key ------------------------------------------------------------


@pytest.mark.parametrize("failing", ["lines", "batch"])
def test_a_key_the_batch_api_quotes_in_its_lines_never_reaches_the_cache_or_the_screen(
    sim: SimServer, study: StudyFiles, tmp_path: Path, failing: str
) -> None:
    # Every line the batch writes quotes the Authorization header: the answers' bodies, the
    # refused (400) and expired lines of the error file; or the batch fails validation with
    # the header in its errors.
    sim.settings.api_key = KEY
    sim.settings.batch_echo_key = True
    if failing == "lines":
        sim.settings.batch_failed_lines = 0.3
        sim.settings.batch_failure_status = 400
        sim.settings.batch_expired_lines = 0.2
    else:
        sim.settings.batch_invalid = "The model sim-judge does not support batches. (sim)"
    study.write_config(sim.base_url, judge={"api_key_env": "LEFTOVER_JUDGE_KEY"})

    result = run_cli("run", str(study.config), "--batch", "--quiet", "--poll", "0.05", env=KEY_ENV)
    assert result.returncode == 1, result.stdout + result.stderr
    assert sim.stats.batches == 1
    shown = result.stdout + result.stderr
    assert KEY not in shown
    assert "Traceback" not in shown
    _, answered, refused, missing = (int(cell) for cell in summary_cells(result.stdout))
    if failing == "lines":
        assert answered > 0 and refused > 0 and missing > 0, result.stdout
    else:
        assert "failed validation" in shown and "[API key removed]" in shown, shown
        assert answered == refused == 0
    assert _files_holding(study.cache, KEY.encode()) == []

    # What the cache holds is read back, shown and exported without the key.
    for command in (
        ["status", str(study.config)],
        ["batch", "status", str(study.config)],
        ["answers", str(study.config), "--record", "u000-A"],
        ["score", str(study.config)],
    ):
        shown = run_cli(*command, env=KEY_ENV)
        assert KEY not in shown.stdout + shown.stderr, command
    archive = tmp_path / "shared.jsonl.gz"
    exported = run_cli("cache", "export", str(study.config), str(archive), env=KEY_ENV)
    assert exported.returncode == 0, exported.stderr
    unpacked = gzip.decompress(archive.read_bytes())
    assert KEY.encode() not in unpacked
    if failing == "lines":
        assert b"[API key removed]" in unpacked  # the refusals and the answers, as received
    assert _files_holding(study.output, KEY.encode()) == []
