"""Shared fixtures: a real simulated judge on 127.0.0.1 and a small study on disk.

Every test gets its own temporary folder for records, prompts, config and cache, and the
tests that only read a judged study share one cache (``judged``: judged once a session, by
whichever xdist worker gets there first, checked unchanged after each of them); the API-key
variables of the machine are cleared so a developer's
real key can never reach a test server. Commands run in the test's own process
(``run_cli``: ``geval_async.cli.app.main``, about a second of imports cheaper than a fresh
interpreter); ``run_process`` starts ``python -m geval_async`` where the process itself is under
test (signals, a full disk, an event loop already running in the test's thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import json
import os
import pickle
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import pytest
from aiohttp import web
from hypothesis import HealthCheck, settings

from geval_async.judging.store.stored import CachedResponse
from geval_async.options import EntryStatus
from geval_async.sim import SimServer, SimSettings
from geval_async.study.requests import JudgeRequest

ROOT = Path(__file__).resolve().parent.parent

PROMPT_A = """You will be given a short text. Rate its clarity.

Evaluation Criteria:
Clarity (1-5) - how easy the text is to follow.

Evaluation Steps:
1. Read the text.
2. Assign a score from 1 to 5.

Text:
{{text}}

Evaluation Form (scores ONLY):
- Clarity (1-5):"""

PROMPT_B = """You will be given a short text written for a reader. Rate how well it fits them.

Reader: {{reader}}

Text:
{{text}}

Evaluation Form (scores ONLY):
- Fit (1-3):"""


# Hypothesis's timing checks fail a property on a busy machine (two cores shared by a whole
# suite): the examples and what they assert stay, the clock is left out, as in every test.
settings.register_profile(
    "suite", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("suite")


# The machine's API variables: cleared for every test.
CLEARED = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "OPENAI_API_VERSION",
    "GEVAL_DEBUG",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CLEARED:
        monkeypatch.delenv(name, raising=False)


# Cleared again for every command a test runs, whatever the test set.
NOT_PASSED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GEVAL_DEBUG")


ANSWER_BODY = '{"choices":[{"index":0,"message":{"role":"assistant","content":"4"}}]}'


def incompressible(size: int) -> str:
    """``size`` characters of text that deflate hardly shortens (hex of random bytes): a body
    that stays over diskcache's 32 kB when its entry is stored deflated (judging/store/stored.py),
    so that diskcache keeps it in a file of its own."""
    return random.Random(size).randbytes(size // 2 + 1).hex()[:size]


def cached_answer(
    key: str, body: str = ANSWER_BODY, latency_ms: float = 2.0, **fields: Any
) -> CachedResponse:
    """One stored answer of the judge's, as the cache's own tests write and read it;
    ``fields``: other values of :class:`CachedResponse`'s fields (a refusal's status, n)."""
    entry: dict[str, Any] = {
        "status": EntryStatus.OK,
        "http_status": 200,
        "time": 1.0,
        "attempts": 1,
        "n": 1,
        "draw": 0,
        "model": "judge",
        "record_id": "r1",
        "criterion": "clarity",
        "received": 1,
    }
    return CachedResponse(key=key, body=body, latency_ms=latency_ms, **{**entry, **fields})


@contextlib.contextmanager
def running_sims(
    names: Iterable[str], settings: Callable[[], SimSettings] = SimSettings
) -> Iterator[dict[str, SimServer]]:
    """One simulated judge a name (a panel's judges), each with its own ``settings()``."""
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(SimServer(settings())) for name in names}


@pytest.fixture
def sim() -> Iterator[SimServer]:
    """A simulated judge with no latency, limits or faults (tests set what they need)."""
    with SimServer(SimSettings()) as server:
        yield server


class LoopbackApp:
    """An aiohttp.web app on 127.0.0.1, served from a thread of its own: the base of the stub
    judges tests write where the server must not be the project's (a subclass gives its
    :meth:`routes`). ``with`` starts and stops it; ``base_url`` is its ``/v1`` URL."""

    def __init__(self) -> None:
        self.port = 0
        self.base_url = ""
        self.loop: asyncio.AbstractEventLoop
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def routes(self) -> list[web.RouteDef]:
        """The app's routes (the chat-completions POST, and whatever else the stub answers)."""
        raise NotImplementedError

    def _serve(self) -> None:
        self.loop = asyncio.new_event_loop()
        app = web.Application()
        app.add_routes(self.routes())
        runner = web.AppRunner(app)
        self.loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = runner.addresses[0][1]
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(runner.cleanup())
        self.loop.close()

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the stub server did not start within 10 s")
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


class PlainJudge(LoopbackApp):
    """Another OpenAI-compatible server (not geval-async's): answers "3" to everything."""

    def __init__(self) -> None:
        super().__init__()
        self.received = 0

    async def _complete(self, request: web.Request) -> web.Response:
        self.received += 1
        body = await request.json()
        choices = [
            {"index": i, "message": {"role": "assistant", "content": "3"}, "finish_reason": "stop"}
            for i in range(body.get("n", 1))
        ]
        return web.json_response({"choices": choices, "usage": {"total_tokens": 10}})

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/chat/completions", self._complete),
        ]


@dataclass
class StudyFiles:
    """A small two-criterion study written to a temporary folder."""

    root: Path
    config: Path
    records: Path
    cache: Path
    output: Path
    n_records: int
    judge_url: str = ""  # the base URL the config was last written for

    @classmethod
    def in_folder(
        cls, root: Path, records: Path | None = None, config: str = "config.toml"
    ) -> StudyFiles:
        """Another study in ``root`` (records of its own, already written; ``records.jsonl``
        unless named), its config ``root/config``, its cache and outputs in ``root``."""
        records = records or root / "records.jsonl"
        count = len(records.read_text(encoding="utf-8").splitlines())
        return cls(root, root / config, records, root / "cache", root / "out", count)

    def write_config(
        self,
        base_url: str,
        *,
        criteria: list[dict[str, object]] | None = None,
        path: Path | None = None,
        judges: dict[str, dict[str, object]] | None = None,
        **sections: dict[str, object] | None,
    ) -> Path:
        """(Re)write config.toml (or ``path``, beside it) pointing at ``base_url``; ``sections``
        replace defaults, key by key (a section or a key given ``None`` is left out, a new
        section is added); ``criteria`` replace the two criteria (clar, fit); ``judges``: see
        :meth:`write_panel`."""
        self.judge_url = base_url
        defaults: dict[str, dict[str, object]] = {
            "data": {
                "path": _relative(self.records, self.root),
                "id": "id",
                "group": "user",
                "condition": "condition",
            },
            "judge": {"model": "sim-judge", "base_url": base_url},
            "sampling": {"mode": "samples", "n": 3, "temperature": 1.0, "max_tokens": 5},
            "limits": {"concurrency": 4, "retries": 4, "timeout": 5},
            "cache": {"path": _relative(self.cache, self.root)},
            "output": {"path": "out", "prefix": "t"},
            "stats": {"conditions": ["A", "B"]},
        }
        if judges is not None:
            del defaults["judge"]
        for name, values in sections.items():
            if values is None:
                defaults.pop(name, None)
            else:
                defaults[name] = {**defaults.get(name, {}), **values}
        tables = [(f"[{name}]", values) for name, values in defaults.items()]
        tables += [("[[criteria]]", c) for c in (CRITERIA if criteria is None else criteria)]
        tables += [("[[judges]]", {"name": n, **keys}) for n, keys in (judges or {}).items()]
        lines = []
        for header, values in tables:
            lines.append(header)
            lines += [
                f"{toml_key(key)} = {toml_value(value)}"
                for key, value in values.items()
                if value is not None
            ]
            lines.append("")
        target = path or self.config
        target.write_text("\n".join(lines), encoding="utf-8")
        return target

    def write_panel(
        self,
        judges: dict[str, dict[str, object]],
        *,
        path: Path | None = None,
        **sections: dict[str, object] | None,
    ) -> Path:
        """(Re)write config.toml (or ``path``) as a panel: a ``[[judges]]`` table per entry of
        ``judges`` (name -> that judge's keys: model, base_url, api_key_env, limits as an inline
        table...) in place of ``[judge]``; ``sections`` as in :meth:`write_config` (``panel``
        writes the ``[panel]`` table)."""
        return self.write_config("", path=path, judges=judges, **sections)


def sim_judges(sims: Mapping[str, SimServer]) -> dict[str, dict[str, object]]:
    """A panel's judges for :meth:`StudyFiles.write_panel`, one a simulated judge: judge NAME
    is model sim-NAME at that server."""
    return {name: {"model": f"sim-{name}", "base_url": s.base_url} for name, s in sims.items()}


# The test study's two criteria, as its config names them.
CRITERIA: list[dict[str, object]] = [
    {
        "name": "clar",
        "display_name": "Clarity",
        "prompt": "prompts/clar.txt",
        "scale": [1, 5],
        "fields": ["text"],
    },
    {
        "name": "fit",
        "display_name": "Fit",
        "prompt": "prompts/fit.txt",
        "scale": [1, 3],
        "fields": ["reader", "text"],
    },
]


def toml_value(value: object) -> str:
    """A TOML value: a dict as an inline table, a list item by item, anything else as JSON
    writes it (which TOML reads the same for strings, numbers and booleans)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


def toml_key(key: str) -> str:
    """A TOML key: bare where TOML allows it (letters, digits, - and _), else quoted."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _relative(path: Path, root: Path) -> str:
    """``path`` as a config names it: relative to the config's folder where it is inside it."""
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def write_records(path: Path, n_users: int) -> int:
    rows = []
    for user in range(n_users):
        for condition in ("A", "B"):
            rows.append(
                {
                    "id": f"u{user:03d}-{condition}",
                    "user": f"u{user:03d}",
                    "condition": condition,
                    "reader": f"reader {user} who likes {'tables' if user % 2 else 'lists'}",
                    "text": f"Text {user}{condition}: literal {{{{reader}}}} and {{x}} stay as is. "
                    + "word " * (user % 7),
                }
            )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return len(rows)


def write_study(root: Path) -> StudyFiles:
    """The test study's records and prompts in ``root`` (its config is written by
    :meth:`StudyFiles.write_config`)."""
    (root / "prompts").mkdir()
    (root / "prompts" / "clar.txt").write_text(PROMPT_A, encoding="utf-8")
    (root / "prompts" / "fit.txt").write_text(PROMPT_B, encoding="utf-8")
    records = root / "records.jsonl"
    count = write_records(records, 12)
    return StudyFiles(root, root / "config.toml", records, root / "cache", root / "out", count)


@pytest.fixture
def study(tmp_path: Path) -> StudyFiles:
    """12 users x 2 conditions, criteria clar (1-5) and fit (1-3), n = 3."""
    return write_study(tmp_path)


def run_process(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m geval_async ARGS`` in a fresh process, as a user would: for the tests
    about the process itself (its exit code, what the real command prints, signals)."""
    full_env = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "geval_async", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=ROOT,
    )


_IN_PROCESS = threading.Lock()  # held while run_cli runs a command in this process


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the command line in this process, as ``python -m geval_async ARGS`` would: its
    stdout and stderr, its exit code, the same environment (``env`` added, the API variables
    cleared) and working folder, but without a new interpreter's ~1 s of imports.

    ``timeout`` is accepted for the callers of :func:`run_process` and not enforced here.
    A crash prints its traceback to stderr and exits 1, as Python does. One command at a time:
    argv, the streams, the environment and the folder are the process's, so a test of two
    commands at once (two processes racing) must use :func:`run_process`.
    """
    from geval_async.cli.app import main

    if not _IN_PROCESS.acquire(blocking=False):
        raise RuntimeError("run_cli is one command at a time: race processes with run_process")
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    sys.argv = ["geval-async", *args]  # the resume hint a stopped run prints quotes it
    for name in NOT_PASSED:
        os.environ.pop(name, None)
    os.environ.update(env or {})
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse: --help, or a usage error
                if isinstance(exc.code, str):
                    print(exc.code, file=sys.stderr)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception:
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        _IN_PROCESS.release()
    return subprocess.CompletedProcess(
        ["geval-async", *args], code, stdout=out.getvalue(), stderr=err.getvalue()
    )


def run_study(
    study: StudyFiles, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``geval-async run CONFIG --quiet EXTRA`` for a test study."""
    return run_cli("run", str(study.config), "--quiet", *extra, env=env)


def judge_study(
    study: StudyFiles, base_url: str, *extra: str, **sections: dict[str, object]
) -> subprocess.CompletedProcess[str]:
    """Write the study's config for the judge at ``base_url`` (``sections`` as in
    :meth:`StudyFiles.write_config`) and judge it: ``run CONFIG --quiet EXTRA``, which must
    complete."""
    study.write_config(base_url, **sections)
    result = run_study(study, *extra)
    assert result.returncode == 0, result.stderr
    return result


# The shipped UEQ study (examples/ueq), for the tests of one endpoint's dialect.
UEQ = ROOT / "examples" / "ueq" / "config.toml"


def ueq_flags(base_url: str, folder: Path, model: str, *extra: str) -> list[str]:
    """The flags that judge the shipped UEQ study's first 4 records with ``model`` at
    ``base_url``, its cache and outputs in ``folder``: ``UEQ --base-url URL --model MODEL
    --limit 4 --cache FOLDER/cache --output FOLDER/out --rpm 1e8 --tpm 1e8 EXTRA``."""
    return [
        str(UEQ),
        "--base-url",
        base_url,
        "--model",
        model,
        "--limit",
        "4",
        "--cache",
        str(folder / "cache"),
        "--output",
        str(folder / "out"),
        # The config's limits pace a run (a steady rate, never a burst): its rpm = 500 would
        # hold an endpoint that takes n = 1 only (ten requests an item, 160 for four records)
        # to 8 a second, and max_tokens = 2000 x n = 10 is 20,000 tokens a request, which its
        # tpm would pace to ten requests a minute.
        "--rpm",
        "100000000",
        "--tpm",
        "100000000",
        *extra,
    ]


# How often a batch run polls the simulated judge's Batch API (its batches end in moments).
POLL = ("--poll", "0.05")


def run_batch(study: StudyFiles, *extra: str) -> subprocess.CompletedProcess[str]:
    """``geval-async run CONFIG --batch --quiet --poll 0.05 EXTRA`` for a test study."""
    return run_cli("run", str(study.config), "--batch", "--quiet", *POLL, *extra)


def summary_cells(stdout: str, name: str = "total") -> list[str]:
    """The cells of one row of the summary table a command printed, after the row's name."""
    return next(line for line in stdout.splitlines() if line.split()[:1] == [name]).split()[1:]


def summary_row(stdout: str, name: str = "total") -> dict[str, int]:
    """One row of the summary table a command printed, by column (run: items, cached, new,
    refused, failed, missing; status: items, answered, refused, missing [, in batch])."""
    header = next(line for line in stdout.splitlines() if line.startswith("criterion"))
    cells = map(int, summary_cells(stdout, name))
    return dict(zip(header.split()[1:], cells, strict=True))


def keys_by_digest(study: StudyFiles) -> dict[str, str]:
    """sha256 of each draw-0 request body as sent (what the sim counts) -> its cache key."""
    import hashlib

    import orjson

    from geval_async.study.config import load_config
    from geval_async.study.plan import first_request, plan_items
    from geval_async.study.prepare import prepare_study

    plan = prepare_study(load_config(study.config))
    out = {}
    for item in plan_items(plan):
        request = first_request(item, plan.config)
        out[hashlib.sha256(orjson.dumps(request.body)).hexdigest()] = request.key
    return out


def cache_snapshot(path: Path) -> dict[str, bytes]:
    """Every key and stored value of a cache folder (to compare before/after), read through a
    plain diskcache."""
    import diskcache

    if not path.exists():
        return {}
    with diskcache.Cache(str(path)) as cache:
        return {key: cache[key] for key in cache.iterkeys()}


# --- the HTML report in a real headless Chromium (Playwright) ------------------------------

from chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402  (bench/ launches it alike)

# The mark of a module whose tests open a report in Chromium.
needs_chromium = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not Path(CHROMIUM).is_file(),
    reason="needs Debian's chromium (.ci/run installs it: apt-get install -y chromium)",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, through Playwright's sync API: one a module, since that API
    keeps an event loop running in this thread while it is open (where a command's
    ``asyncio.run`` cannot start), and closed with the module's last test."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@dataclass
class Opened:
    """A page with the report loaded, and everything it asked for or complained about."""

    page: Any
    requests: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)


def open_report(browser: Any, path: Path) -> Opened:
    """``path`` opened from disk (``file://``) in a new 1280 x 900 context, with every request
    and every console error or warning recorded, once its records table has rows."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    opened = Opened(page)
    page.on("request", lambda request: opened.requests.append(request.url))
    page.on(
        "console",
        lambda message: (
            opened.console.append(f"{message.type}: {message.text}")
            if message.type in ("error", "warning")
            else None
        ),
    )
    page.on("pageerror", lambda error: opened.console.append(f"pageerror: {error}"))
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("#records tbody tr")
    return opened


# --- a judged study shared by the tests that only read it --------------------------------


def _folder_content(folder: Path, cache: Path) -> dict[str, bytes]:
    """What a test could change in a judged folder: every entry of its cache, and every file
    but the databases (outputs, the endpoints learned, the schema mark); not sqlite's own
    bookkeeping (a reader's checkpoint rewrites the database's bytes, not its entries)."""
    content = {f"entry {key}": value for key, value in cache_snapshot(cache).items()}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix != ".db" and ".db-" not in path.name:
            content[f"file {path.relative_to(folder)}"] = path.read_bytes()
    return content


def _made_once(
    factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Any]
) -> tuple[Path, Any]:
    """A folder ``make(folder)`` fills once a session, and what it returned (picklable).

    Under pytest-xdist every worker is a session of its own: the first to take the lock (a
    file lock beside the workers' temporary folders, as xdist's docs show) makes the folder,
    the others read what it left. Where ``make`` failed, the next worker tries again (and
    fails as loudly). Without xdist the folder is simply the session's own.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        folder = factory.mktemp(name)
        return folder, make(folder)
    shared = factory.getbasetemp().parent  # the run's folder, above each worker's own
    folder, made = shared / name, shared / f"{name}.pickle"
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not made.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a failed attempt's leftovers
            folder.mkdir()
            made.write_bytes(pickle.dumps(make(folder)))
        return folder, pickle.loads(made.read_bytes())


@dataclass(frozen=True)
class SharedFolder:
    """A folder judged once a session (by one xdist worker, for all) and shared by the tests
    that only read it; ``content`` is what it held then (:func:`_folder_content`). Each
    worker checks it after its own tests: where the other worker's test wrote into it, the
    check may fail on a test that did not (the message says where to look)."""

    folder: Path
    cache: Path
    content: dict[str, bytes]

    def check_unchanged(self, by: str) -> None:
        """Fail loudly if the folder holds anything other than what it held once judged."""
        now = _folder_content(self.folder, self.cache)
        changed = sorted(
            k for k in self.content.keys() | now.keys() if self.content.get(k) != now.get(k)
        )
        if changed:
            pytest.fail(
                f"{by} (or a test running beside it on the other xdist worker) wrote into "
                f"the shared judged folder {self.folder} ({len(changed)} changed: "
                f"{', '.join(changed[:3])}): a test that writes there must judge its own "
                "study (judge_study), or copy this one (shutil.copytree)",
                pytrace=False,
            )


@dataclass(frozen=True)
class JudgedCache(SharedFolder):
    """The test study's cache as the default simulated judge filled it: ``judge_study(study,
    sim.base_url)`` with every default. ``base_url`` is the judge that filled it, stopped
    since: a test that asks it anything fails."""

    base_url: str


@pytest.fixture(scope="session")
def judged_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JudgedCache]:
    """The shared judged cache, judged once for every xdist worker; read-only (checked after
    every test that uses it, and at each worker's end)."""

    def judge(folder: Path) -> tuple[dict[str, bytes], str]:
        files = write_study(folder)
        # In a process of its own: a module's Playwright browser may hold an event loop in
        # this thread, and the command's signal handlers need the main thread.
        with SimServer(SimSettings()) as server:
            files.write_config(server.base_url)
            done = run_process("run", str(files.config), "--quiet")
            assert done.returncode == 0, done.stderr
        return _folder_content(files.cache, files.cache), server.base_url

    folder, (content, base_url) = _made_once(tmp_path_factory, "judged", judge)
    judged = JudgedCache(folder / "cache", folder / "cache", content, base_url)
    yield judged
    judged.check_unchanged("a test")


@pytest.fixture
def judged(
    study: StudyFiles, judged_cache: JudgedCache, request: pytest.FixtureRequest
) -> Iterator[StudyFiles]:
    """The test study, judged: its records, prompts and output folder its own, its config (for
    the judge that filled the cache) reading the shared judged cache. For the tests that only
    read the answers (score, report, status, answers, the library's loads): they write their
    outputs into their own folder, never into the cache; a test that did fails."""
    study.cache = judged_cache.cache
    study.write_config(judged_cache.base_url)
    yield study
    judged_cache.check_unchanged(request.node.nodeid)


@dataclass(frozen=True)
class DemoRun(SharedFolder):
    """What ``geval-async demo --output FOLDER`` (the UEQ example, judged by the simulated
    judge) wrote, its outputs in ``FOLDER/out``, and what it printed."""

    stdout: str


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoRun]:
    """The demo, run once for every xdist worker in a process (as a user runs it); read-only,
    checked at each worker's end: a test that runs the demo again copies the folder first."""

    def run_demo(folder: Path) -> tuple[dict[str, bytes], str]:
        result = run_process("demo", "--output", str(folder))
        assert result.returncode == 0, result.stdout + result.stderr
        return _folder_content(folder, folder / "cache"), result.stdout

    folder, (content, stdout) = _made_once(tmp_path_factory, "demo", run_demo)
    demo = DemoRun(folder, folder / "cache", content, stdout)
    yield demo
    demo.check_unchanged("a test")


# --- a panel's judge named that it has not ---------------------------------------------------


def no_judge_named(name: str, judges: str) -> str:
    """What a config refuses an unknown judge ``name`` with (``--judge NAME``, ``judge=NAME``,
    ``for_judge``), ``judges`` the names it lists."""
    return f"no judge named {name!r} (the config's judges: {judges})"


def assert_no_judge_named(
    result: subprocess.CompletedProcess[str], config: Path, name: str, judges: str
) -> None:
    """A command refused the unknown judge ``name``: exit 2 and one line, naming the config and
    the judges it has."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {config}: {no_judge_named(name, judges)}"
    ]


# --- an answer written by hand, stored under the key the plan computes -----------------------


def answer_to(request: JudgeRequest, body: dict[str, Any], time: float = 0.0) -> CachedResponse:
    """The judge's answer ``body`` (a chat-completions response) to ``request``, as the runner
    stores it: for the tests whose expected scores are worked out by hand."""
    return CachedResponse(
        key=request.key,
        status=EntryStatus.OK,
        http_status=200,
        body=json.dumps(body),
        time=time,
        latency_ms=0.0,
        attempts=1,
        n=request.n,
        draw=request.draw,
        model="m",
        record_id=request.item.record.id,
        criterion=request.item.criterion.name,
        received=len(body["choices"]),
    )


# --- SummEval's expert scores, for the meta-evaluation tests ---------------------------------

SUMMEVAL = ROOT.parent / "shared" / "data" / "summeval"
# The mark of the tests that read it: it lives beside the repository, never in it.
needs_summeval = pytest.mark.skipif(
    not SUMMEVAL.is_dir(),
    reason="no SummEval at ../shared/data/summeval (it lives beside the repository, never in it)",
)


# --- a command in the background, for the tests that race, signal or watch it ---------------


def start_process(
    *args: str, log: Path | None = None, quiet: bool = False
) -> subprocess.Popen[str]:
    """Start ``python -m geval_async ARGS`` in the background, as :func:`run_process` runs it
    (the API variables cleared, in the repository's folder): for the tests that race, signal or
    watch a process. Its stdout and stderr go to ``log`` where named (one stream, as a terminal
    shows them), nowhere if ``quiet``, else to pipes (text)."""
    command = [sys.executable, "-m", "geval_async", *args]
    env = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}
    if log is not None:
        with log.open("wb") as out:
            return subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
            )
    sink = subprocess.DEVNULL if quiet else subprocess.PIPE
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=sink, stderr=sink, text=True)


@contextlib.asynccontextmanager
async def sim_command(*flags: str) -> AsyncIterator[str]:
    """``geval-async sim --port 0 FLAGS`` as a user starts it; its base URL, read from the line
    it prints once it listens. Ended when the block is left."""
    command = ("sim", "--port", "0", *flags)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "geval_async", *command, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(30):
            while "listening on" not in (line := (await proc.stdout.readline()).decode()):
                assert line, "the sim command ended before it listened"
        yield line.split("listening on ")[1].strip()
    finally:
        proc.terminate()
        await proc.communicate()


def wait_for(
    condition: Callable[[], bool],
    what: str,
    process: subprocess.Popen[str] | None = None,
    timeout: float = 60,
) -> None:
    """Poll ``condition`` until it holds; fail, naming ``what``, if ``process`` ends first or
    ``timeout`` seconds pass (a bound on a stuck run, never a timing)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert process is None or process.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


# --- the simulated judge as an Azure OpenAI deployment ----------------------------------------


def azure_judge(sim: SimServer, api_version: str, **keys: object) -> dict[str, object]:
    """``[judge]`` keys of the simulated judge as an Azure OpenAI deployment (judge-deploy at
    its root URL, the key in AZ_KEY, no base_url), ``keys`` added: for ``write_config(judge=)``."""
    return {
        "provider": "azure",
        "azure_endpoint": sim.root_url,
        "deployment": "judge-deploy",
        "api_version": api_version,
        "api_key_env": "AZ_KEY",
        "base_url": None,
        **keys,
    }


# --- a study a user other than root can read --------------------------------------------------


def as_other_user() -> list[str]:
    """The command prefix that runs a process as a user the folders' modes bind (root passes
    every mode): ``nobody`` through ``setpriv``; nothing when not root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot drop to a user chmod binds")
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


@contextlib.contextmanager
def study_every_user_may_read(records: int, cache: str, output: str) -> Iterator[StudyFiles]:
    """The test study in a folder every user may read (pytest's tmp_path is root's alone),
    its cache and output at these paths inside it; every mode put back and removed after."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="geval-shared-"))
    root.chmod(0o755)
    (root / "prompts").mkdir(mode=0o755)
    (root / "prompts" / "clar.txt").write_text(PROMPT_A, encoding="utf-8")
    (root / "prompts" / "fit.txt").write_text(PROMPT_B, encoding="utf-8")
    count = write_records(root / "records.jsonl", records)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    try:
        yield StudyFiles(
            root, root / "config.toml", root / "records.jsonl", root / cache, root / output, count
        )
    finally:
        for path in [root, *root.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(root)


# --- a small disk, for the tests of a full or read-only one ----------------------------------


@pytest.fixture
def mount_tmpfs(tmp_path: Path) -> Iterator[Callable[[Path, str], None]]:
    """Mount a size-limited tmpfs (needs root with CAP_SYS_ADMIN); skips when impossible."""
    mounted: list[Path] = []

    def mount(path: Path, size: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip()})")
        mounted.append(path)

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=False)


def remount(path: Path, options: str) -> None:
    """Remount a tmpfs of :func:`mount_tmpfs` with ``options`` (``ro``, ``size=8m``)."""
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)
