"""The shape of the package: stages in their own subpackages, arrows only downhill.

Reads every module's imports (at any depth, lazy ones included) with ``ast`` and checks them
against the order of the stages, so a newcomer can trust the tree: study definition -> judging
-> scoring -> meta-evaluation -> the Python API -> the command line, with the simulated judge
apart.
"""

from __future__ import annotations

import ast
from pathlib import Path

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
