"""Installed like a library: a wheel carries the prompts and example studies, and the demo
runs from an empty folder with no clone in sight.

.ci/run does the full check (a fresh virtualenv, dependencies from the index); this test
installs the built wheel without dependencies into a folder of its own and runs it with this
interpreter's packages, which is enough to show the installed code finds its files.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([*args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_the_wheel_carries_the_shipped_files_and_its_demo_runs_anywhere(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        str(ROOT),
        "-w",
        str(dist),
        cwd=tmp_path,
    )
    (wheel,) = dist.glob("geval_async-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {
        name.removeprefix("geval_async/_data/")
        for name in names
        if name.startswith("geval_async/_data/")
    }
    in_repo = {
        str(path.relative_to(ROOT))
        for folder, patterns in (("prompts", ["*.txt"]), ("examples", ["*.toml", "*.jsonl"]))
        for pattern in patterns
        for path in (ROOT / folder).rglob(pattern)
        if not {"out", "cache"} & set(path.relative_to(ROOT).parts)
    }
    assert in_repo and in_repo <= shipped, sorted(in_repo - shipped)
    assert not [name for name in shipped if "/out/" in name or "/cache/" in name]
    # The HTML report's templates are package data too (report --html from an installation).
    assert "geval_async/scoring/output/html/templates/report.html.j2" in names

    site = tmp_path / "site"
    _run(
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--target",
        str(site),
        str(wheel),
        cwd=tmp_path,
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENAI_API_KEY")}
    env["PYTHONPATH"] = str(site)
    where = _run(
        sys.executable, "-c", "import geval_async; print(geval_async.__file__)", cwd=empty, env=env
    )
    assert where.startswith(str(site)), f"not the installed copy: {where}"
    out = _run(sys.executable, "-m", "geval_async", "demo", cwd=empty, env=env)
    assert "SIMULATED" in out
    assert (empty / "geval-demo" / "out" / "ueq_report.md").is_file()
    assert sorted(p.name for p in empty.iterdir()) == ["geval-demo"]
