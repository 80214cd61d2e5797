"""The shape of the package: stages in their own subpackages, arrows only downhill.

Reads every module's imports (at any depth, lazy and ``TYPE_CHECKING`` ones included) with
``ast`` and checks them against the order of the stages, so a newcomer can trust the tree:
study definition -> judging -> scoring -> meta-evaluation -> the Python API -> the command
line, with the simulated judge apart. Inside a room the same holds module by module: the
import graph of geval_async has no circle, and judging's and scoring's modules import only
their own tier or lower ones (:data:`JUDGING_TIERS`, :data:`SCORING_TIERS`). Scoring never
imports asyncio or aiohttp, and no module reaches into diskcache's or aiolimiter's private
names (their next release may change them without notice).
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Mapping
from pathlib import Path

import aiolimiter.leakybucket
import diskcache.core
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "geval_async"

# Lower layers never import higher ones. The same rank means "may import each other".
LAYERS = {
    "errors": 0,
    "options": 0,
    "study": 1,
    "judging": 2,
    "scoring": 3,
    "meta": 4,
    "api": 5,
    "__init__": 5,
    "cli": 6,
    "__main__": 7,
}
MAX_LINES = 400


def _room(module: Path) -> str:
    parts = module.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _imported_rooms(module: Path) -> set[str]:
    """The top-level rooms of geval_async that ``module`` imports, resolved from relative form."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    package = module.relative_to(PACKAGE).with_suffix("").parts[:-1]
    if module.name == "__init__.py":
        package = module.relative_to(PACKAGE).parts[:-1]
    rooms = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - (node.level - 1)])
                target = base + (node.module.split(".") if node.module else [])
                if not target:  # "from .. import x" at the top: x names the room
                    rooms.update(alias.name for alias in node.names)
                else:
                    rooms.add(target[0])
            elif node.module and node.module.startswith("geval_async."):
                rooms.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("geval_async."):
                    rooms.add(alias.name.split(".")[1])
    return rooms


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_room_is_known() -> None:
    rooms = {_room(m) for m in MODULES}
    assert rooms <= set(LAYERS) | {"sim"}, rooms - set(LAYERS)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: str(m.relative_to(PACKAGE)))
def test_imports_only_go_downhill(module: Path) -> None:
    room = _room(module)
    imported = _imported_rooms(module) - {room, "__version__"}
    if room == "sim":
        # The simulated judge stands apart: it shares nothing with production code but errors.
        assert imported <= {"errors"}, f"{module.name} (sim) imports {sorted(imported)}"
        return
    if room != "cli":
        assert "sim" not in imported, f"{module} imports the simulated judge"
    else:
        imported.discard("sim")  # the `sim` and `demo` commands start it, lazily
    uphill = sorted(r for r in imported if LAYERS.get(r, -1) > LAYERS[room])
    assert not uphill, f"{module.relative_to(PACKAGE)} ({room}) imports higher rooms {uphill}"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: str(m.relative_to(PACKAGE)))
def test_modules_stay_small(module: Path) -> None:
    lines = len(module.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{module.relative_to(PACKAGE)} has {lines} lines: split it"


# --- module by module ------------------------------------------------------------------------


def module_name(module: Path, package: Path = PACKAGE) -> str:
    """``geval_async.judging.cache`` for .../geval_async/judging/cache.py (a package: its name)."""
    parts = list(module.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(module: Path, known: Mapping[str, Path], package: Path = PACKAGE) -> set[str]:
    """The modules of the package (``known``) that ``module`` imports, at any depth:
    ``from x import y`` names module ``x.y`` when that is a module, else ``x``."""
    name = module_name(module, package)
    package = name.split(".") if module.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + (node.module.split(".") if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {target for target in found if target in known and target != name}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Every module of ``package`` -> the package's modules it imports."""
    known = {module_name(path, package): path for path in sorted(package.rglob("*.py"))}
    return {name: imported_modules(path, known, package) for name, path in known.items()}


def circles(graph: Mapping[str, set[str]]) -> list[tuple[list[str], list[str]]]:
    """Each strongly connected group of modules (Tarjan): its modules, and one circle of
    imports through them, from the group's first module back to it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [(sorted(group), _walk_round(sorted(group)[0], group, graph)) for group in groups]


def _walk_round(start: str, group: set[str], graph: Mapping[str, set[str]]) -> list[str]:
    """A shortest path from ``start`` back to itself inside ``group``."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & group):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    return [start, start]


GRAPH = import_graph()

# Inside judging and scoring, lower tiers never import higher ones (the same tier may import
# each other; circles are caught above). A module missing here fails the test: place it.
JUDGING_TIERS = {
    # 0 storage: an entry's bytes, our reader of the rows, our writer of new ones, the form, the
    # errors, the claims' table, the ledger's one path
    "stored": 0, "rows": 0, "schema": 0, "cache_errors": 0, "claim_table": 0, "live_batches": 0,
    "answer_table": 0, "journal": 0,
    "cache_folder": 0,  # is this a cache folder? (the readers' check)
    "head_table": 0,  # every entry's head from one pass, in sorted arrays of digests
    "cache": 1,
    # 2 reading the cache: origin rule, old keys, coverage, the read model, the cache commands
    "origin": 2, "legacy": 2, "coverage": 2, "read_model": 2, "maintenance": 2, "archive": 2,
    "stored_steps": 2,
    # 3 sending: pacer, limits, failures, transport, claims, the writer thread, budget, progress
    "pacer": 3, "limits": 3, "failures": 3, "transport": 3, "entries": 3, "claims": 3, "writer": 3,
    "budget": 3, "probe": 3, "progress": 3, "refused_settings": 3, "capabilities": 3,
    "server_waits": 3,
    "served": 3,  # the model an answer names, against the one asked
    "left": 2,  # what is left to send, decided once
    "feed": 4, "worker": 4, "runner": 4, "steps": 4, "estimate": 4,
    "panel_run": 5,  # a panel's judges, each a run of the runner, at once
    "stage": 6,  # the judge stage's entry points: the cache opened and closed around a run
    "batch": 5,  # the Batch API, and every module of judging/batch/
}  # fmt: skip
SCORING_TIERS = {
    # 0 reading one answer
    "cues": 0, "masks": 0, "verdicts": 0, "distributions": 0, "ratings": 0, "rubrics": 0,
    "thinking": 0,  # on main since the parser merge: the reasoning cut off an answer
    "heap": 0,  # the allocator's free pages given back between score's steps (no imports of ours)
    # 1 the data: scores, readings, tables, tests, judge-vs-human pairs, rendered documents
    "columns": 1,  # item scores held as numbers in arrays (a million items in memory)
    "packed": 1,  # the columns' numbers, each as narrow as its values allow
    "record_heads": 1,  # the records the items name, as codes (the group tables read them)
    "panel_columns": 1,  # a panel's pooled items' own numbers beside them
    "shares": 1,  # invalid samples counted per criterion and condition
    "scores": 1, "readings": 1, "stats": 1, "tables": 1, "human": 1, "report": 1, "plots": 1,
    "trust": 1,  # per-record SE, self-consistency over draws, the n curve
    "alpha": 1, "icc": 1, "judge_pairs": 1, "agreement": 1,  # agreement between judges
    "agreement_view": 1,  # the agreement as the reports show it (Markdown and HTML cells)
    "calibration": 1,  # the judge's scores on the human scale: isotonic, conformal intervals
    "human_scale": 1,  # prediction-powered means and comparisons on the human scale
    "labelled": 1,  # the records' human labels beside the scores, drawn and calibrated
    "human_scale_report": 1,  # the "On the human scale" section's text and rows
    "results": 2,  # the front door for analysis: data, no writer
    "status": 2,  # `status`'s numbers, counted in one walk
    "panel": 1,  # a panel's record scores pooled from its judges'
    "panel_results": 2,  # each judge's results, the panel's, their agreement
    "panel_report": 3,  # the panel's part of its Markdown report
    "html": 3,  # the HTML view: a pure renderer, handed data
    "overwrite_guard": 3,  # scores on disk never replaced by emptier ones
    "outputs": 4,  # the one writer
    "files": 4,  # its files, written whole or not at all
    "human_output": 4,  # the human scale's file and report section, for the writer
}  # fmt: skip
TIERS = {"judging": JUDGING_TIERS, "scoring": SCORING_TIERS}


def tier_of(module: str) -> tuple[str, int] | None:
    """The room and tier of a module of judging or scoring (None: another room)."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in TIERS:
        return None
    tiers = TIERS[parts[1]]
    assert parts[2] in tiers, f"{module}: add it to {parts[1].upper()}_TIERS"
    return parts[1], tiers[parts[2]]


def uphill_arrows(graph: Mapping[str, set[str]]) -> list[str]:
    """Imports from a module of judging or scoring to a higher tier of the same room."""
    arrows = []
    for module in sorted(graph):
        place = tier_of(module)
        if place is None:
            continue
        for target in sorted(graph[module]):
            there = tier_of(target)
            if there is not None and there[0] == place[0] and there[1] > place[1]:
                arrows.append(f"{module} (tier {place[1]}) -> {target} (tier {there[1]})")
    return arrows


def test_no_circle_of_imports_anywhere() -> None:
    found = circles(GRAPH)
    assert not found, "; ".join(
        f"import circle among {', '.join(group)}: {' -> '.join(path)}" for group, path in found
    )


def test_no_uphill_arrow_inside_judging_or_scoring() -> None:
    arrows = uphill_arrows(GRAPH)
    assert not arrows, "uphill inside a room: " + "; ".join(arrows)


def test_scoring_and_meta_read_judging_through_the_read_model_only() -> None:
    """Answers come to scoring through one read model; the study and its plan are below both."""
    reached = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if module.startswith(("geval_async.scoring", "geval_async.meta"))
        for target in targets
        if target.startswith("geval_async.judging") and target != "geval_async.judging.read_model"
    )
    assert not reached, f"scoring or meta reaches into judging: {reached}"


def _third_party(module: Path) -> set[str]:
    """The top-level names of what ``module`` imports from outside the package."""
    names = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
    return names


def test_scoring_never_imports_asyncio_or_aiohttp() -> None:
    """Not itself, nor through any module of the package it imports (the read model too)."""
    reached, todo = set(), [m for m in GRAPH if m.startswith("geval_async.scoring")]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(GRAPH[module])
    paths = {module_name(p): p for p in MODULES}
    async_ones = sorted(
        m for m in reached if _third_party(paths[m]) & {"asyncio", "aiohttp", "aiolimiter"}
    )
    assert not async_ones, f"scoring reaches async modules: {async_ones}"


def _private_names(*libraries: object) -> frozenset[str]:
    """The private attributes and methods the libraries' own code defines (``self._x``)."""
    names = set()
    for library in libraries:
        for node in ast.walk(ast.parse(inspect.getsource(library))):  # type: ignore[arg-type]
            if isinstance(node, ast.FunctionDef):
                name = node.name
            elif isinstance(node, ast.Attribute) and ast.unparse(node.value) == "self":
                name = node.attr
            else:
                continue
            if name.startswith("_") and not name.startswith("__"):
                names.add(name)
    return frozenset(names)


DISKCACHE_PRIVATE = _private_names(diskcache.core)
AIOLIMITER_PRIVATE = _private_names(aiolimiter.leakybucket)
PRIVATE = DISKCACHE_PRIVATE | AIOLIMITER_PRIVATE


def private_uses(module: Path, private: frozenset[str] = PRIVATE) -> list[str]:
    """Where ``module`` uses a private name of diskcache or aiolimiter: ``x._sql`` on anything
    but its own ``self``/``cls``, or diskcache.core's module (its storage constants)."""
    uses = []
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        line = f"{module.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute):
            base = ast.unparse(node.value)
            if node.attr in private and base not in ("self", "cls"):
                uses.append(f"{line} {base}.{node.attr}")
            elif base == "diskcache" and node.attr == "core":
                uses.append(f"{line} diskcache.core")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("diskcache."):
            uses.append(f"{line} from {node.module} import ...")
        elif isinstance(node, ast.Import):
            uses.extend(
                f"{line} import {a.name}"
                for a in node.names
                if "." in a.name and a.name.startswith(("diskcache.", "aiolimiter."))
            )
    return uses


def test_private_names_are_found() -> None:
    """The check below can fail: the names it looks for are the libraries' real ones."""
    assert {"_sql", "_con", "_level", "_rate_per_sec"} <= PRIVATE


def test_no_private_name_of_diskcache() -> None:
    uses = [use for module in MODULES for use in private_uses(module, DISKCACHE_PRIVATE)]
    uses = [use for use in uses if "aiolimiter" not in use]
    assert not uses, "private names of diskcache: " + "; ".join(uses)


def test_no_private_name_of_aiolimiter() -> None:
    uses = [use for module in MODULES for use in private_uses(module, AIOLIMITER_PRIVATE)]
    uses = [use for use in uses if "diskcache" not in use]
    assert not uses, "private names of aiolimiter: " + "; ".join(uses)
