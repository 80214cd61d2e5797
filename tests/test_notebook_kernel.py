"""``examples/notebook.ipynb`` executed in a real Jupyter kernel (nbclient and ipykernel).

The notebook judges the UEQ study from a DataFrame against the simulated judge it starts in
its kernel, where the kernel's own event loop runs while ``evaluate`` is called. Executed
twice in one folder: the first execution sends every request, the second none (the cache
answers); its scores equal those of the UEQ config file judged by the command line into a
cache of its own, and it draws its plot. A kernel interrupt during ``evaluate`` stops the run
with every answer received in the cache, and the cell run again asks only for the rest.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, UEQ, StudyFiles, run_cli, wait_for

import geval_async as ga
from geval_async.sim import SimServer, SimSettings

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
    config_study = ga.load_results(UEQ, model="sim-judge", cache=cache, output=out)
    notebook_study = ga.load_results(tmp_path / saved)
    assert score_files(notebook_study) == score_files(config_study)


def score_files(results: ga.StudyResults) -> dict[str, bytes]:
    """The score files written (``scores/<prefix>_long.csv``, each criterion's table and its
    raw answers): their bytes, by their names after the prefix."""
    written = ga.write_outputs(results, ["scores"])
    assert len(written) == 1 + 2 * len(results.config.criteria)
    return {path.name.removeprefix(results.prefix): path.read_bytes() for path in written}


CELL = """
import pandas as pd
from geval_async.notebook import Criterion, evaluate

records = pd.read_json({records!r}, lines=True, dtype=False)
results = evaluate(
    records,
    Criterion("clar", open({prompt!r}).read(), scale=(1, 5), fields=["text"]),
    judge="sim-judge", base_url={url!r}, n=3, concurrency={concurrency}, cache="cache",
    folder="study", progress=False,
)
results.frame()["clar_status"].value_counts().to_dict()
"""


def test_a_kernel_interrupt_keeps_every_answer_received(
    study: StudyFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    from jupyter_client.manager import start_new_kernel

    prompt = study.root / "prompts" / "clar.txt"
    with SimServer(SimSettings(latency_ms=200)) as slow:
        cell = partial(
            CELL.format, records=str(study.records), prompt=str(prompt), url=slow.base_url
        )
        manager, client = start_new_kernel(kernel_name="python3", cwd=str(study.root))
        try:
            # A cell that ends in an error aborts what is queued behind it (stop_on_error): the
            # next cell here is sent at once, where a user runs it a moment later.
            sent = client.execute(cell(concurrency=2), stop_on_error=False)
            wait_for(lambda: len(slow.stats.answered) >= 4, "four answers")
            manager.interrupt_kernel()
            reply = shell_reply(client, sent)
            assert reply["status"] == "error"
            assert reply["ename"] == "KeyboardInterrupt"
            assert "every answer received is in the cache" in reply["evalue"]
            assert sum(slow.stats.answered.values()) < study.n_records

            again = client.execute(cell(concurrency=24))
            assert shell_reply(client, again)["status"] == "ok"
            assert execute_result(client, again) == f"{{'scored': {study.n_records}}}"
        finally:
            client.stop_channels()
            manager.shutdown_kernel(now=True)
        # Every answer received before the interrupt was kept: no request was asked twice.
        assert sum(slow.stats.answered.values()) == study.n_records
        assert max(slow.stats.answered.values()) == 1


def shell_reply(client: Any, sent: str) -> dict[str, Any]:
    """The content of the kernel's reply to the cell ``sent``."""
    while True:
        message = client.get_shell_msg(timeout=120)
        if message["parent_header"].get("msg_id") == sent:
            content: dict[str, Any] = message["content"]
            return content


def execute_result(client: Any, sent: str) -> str:
    """The text of the cell ``sent``'s value, as the notebook shows it."""
    while True:
        message = client.get_iopub_msg(timeout=120)
        if (
            message["parent_header"].get("msg_id") == sent
            and message["msg_type"] == "execute_result"
        ):
            text: str = message["content"]["data"]["text/plain"]
            return text
