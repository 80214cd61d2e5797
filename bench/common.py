"""What every benchmark shares: the simulated judge in its own process, a synthetic study on
disk, child processes for the contenders, and the small table each script prints.

Each contender runs in a fresh child process (``bench/clients.py``) so its wall time, CPU
seconds and peak RSS are its own; the simulated judge runs in another process, so client and
server do not share an event loop (the machine may still share its cores between them, which is
why the benchmarks report ratios of contenders measured in the same run).
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
PYTHON = sys.executable
S = TypeVar("S")  # a store a benchmark times (cost_by_group)

# G-Eval-style prompts (SummEval: a source document and its summary), written for the benchmarks.
PROMPTS = {
    "coh": (
        "Coherence",
        5,
        """You will be given one summary written for a news article.

Your task is to rate the summary on one metric.

Evaluation Criteria:
Coherence (1-5) - the collective quality of all sentences. The summary should be
well-structured and well-organized, building from sentence to sentence to a coherent body of
information about a topic.

Evaluation Steps:
1. Read the news article carefully and identify the main topic and key points.
2. Read the summary and compare it to the news article.
3. Assign a score for coherence on a scale of 1 to 5.

Source Text:
{{document}}

Summary:
{{summary}}

Evaluation Form (scores ONLY):
- Coherence (1-5):""",
    ),
    "con": (
        "Consistency",
        5,
        """You will be given a news article and a summary of it.

Your task is to rate the summary on one metric.

Evaluation Criteria:
Consistency (1-5) - the factual alignment between the summary and the source. A consistent
summary contains only statements that are entailed by the source document.

Evaluation Steps:
1. Read the news article carefully and identify the main facts and details it presents.
2. Read the summary and check whether it contains any factual errors.
3. Assign a score for consistency on a scale of 1 to 5.

Source Text:
{{document}}

Summary:
{{summary}}

Evaluation Form (scores ONLY):
- Consistency (1-5):""",
    ),
    "flu": (
        "Fluency",
        3,
        """You will be given one summary written for a news article.

Your task is to rate the summary on one metric.

Evaluation Criteria:
Fluency (1-3): the quality of the summary in terms of grammar, spelling, punctuation, word
choice and sentence structure.

Summary:
{{summary}}

Evaluation Form (scores ONLY):
- Fluency (1-3):""",
    ),
    "rel": (
        "Relevance",
        5,
        """You will be given one summary written for a news article.

Your task is to rate the summary on one metric.

Evaluation Criteria:
Relevance (1-5) - selection of important content from the source. The summary should include
only important information from the source document.

Evaluation Steps:
1. Read the summary and the source document carefully.
2. Compare the summary to the source document and identify its main points.
3. Assign a relevance score from 1 to 5.

Source Text:
{{document}}

Summary:
{{summary}}

Evaluation Form (scores ONLY):
- Relevance (1-5):""",
    ),
}
TINY_PROMPT = "Rate the {name} of the text (1-5).\n\n{{{{summary}}}}\n\nScore (1-5):"
_TEXT = (
    "the council said on monday that new rules for river water would apply from next year after "
    "months of talks with farmers town officials and a group of residents who had asked for "
    "clear limits on what may be pumped into the stream during dry summer weeks while others "
    "argued the plan came too late"
)
_WORDS = _TEXT.split(" ")


def revision() -> str:
    """The git commit measured, with "+dirty" when the working tree differs from it."""

    def git(*args: str) -> str:
        run = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return run.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("+dirty" if git("status", "--porcelain", "--", "geval_async") else "")


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


# --- the simulated judge ---------------------------------------------------------------------


class SimProcess:
    """``python -m geval_async sim --port 0 ...`` in its own process; use as a context manager."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.process: subprocess.Popen[str] | None = None
        self.root_url = ""

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def command(self) -> list[str]:
        return [PYTHON, "-m", "geval_async", "sim", "--port", "0"]

    def __enter__(self) -> SimProcess:
        args = self.command()
        for name, value in self.settings.items():
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                args += [flag] if value else []
            elif value is not None:
                args += [flag, str(value)]
        self.process = subprocess.Popen(
            args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        found = re.search(r"listening on (http://\S+?)/v1", line)
        if found is None:
            self.process.kill()
            raise RuntimeError(f"the simulated judge did not start: {line!r}")
        self.root_url = found.group(1)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

    def _call(self, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.root_url + path, data=data, method="GET" if data is None else "POST"
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def cpu_seconds(self) -> float | None:
        """CPU seconds the server process has used so far (Linux /proc; None elsewhere)."""
        try:
            assert self.process is not None
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, AssertionError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stats(self) -> dict[str, Any]:
        """The server's counts, without the per-body ``answered`` table (large on big runs)."""
        stats = self._call("/sim/stats")
        answered = stats.pop("answered")
        stats["distinct_answered"] = len(answered)
        stats["answered"] = sum(answered.values())
        return stats


class StubProcess(SimProcess):
    """``python bench/stub.py`` (the independent fixed-body server) in its own process."""

    def __init__(self, work_us: float = 0.0, **settings: Any) -> None:
        super().__init__(**settings)
        self.work_us = work_us

    def command(self) -> list[str]:
        work = ["--work-us", str(self.work_us)] if self.work_us else []
        return [PYTHON, str(BENCH / "stub.py"), "--port", "0", *work]

    def stats(self) -> dict[str, Any]:
        return self._call("/stats")


def server(kind: str, **settings: Any) -> SimProcess:
    """The project's simulated judge (``sim``) or the independent stub (``stub``).

    ``stub+W`` is the stub spending W microseconds of CPU on each request (``--work-us``).
    """
    if kind == "stub" or kind.startswith("stub+"):
        work = float(kind.partition("+")[2] or 0)
        return StubProcess(work_us=work, **settings)
    return SimProcess(**settings)


def server_429s(stats: dict[str, Any]) -> int:
    return int(stats["by_status"].get("429", 0))


# --- a synthetic study -----------------------------------------------------------------------


@dataclass
class StudyFiles:
    folder: Path
    config: Path
    cache: Path
    records: int
    criteria: tuple[str, ...]

    @property
    def requests(self) -> int:
        return self.records * len(self.criteria)


def write_study(
    folder: Path,
    records: int,
    *,
    criteria: Sequence[str] = ("coh", "con", "flu", "rel"),
    n: int = 10,
    max_tokens: int = 5,
    document_words: int = 180,
    summary_words: int = 45,
    tiny: bool = False,
    limits: dict[str, Any] | None = None,
    base_url: str = "http://127.0.0.1:9/v1",
    seed: int = 7,
) -> StudyFiles:
    """Write records, prompts and config.toml for a study of ``records`` x ``criteria``.

    Every record's text is distinct (a number is part of it), so every request has its own key.
    ``tiny`` makes one-line records and a one-line prompt (the memory benchmark).
    """
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    (folder / "prompts").mkdir(exist_ok=True)
    for name, (_, _, text) in PROMPTS.items():
        (folder / "prompts" / f"{name}.txt").write_text(
            TINY_PROMPT.format(name=name) if tiny else text
        )
    with (folder / "records.jsonl").open("w") as out:
        for i in range(records):
            if tiny:
                row = {
                    "id": f"r{i}",
                    "g": f"g{i % 50}",
                    "c": "AB"[i % 2],
                    "summary": f"t{i}",
                    "document": "",
                }
            else:
                document = " ".join(rng.choice(_WORDS) for _ in range(document_words))
                summary = " ".join(rng.choice(_WORDS) for _ in range(summary_words))
                row = {
                    "id": f"r{i}",
                    "g": f"g{i // 2}",
                    "c": "AB"[i % 2],
                    "document": f"Article {i}. {document}.",
                    "summary": f"{summary}.",
                }
            out.write(json.dumps(row) + "\n")
    lines = [
        "[data]",
        'path = "records.jsonl"',
        'id = "id"',
        'group = "g"',
        'condition = "c"',
        "",
        "[judge]",
        'model = "sim-judge"',
        f"base_url = {json.dumps(base_url)}",
        "",
        "[sampling]",
        'mode = "samples"',
        f"n = {n}",
        f"max_tokens = {max_tokens}",
        "",
        "[limits]",
        *(f"{k} = {json.dumps(v)}" for k, v in (limits or {}).items()),
        "",
        "[cache]",
        'path = "cache"',
        "",
        "[output]",
        'path = "out"',
        'prefix = "bench"',
        "",
        "[stats]",
        'conditions = ["A", "B"]',
        "",
    ]
    for name in criteria:
        display, top, text = PROMPTS[name]
        fields = ["summary"] if tiny or "{{document}}" not in text else ["document", "summary"]
        lines += [
            "[[criteria]]",
            f'name = "{name}"',
            f'display_name = "{display}"',
            f'prompt = "prompts/{name}.txt"',
            f"scale = [1, {top}]",
            f"fields = {json.dumps(fields)}",
            "",
        ]
    config = folder / "config.toml"
    config.write_text("\n".join(lines))
    return StudyFiles(folder, config, folder / "cache", records, tuple(criteria))


def plan_bodies(config: Path, out: Path) -> dict[str, Any]:
    """Write the plan's request bodies (one JSON per line) as geval-async would send them.

    Returns the plan's size and its token cost as the server counts it (prompt tokens plus
    ``max_tokens x n``), in total and per criterion in plan order (``phases``).
    """
    import orjson

    from geval_async.sim.limits import prompt_tokens
    from geval_async.study.config import load_config
    from geval_async.study.plan import first_request, plan_items
    from geval_async.study.prepare import prepare_study

    study = prepare_study(load_config(config))
    phases: dict[str, dict[str, int]] = {}
    with out.open("wb") as handle:
        for item in plan_items(study):
            body = first_request(item, study.config).body
            handle.write(orjson.dumps(body) + b"\n")
            phase = phases.setdefault(item.criterion.name, {"requests": 0, "tokens": 0})
            phase["requests"] += 1
            phase["tokens"] += prompt_tokens(body["messages"]) + body["max_tokens"] * body["n"]
    return {
        "requests": sum(p["requests"] for p in phases.values()),
        "tokens": sum(p["tokens"] for p in phases.values()),
        "phases": phases,
    }


def bounds(plan: dict[str, Any], rpm: float, tpm: float) -> tuple[float, float]:
    """Seconds the limits allow at best: for the plan as a whole, and sent in plan order.

    The plan goes criterion by criterion; when criteria differ in prompt size, one limit binds
    in some criteria and the other elsewhere, so a client sending in plan order needs the sum of
    the per-criterion bounds, a little more than the whole plan's bound.
    """

    def bound(requests: float, tokens: float) -> float:
        return max(requests / rpm, tokens / tpm) * 60

    whole = bound(plan["requests"], plan["tokens"])
    in_order = sum(bound(p["requests"], p["tokens"]) for p in plan["phases"].values())
    return whole, in_order


# --- contenders in child processes ------------------------------------------------------------


@dataclass
class ChildRun:
    returncode: int
    wall: float
    cpu: float
    maxrss_mb: float
    stdout: str
    stderr: str
    rss_samples: list[tuple[float, float]] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        """The JSON line a ``bench/clients.py`` contender printed last."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("{"):
                return json.loads(line)  # type: ignore[no-any-return]
        raise RuntimeError(
            f"no report from the client (exit {self.returncode}):\n"
            f"{self.stdout[-2000:]}\n{self.stderr[-4000:]}"
        )


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def add_baseline(parser: Any, help: str) -> None:
    """The ``--baseline [NAME=]FOLDER`` option (any number of them), read by
    :func:`baseline_trees`."""
    parser.add_argument(
        "--baseline", metavar="[NAME=]FOLDER", action="append", default=[], help=help
    )


def baseline_trees(parser: Any, values: Sequence[str]) -> dict[str, str]:
    """The ``--baseline [NAME=]FOLDER`` options of a benchmark: NAME (default ``baseline``) ->
    the folder holding that tree's ``geval_async`` package, resolved; a NAME given twice or a
    folder without the package is a usage error (``parser.error``: exit 2)."""
    trees: dict[str, str] = {}
    for value in values:
        name, _, folder = value.rpartition("=")
        name = name or "baseline"
        if name in trees or not (Path(folder) / "geval_async" / "__init__.py").is_file():
            parser.error(
                f"--baseline {value}: give NAME=FOLDER, a NAME of its own and a FOLDER that "
                "holds a geval_async package"
            )
        trees[name] = str(Path(folder).resolve())
    return trees


def run_child(
    args: Sequence[str],
    *,
    timeout: float = 3600,
    env: dict[str, str] | None = None,
    rss_every: float | None = None,
) -> ChildRun:
    """Run a command; its own wall time, CPU seconds and peak RSS (``os.wait4`` on its pid).

    The command is started by ``bench/launch.py``, a fresh interpreter it is forked from:
    spawned from this process, its peak RSS would count this process's memory too (see
    there). With ``rss_every`` the command's resident set is sampled that often
    (``rss_samples``).
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        read_end, write_end = os.pipe()
        launcher = subprocess.Popen(
            [PYTHON, "-S", str(BENCH / "launch.py"), str(write_end), *args],
            cwd=ROOT,
            stdout=out,
            stderr=err,
            env={**os.environ, **(env or {})},
            pass_fds=(write_end,),
        )
        os.close(write_end)
        with os.fdopen(read_end) as reports:
            forked = reports.readline()
            if not forked:
                launcher.wait()
                err.seek(0)
                raise RuntimeError(f"bench/launch.py failed: {err.read()}")
            pid = json.loads(forked)["pid"]
            started = time.perf_counter()
            deadline = started + timeout
            samples: list[tuple[float, float]] = []
            next_sample = started
            while launcher.poll() is None:
                now = time.perf_counter()
                if now > deadline:
                    os.kill(pid, signal.SIGKILL)
                    launcher.wait()
                    break
                if rss_every is not None and now >= next_sample:
                    rss = _rss_mb(pid)
                    if rss is not None:
                        samples.append((round(now - started, 2), round(rss, 1)))
                    next_sample = now + rss_every
                time.sleep(0.02)
            ended = json.loads(reports.readline())
        out.seek(0)
        err.seek(0)
        return ChildRun(
            os.waitstatus_to_exitcode(ended["status"]),
            ended["wall"],
            ended["cpu"],
            ended["maxrss_kb"] / 1024,
            out.read(),
            err.read(),
            samples,
        )


def client(name: str, **spec: Any) -> list[str]:
    """The command that runs contender ``name`` of bench/clients.py with ``spec``."""
    return [PYTHON, str(BENCH / "clients.py"), name, json.dumps(spec, default=str)]


def self_usage() -> tuple[float, float]:
    """(CPU seconds, peak RSS in MB) of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def cost_by_group(
    groups: Sequence[int],
    count: int,
    unit: str,
    open_store: Callable[[Path], AbstractContextManager[S]],
    drive: Callable[[S, int], None],
    *,
    check: Callable[[S], None] | None = None,
    plural: str = "",
) -> list[dict[str, Any]]:
    """What one store operation costs per unit, at each group size: for each of ``groups`` a
    fresh store in a temporary folder (``open_store(folder)``), ``drive(store, group)`` doing
    the ``count`` units in groups of that size, timed (CPU and wall), then ``check(store)``
    outside the clock. One row a group: ``group``, the count (``plural``, or ``{unit}s``),
    ``cpu_us_per_{unit}`` and ``wall_us_per_{unit}``."""
    rows = []
    for group in groups:
        with tempfile.TemporaryDirectory() as folder, open_store(Path(folder)) as store:
            cpu, wall = self_usage()[0], time.perf_counter()
            drive(store, group)
            wall, cpu = time.perf_counter() - wall, self_usage()[0] - cpu
            if check is not None:
                check(store)
        rows.append(
            {
                "group": group,
                plural or f"{unit}s": count,
                f"cpu_us_per_{unit}": 1e6 * cpu / count,
                f"wall_us_per_{unit}": 1e6 * wall / count,
            }
        )
    return rows


# --- output -----------------------------------------------------------------------------------


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A plain text table of ``rows`` (dicts) restricted to ``columns``."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
        return "" if value is None else str(value)

    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def results_path(name: str, quick: bool) -> Path:
    """bench/results/NAME.json, or NAME.quick.json for a smoke run (kept apart)."""
    return RESULTS / f"{name}{'.quick' if quick else ''}.json"


def save(name: str, payload: dict[str, Any]) -> Path:
    """Write the results of benchmark NAME (with the machine, revision and command line)."""
    RESULTS.mkdir(exist_ok=True)
    path = results_path(name, "--quick" in sys.argv[1:])
    payload = {
        "benchmark": name,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": machine(),
        "revision": revision(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "load_average": os.getloadavg(),
        **payload,
    }
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path


@contextmanager
def workdir(prefix: str) -> Iterator[Path]:
    """A temporary folder for one benchmark's studies and caches."""
    with tempfile.TemporaryDirectory(prefix=f"geval-bench-{prefix}-") as folder:
        yield Path(folder)


def judged_study(folder: Path, records: int, *, concurrency: int) -> StudyFiles:
    """A study of ``records`` records (n = 10) whose cache the simulated judge has filled."""
    study = write_study(folder, records, n=10)
    with SimProcess() as sim:
        fill = run_child(
            client(
                "geval",
                config=study.config,
                base_url=sim.base_url,
                cache=study.cache,
                concurrency=concurrency,
            )
        ).report()
    assert fill["complete"], fill
    return study
