"""The notebook's front door (``geval_async.notebook``): a DataFrame in, a DataFrame out.

Real HTTP to the simulated judge on 127.0.0.1, real cache folders, real files. The test study
(12 users x 2 conditions, criteria clar and fit) is judged once from its config file and
JSONL records; the same study built in code, from a DataFrame, a list of dicts, CSV, TSV and
Parquet records, must send nothing more and score byte for byte alike, and the study saved
from code must run from the command line without sending anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import NOT_PASSED, PROMPT_B, StudyFiles, run_cli, running_sims, wait_for

import geval_async as ga
from geval_async.notebook import Criterion, aevaluate, evaluate
from geval_async.sim import SimServer, SimSettings


def criteria(study: StudyFiles) -> list[Criterion]:
    """The test study's two criteria in code: one prompt from its file, one from its text."""
    return [
        Criterion(
            "clar", study.root / "prompts" / "clar.txt", scale=(1, 5), fields=["text"],
            display_name="Clarity",
        ),
        Criterion("fit", PROMPT_B, scale=(1, 3), fields=["reader", "text"], display_name="Fit"),
    ]  # fmt: skip


def settings(study: StudyFiles, sim: SimServer) -> dict[str, Any]:
    """The settings of the test study's config (StudyFiles.write_config), as keywords."""
    return {
        "judge": "sim-judge",
        "base_url": sim.base_url,
        "group": "user",
        "condition": "condition",
        "mode": "samples",
        "n": 3,
        "temperature": 1.0,
        "max_tokens": 5,
        "concurrency": 4,
        "retries": 4,
        "timeout": 5,
        "cache": study.cache,
        "output": study.root / "out",
        "stats": {"conditions": ["A", "B"]},
        "progress": False,
    }


def score_tables(results: ga.StudyResults) -> dict[str, bytes]:
    """The score files as ``geval-async score`` writes them (``scores/<prefix>_long.csv``,
    each criterion's table and its raw answers in ``raw/``): their bytes, by their names after
    the prefix."""
    written = ga.write_outputs(results, ["scores"])
    assert sorted(path.parent.name for path in written) == [
        "raw",
        "raw",
        "scores",
        "scores",
        "scores",
    ]
    return {path.name.removeprefix(results.prefix): path.read_bytes() for path in written}


@pytest.fixture
def judged(study: StudyFiles, sim: SimServer) -> str:
    """The test study judged from its config file and JSONL records: its score tables."""
    study.write_config(sim.base_url)
    run = run_cli("run", str(study.config), "--quiet")
    assert run.returncode == 0, run.stderr
    assert sim.stats.received == study.n_records * 2
    return score_tables(ga.load_results(study.config))


def test_records_in_python_score_as_the_jsonl_study_and_send_nothing(
    study: StudyFiles, sim: SimServer, judged: str, tmp_path: Path
) -> None:
    sent = sim.stats.received
    frame = pd.read_json(study.records, lines=True, dtype=False)
    rows = [json.loads(line) for line in study.records.read_text(encoding="utf-8").splitlines()]
    for records in (frame, rows):
        results = evaluate(
            records, criteria(study), folder=tmp_path / "code", **settings(study, sim)
        )
        assert score_tables(results) == judged
    assert sim.stats.received == sent  # the answers of the config's study, shared

    joined = results.frame()
    assert list(joined.columns) == [
        *frame.columns,
        *(f"{c}_{s}" for c in ("clar", "fit") for s in ("score", "se", "status")),
    ]
    long = results.long.set_index(["record_id", "criterion"])
    first = joined.iloc[0]
    assert first["fit_score"] == long.loc[(first["id"], "fit"), "score"]
    assert (joined["clar_status"] == "scored").all()


@pytest.mark.parametrize("form", ["csv", "tsv", "parquet"])
def test_table_records_score_as_jsonl_from_the_command_line_and_python(
    study: StudyFiles, sim: SimServer, judged: str, form: str
) -> None:
    frame = pd.read_json(study.records, lines=True, dtype=False)
    table = study.root / f"records.{form}"
    if form == "parquet":
        frame.to_parquet(table)
    else:
        frame.to_csv(table, index=False, sep="\t" if form == "tsv" else ",")
    sent = sim.stats.received
    config = study.write_config(
        sim.base_url, data={"path": table.name}, path=study.root / f"{form}.toml"
    )
    run = run_cli("run", str(config), "--quiet")
    assert run.returncode == 0, run.stderr
    assert score_tables(ga.load_results(config)) == judged
    results = evaluate(table, criteria(study), folder=study.root / form, **settings(study, sim))
    assert score_tables(results) == judged
    assert sim.stats.received == sent


def test_ids_and_fields_of_a_csv_are_read_as_the_file_writes_them(
    study: StudyFiles, sim: SimServer
) -> None:
    table = study.root / "records.csv"
    table.write_text("id,text,reader\n007,4.50,x\n7,4.5,x\n", encoding="utf-8")
    only_clar = criteria(study)[:1]
    keywords = settings(study, sim) | {"group": None, "condition": None, "stats": None}
    keywords = {k: v for k, v in keywords.items() if v is not None}
    results = evaluate(table, only_clar, folder=study.root / "csv", **keywords)
    assert list(results.long["record_id"]) == ["007", "7"]
    assert sim.stats.received == 2  # "4.50" and "4.5" are two texts: two prompts


@pytest.mark.parametrize(
    ("keywords", "line"),
    [
        ({"n": 500}, "n=500: [sampling] 'n' must be at most 128 (the OpenAI maximum)"),
        ({"temprature": 1.0}, "temprature: unknown setting (known: "),
        ({"stats": {"alpha": 3}}, "stats={'alpha': 3}: [stats] 'alpha' must be between 0 and 1"),
        ({"id": "uid"}, "records: row 1: id field 'uid' is missing"),
        ({"base_url": "127.0.0.1:9/v1"}, "base_url='127.0.0.1:9/v1': [judge] 'base_url' must be"),
    ],
)
def test_a_bad_argument_is_one_line_naming_it_and_nothing_is_written(
    study: StudyFiles, sim: SimServer, monkeypatch: pytest.MonkeyPatch, keywords: dict[str, Any],
    line: str,
) -> None:  # fmt: skip
    monkeypatch.chdir(study.root)
    frame = pd.read_json(study.records, lines=True, dtype=False)
    with pytest.raises(ga.ConfigError) as raised:
        evaluate(frame, criteria(study), **(settings(study, sim) | keywords))
    message = str(raised.value)
    assert message.startswith(line), message
    assert "\n" not in message
    assert not any((study.root / "geval-studies").rglob("*")), "a half-written study"
    assert sim.stats.received == 0


KEY = "sk-notebook-test-0123456789"


def test_the_key_is_read_from_its_variable_never_saved_nor_shown(
    study: StudyFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTEBOOK_JUDGE_KEY", KEY)
    frame = pd.read_json(study.records, lines=True, dtype=False)
    with SimServer(SimSettings(api_key=KEY)) as keyed:  # refuses a request without the key
        keywords = settings(study, keyed) | {"api_key_env": "NOTEBOOK_JUDGE_KEY"}
        results = evaluate(frame, criteria(study), folder=study.root / "saved", **keywords)
        assert results.frame()["clar_status"].eq("scored").all()
        ga.write_outputs(results)
        given = [
            ({"api_key": KEY}, "api_key: the API key itself is not taken"),
            ({"judge": {"model": "sim-judge", "api_key": KEY}}, "judge: the API key itself"),
            ({"api_key_env": KEY}, "api_key_env: [judge] 'api_key_env' must name the environ"),
            ({"token": KEY}, "token: unknown setting"),
            ({"headers": {"Authorization": f"Bearer {KEY}"}}, "headers: [judge] 'headers' must"),
        ]
        for wrong, line in given:
            with pytest.raises(ga.ConfigError) as raised:
                evaluate(frame, criteria(study), folder=study.root / "bad", **(keywords | wrong))
            assert str(raised.value).startswith(line), str(raised.value)
            assert KEY not in str(raised.value)
        assert not (study.root / "bad").exists()
    files = [path for path in study.root.rglob("*") if path.is_file()]
    assert any(path.name == f"{results.prefix}_long.csv" for path in files)
    assert not [path for path in files if KEY.encode() in path.read_bytes()]


def test_a_bad_criterion_and_a_missing_field_name_the_criterion_and_the_row(
    study: StudyFiles, sim: SimServer
) -> None:
    frame = pd.read_json(study.records, lines=True, dtype=False)
    backwards = Criterion("clar", PROMPT_B, scale=(5, 1), fields=["reader", "text"])
    with pytest.raises(ga.ConfigError, match=r"^Criterion\('clar'\): \[criteria #1 'clar'\] "):
        evaluate(frame, backwards, folder=study.root / "s", **settings(study, sim))
    stray = Criterion("clar", "Rate {{text}} for {{reader}}.", scale=(1, 5), fields=["text"])
    with pytest.raises(ga.ConfigError) as raised:
        evaluate(frame, stray, folder=study.root / "s", **settings(study, sim))
    assert str(raised.value).startswith(
        "Criterion('clar'): placeholder {{reader}} has no record field: add 'reader' to 'fields'"
    )
    frame.loc[2, "reader"] = None
    with pytest.raises(ga.ConfigError) as raised:
        evaluate(frame, criteria(study), folder=study.root / "s", **settings(study, sim))
    assert str(raised.value) == (
        "records: row 3, record 'u001-A': field 'reader' is missing (a criterion inserts it "
        "into its prompt): add it to the record"
    )
    assert not (study.root / "s").exists()


def test_a_study_saved_from_code_runs_from_the_command_line_sending_nothing(
    study: StudyFiles, sim: SimServer
) -> None:
    frame = pd.read_json(study.records, lines=True, dtype=False)
    folder = study.root / "published"
    results = evaluate(
        frame, criteria(study), folder=folder, name="fit-study", **settings(study, sim)
    )
    sent = sim.stats.received
    assert sent == study.n_records * 2
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "fit-study.toml", "prompts/clar.txt", "prompts/fit.txt", "records.jsonl",
    ]  # fmt: skip
    run = run_cli("run", str(folder / "fit-study.toml"))
    assert run.returncode == 0, run.stderr
    assert sim.stats.received == sent
    assert score_tables(ga.load_results(folder / "fit-study.toml")) == score_tables(results)


async def test_evaluate_blocks_inside_a_running_event_loop_and_aevaluate_awaits(
    study: StudyFiles, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This coroutine's loop is running, as a notebook cell's is: asyncio.run would refuse.
    monkeypatch.chdir(study.root)
    frame = pd.read_json(study.records, lines=True, dtype=False)
    results = evaluate(frame, criteria(study), **settings(study, sim))
    assert results.missing == 0
    assert sim.stats.received == study.n_records * 2
    again = await aevaluate(frame, criteria(study), **settings(study, sim))
    assert sim.stats.received == study.n_records * 2
    assert score_tables(again) == score_tables(results)
    assert again.config.source == results.config.source  # saved once, by its content
    assert results.config.source.is_relative_to(study.root / "geval-studies")


SCRIPT = """
import sys
from pathlib import Path

import pandas as pd

from geval_async.notebook import Criterion, evaluate

root, url = Path(sys.argv[1]), sys.argv[2]
prompt = (root / "prompts" / "clar.txt").read_text(encoding="utf-8")
evaluate(
    pd.read_json(root / "records.jsonl", lines=True, dtype=False),
    Criterion("clar", prompt, scale=(1, 5), fields=["text"]),
    judge="sim-judge", base_url=url, n=3, concurrency=2, cache=root / "cache",
    folder=root / "saved", progress=False,
)
"""


def test_an_interrupt_keeps_every_answer_received(study: StudyFiles, tmp_path: Path) -> None:
    script = tmp_path / "judge.py"
    script.write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}
    with SimServer(SimSettings(latency_ms=200)) as sim:
        process = subprocess.Popen(
            [sys.executable, str(script), str(study.root), sim.base_url],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for(lambda: len(sim.stats.answered) >= 4, "four answers", process)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode != 0
        assert "every answer received is in the cache; run again to ask for the rest" in stderr
        answered = sum(sim.stats.answered.values())
        assert answered < study.n_records

        frame = pd.read_json(study.records, lines=True, dtype=False)
        prompt = (study.root / "prompts" / "clar.txt").read_text(encoding="utf-8")
        results = evaluate(
            frame, Criterion("clar", prompt, scale=(1, 5), fields=["text"]), judge="sim-judge",
            base_url=sim.base_url, n=3, concurrency=16, cache=study.cache,
            folder=study.root / "saved", progress=False,
        )  # fmt: skip
        assert results.missing == 0
        # Every request answered before the interrupt was kept: none was asked twice.
        assert sum(sim.stats.answered.values()) == study.n_records
        assert max(sim.stats.answered.values()) == 1


def test_a_panel_and_a_criterion_given_by_definition_built_in_code(
    study: StudyFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(study.root)
    frame = pd.read_json(study.records, lines=True, dtype=False)
    coherence = Criterion(
        "coh",
        definition="Coherence: the text reads as one whole.",
        task="You rate short texts.",
        steps="generate",
        scale=(1, 5),
        fields=["text"],
    )
    with running_sims(("a", "b")) as sims:
        panel = [{"name": n, "model": f"sim-{n}", "base_url": s.base_url} for n, s in sims.items()]
        results = evaluate(frame, coherence, judge=panel, n=2, progress=False)
        # Each judge: its evaluation steps once, then one request a record.
        assert [s.stats.received for s in sims.values()] == [study.n_records + 1] * 2
        assert results.frame()["coh_status"].eq("scored").all()
        again = evaluate(frame, coherence, judge=panel, n=2, progress=False)
        assert [s.stats.received for s in sims.values()] == [study.n_records + 1] * 2
        assert again.frame().equals(results.frame())
        run = run_cli("run", str(results.config.source), "--quiet")
        assert run.returncode == 0, run.stderr
        assert [s.stats.received for s in sims.values()] == [study.n_records + 1] * 2


def test_a_frame_without_ids_gets_its_scores_by_its_index(
    study: StudyFiles, sim: SimServer
) -> None:
    frame = pd.read_json(study.records, lines=True, dtype=False).drop(columns="id")
    frame.index = frame.index * 10  # an index of its own, not positions
    frame["note"] = [None if i % 2 else 1.5 for i in range(len(frame))]  # NaN: left out
    keywords = {k: v for k, v in settings(study, sim).items() if k != "stats"}
    results = evaluate(frame, criteria(study), folder=study.root / "s", **keywords)
    assert list(results.long["record_id"].unique()) == [str(i * 10) for i in range(len(frame))]
    joined = results.frame()
    assert joined.index.equals(frame.index)
    assert (
        joined.loc[30, "clar_score"]
        == results.long.set_index(["record_id", "criterion"]).loc[("30", "clar"), "score"]
    )
    assert joined["note"].isna().sum() == len(frame) // 2


@pytest.mark.parametrize("tqdm", [True, False])
def test_progress_is_a_tqdm_bar_or_without_tqdm_the_progress_line(
    study: StudyFiles,
    sim: SimServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tqdm: bool,
) -> None:
    if not tqdm:
        monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # as where tqdm is not installed
    frame = pd.read_json(study.records, lines=True, dtype=False)
    keywords = settings(study, sim) | {"progress": True}
    evaluate(frame, criteria(study), folder=study.root / "s", name="fits", **keywords)
    shown = capsys.readouterr().err
    items = study.n_records * 2
    if tqdm:
        assert "fits: 100%|" in shown and f"| {items}/{items} [" in shown
        assert f"new={items}" in shown
    else:
        assert f"{items}/{items} new {items} cached 0 failed 0" in shown


def test_a_judge_file_named_in_code_is_the_working_folders_wherever_the_study_is_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geval_async.notebook import define_study
    from geval_async.study.config import load_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "scores").mkdir()
    other = tmp_path / "scores" / "other.csv"
    other.write_text("id,clarity\nr0,4\n", encoding="utf-8")
    study = define_study(
        [{"id": "r0", "text": "A short text."}],
        Criterion("clarity", prompt="Rate it (1-5).\n\n{{text}}", scale=(1, 5), fields=["text"]),
        judge="sim-judge",
        meta={"judges": {"other": {"path": "scores/other.csv"}}},
    )
    path = study.save(tmp_path / "elsewhere" / "saved")
    config = load_config(path)
    assert config.meta.judges["other"].path.resolve() == other.resolve()
