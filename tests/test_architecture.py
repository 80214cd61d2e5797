"""The shape of the package: stages in their own subpackages, arrows only downhill.

Reads every module's imports (at any depth, lazy and ``TYPE_CHECKING`` ones included) with
``ast`` and checks them against the order of the stages, so a newcomer can trust the tree:
study definition -> judging -> scoring -> meta-evaluation -> the Python API -> the command
line, with the simulated judge apart. Inside the judge and scoring stages the same holds room
by room (:data:`ROOMS`: judging's store, wire, run and batch; scoring's reading, stats,
scores, panel and output), and the import graph of geval_async has no circle. Scoring never
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
    "notebook": 6,
    "__main__": 7,
}


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


# --- module by module ------------------------------------------------------------------------


def module_name(module: Path, package: Path = PACKAGE) -> str:
    """``geval_async.judging.store.cache`` for .../geval_async/judging/store/cache.py (a package:
    its name)."""
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

# The rooms inside the judge and scoring stages, in their order: a room imports only rooms of
# its own rank or lower ones. The judge stage: the cache folder, one request to one endpoint, a
# run of the worker pool, the Batch API. The scoring stage: one answer to one rating and the
# statistics on plain numbers, then scores, a panel's pooled scores, the outputs.
ROOMS = {
    "judging": {"store": 0, "wire": 1, "run": 2, "batch": 3},
    "scoring": {"reading": 0, "stats": 0, "scores": 1, "panel": 2, "output": 3},
}


def room_of(module: str) -> tuple[str, int] | None:
    """The stage and rank of a module inside judging's or scoring's rooms (None: elsewhere)."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in ROOMS:
        return None
    rooms = ROOMS[parts[1]]
    assert parts[2] in rooms, f"{module}: every module of {parts[1]} lives in one of {rooms}"
    return parts[1], rooms[parts[2]]


def uphill_arrows(graph: Mapping[str, set[str]]) -> list[str]:
    """Imports from a room of judging or scoring to a higher room of the same stage."""
    arrows = []
    for module in sorted(graph):
        place = room_of(module)
        if place is None:
            continue
        for target in sorted(graph[module]):
            there = room_of(target)
            if there is not None and there[0] == place[0] and there[1] > place[1]:
                arrows.append(f"{module} -> {target}")
    return arrows


def test_the_rooms_are_the_folders() -> None:
    """The rooms named above are exactly the judge and scoring stages' subpackages."""
    for stage, rooms in ROOMS.items():
        folders = {p.parent.name for p in (PACKAGE / stage).glob("*/__init__.py")}
        assert folders == set(rooms), f"{stage}: folders {sorted(folders)}, rooms {sorted(rooms)}"
        loose = [p.name for p in (PACKAGE / stage).glob("*.py") if p.name != "__init__.py"]
        assert not loose, f"{stage}: modules outside its rooms: {loose}"


def test_no_circle_of_imports_anywhere() -> None:
    found = circles(GRAPH)
    assert not found, "; ".join(
        f"import circle among {', '.join(group)}: {' -> '.join(path)}" for group, path in found
    )


def test_no_uphill_arrow_inside_judging_or_scoring() -> None:
    arrows = uphill_arrows(GRAPH)
    assert not arrows, "uphill between rooms: " + "; ".join(arrows)


def test_scoring_and_meta_read_judging_through_the_read_model_only() -> None:
    """Answers come to scoring through one read model; the study and its plan are below both."""
    reached = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if module.startswith(("geval_async.scoring", "geval_async.meta"))
        for target in targets
        if target.startswith("geval_async.judging")
        and target != "geval_async.judging.store.read_model"
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


def test_the_public_api_fits_in_a_head() -> None:
    """A notebook user's names: judge, load and report results, meta-evaluate, the results
    types and the errors they catch; each one resolves, and nothing else is listed."""
    import geval_async

    assert len(geval_async.__all__) <= 15, geval_async.__all__
    for name in geval_async.__all__:
        assert getattr(geval_async, name) is not None
    assert "JudgeCache" not in geval_async.__all__ and "run_study" not in geval_async.__all__
