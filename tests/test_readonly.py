"""A shared read-only cache: status, scoring and export work on a folder the user can only read.

The cache folder and its files are made read-only (chmod a-w) and the commands run as a user
who cannot write them: this user when it is not root; otherwise ``nobody`` through ``setpriv``,
since root writes through any mode. Every file of the folder must be byte for byte and
timestamp for timestamp what it was, and the scores those of the writable original.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    ROOT,
    StudyFiles,
    as_other_user,
    run_cli,
    run_study,
    study_every_user_may_read,
    summary_cells,
)

from geval_async.sim import SimServer


@pytest.fixture
def shared_study() -> Iterator[StudyFiles]:
    with study_every_user_may_read(12, "cache", "out") as study:
        yield study


def _freeze(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Make a folder read-only for everyone; returns every file's bytes, mtime and mode."""
    for path in sorted(folder.rglob("*"), reverse=True):
        path.chmod(0o555 if path.is_dir() else 0o444)
    folder.chmod(0o555)
    return _files(folder)


def _files(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    return {
        str(p.relative_to(folder)): (
            p.read_bytes(),
            p.stat().st_mtime_ns,
            stat.S_IMODE(p.stat().st_mode),
        )
        for p in folder.rglob("*")
        if p.is_file()
    }


def _cli(prefix: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "geval_async", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def test_status_score_and_export_read_a_cache_the_user_cannot_write(
    sim: SimServer, shared_study: StudyFiles
) -> None:
    study = shared_study
    study.write_config(sim.base_url)
    study.config.chmod(0o644)
    assert run_study(study).returncode == 0
    original = run_cli("score", str(study.config), "--output", str(study.root / "mine"))
    assert original.returncode == 0, original.stderr
    expected = (study.root / "mine" / "scores" / "t_long.csv").read_text()

    before = _freeze(study.cache)
    reader = as_other_user()
    writable = Path(tempfile.mkdtemp(prefix="geval-ro-out-", dir=study.root))
    writable.chmod(0o777)
    # Proof the reader cannot write there (so this test can fail): diskcache's open does.
    probe = _cli(reader, "run", str(study.config), "--quiet")
    assert probe.returncode == 2 and "writable" in probe.stderr, probe.stderr

    status = _cli(reader, "status", str(study.config))
    assert status.returncode == 0, status.stderr
    items = str(2 * study.n_records)
    assert summary_cells(status.stdout) == [items, items, "0", "0"]

    score = _cli(reader, "score", str(study.config), "--output", str(writable / "out"))
    assert score.returncode == 0, score.stderr
    assert (writable / "out" / "scores" / "t_long.csv").read_text() == expected

    export = _cli(reader, "cache", "export", str(study.config), str(writable / "a.jsonl.gz"))
    assert export.returncode == 0, export.stderr
    assert _cli(reader, "cache", "verify", str(study.cache)).returncode == 0
    assert _cli(reader, "cache", "stats", str(study.cache)).returncode == 0

    assert _files(study.cache) == before, "reading must not change a byte of the cache folder"
    assert sim.stats.received == 2 * study.n_records
