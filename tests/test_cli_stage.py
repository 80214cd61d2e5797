"""The judge stage opens the cache, the command line prints: the readers' check that a cache
folder is one (the library's ``load_results`` and ``read_answers`` refuse a mistyped path with
the line the commands print), and the ``cache`` commands that read a study's folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import StudyFiles, run_cli

import geval_async as ga
from geval_async.errors import ConfigError

OFFLINE = "http://127.0.0.1:9/v1"  # nothing listens: reading a cache needs no judge


@pytest.mark.parametrize("read", [ga.load_results, ga.read_answers])
def test_the_library_refuses_a_mistyped_cache_folder_with_the_commands_line(
    study: StudyFiles, tmp_path: Path, read: object
) -> None:
    study.write_config(OFFLINE)
    mistyped = tmp_path / "cahce"
    with pytest.raises(ConfigError) as refused:
        read(study.config, cache=str(mistyped))  # type: ignore[operator]
    assert str(refused.value).startswith(f"{mistyped}: no cache folder there")
    result = run_cli("score", str(study.config), "--cache", str(mistyped))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {refused.value}"
    assert not mistyped.exists(), "reading must not create it"


@pytest.mark.parametrize("command", ["export", "migrate"])
def test_cache_export_and_migrate_refuse_a_missing_folder_writing_nothing(
    study: StudyFiles, tmp_path: Path, command: str
) -> None:
    study.write_config(OFFLINE)
    archive = tmp_path / "study.jsonl.gz"
    extra = [str(archive)] if command == "export" else []
    result = run_cli("cache", command, str(study.config), *extra)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {study.cache}: no cache folder there: check --cache (or [cache] path), or run "
        f"`geval-async run {study.config}` first to fill it"
    ]
    assert not archive.exists() and not archive.with_name(archive.name + ".partial").exists()
    assert not study.cache.exists()
