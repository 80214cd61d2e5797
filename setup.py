"""Packaging beyond what pyproject.toml can say: the wheel carries prompts/ and examples/.

They stay top-level folders of the repository, and a wheel installs them as
``geval_async/_data/prompts`` and ``geval_async/_data/examples`` (found by
:func:`geval_async.study.shipped.shipped`), so ``pip install .`` gives the shipped prompts and
a ``geval-async demo`` that runs from any folder. Everything else is in pyproject.toml.
"""

from setuptools import find_namespace_packages, find_packages, setup

# Each shipped folder, and the files of it a wheel carries (no scripts, no local outputs).
SHIPPED = {"prompts": ["*.txt"], "examples": ["*.toml", "*.jsonl", "*.md"]}
LOCAL = ["cache", "out", "*.cache", "*.out", "*.cache.*", "*.out.*"]


def _shipped_packages() -> dict[str, list[str]]:
    """``geval_async._data.<folder>[.<subfolder>...]`` -> its file patterns."""
    packages = {}
    for folder, patterns in SHIPPED.items():
        base = f"geval_async._data.{folder}"
        packages[base] = patterns
        for sub in find_namespace_packages(where=folder, exclude=LOCAL):
            packages[f"{base}.{sub}"] = patterns
    return packages


shipped = _shipped_packages()
setup(
    packages=[*find_packages(include=["geval_async", "geval_async.*"]), *shipped],
    package_dir={f"geval_async._data.{folder}": folder for folder in SHIPPED},
    # All package data is declared here: a [tool.setuptools.package-data] table in
    # pyproject.toml would replace this argument, and the wheel would lose prompts/ and examples/.
    package_data={**shipped, "geval_async.scoring.output.html": ["templates/*"]},
)
