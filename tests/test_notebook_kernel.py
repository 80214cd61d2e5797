"""``examples/notebook.ipynb`` executed in a real Jupyter kernel (nbclient and ipykernel).

The notebook judges the UEQ study from a DataFrame against the simulated judge it starts in
its kernel, where the kernel's own event loop runs while ``evaluate`` is called. Executed
twice in one folder: the first execution sends every request, the second none (the cache
answers); its scores equal those of the UEQ config file judged by the command line into a
cache of its own, and it draws its plot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, UEQ, run_cli

import geval_async as ga
from geval_async.sim import SimServer

NOTEBOOK = ROOT / "examples" / "notebook.ipynb"


def execute(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The example notebook executed in a new python3 kernel whose working folder is
    ``folder``: the executed notebook, with its outputs."""
    # jupyter_core warns of its paths' future on import unless the new ones are chosen.
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": folder}}
    )
    client.execute()
    return notebook


def printed(notebook: Any) -> str:
    return "".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "stream" and output.name == "stdout"
    )


def test_the_example_notebook_in_a_kernel_scores_as_the_config_and_reruns_free(
    tmp_path: Path, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = execute(tmp_path, monkeypatch)
    assert "requests sent to the judge: 192\n" in printed(first)
    plots = [
        output
        for cell in first.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if "image/png" in output.get("data", {})
    ]
    assert len(plots) == 1

    second = execute(tmp_path, monkeypatch)
    assert "requests sent to the judge: 0\n" in printed(second)

    # The study the notebook built, saved by its content (a new simulated judge's port is
    # a new base_url, so each execution has its own folder).
    (saved,) = [line for line in printed(second).splitlines() if line.endswith("/ueq.toml")]
    cache, out = tmp_path / "config-cache", tmp_path / "config-out"
    flags = ["--model", "sim-judge", "--cache", str(cache), "--output", str(out)]
    run = run_cli(
        "run", str(UEQ), "--quiet", "--base-url", sim.base_url, "--rpm", "1e8", "--tpm", "1e8",
        *flags,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert sim.stats.received == 192
    config_study = ga.load_results(UEQ, model="sim-judge", cache=cache)
    notebook_study = ga.load_results(tmp_path / saved)
    assert notebook_study.long.to_csv(index=False) == config_study.long.to_csv(index=False)
