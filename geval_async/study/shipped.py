"""The prompts and example studies that ship with geval-async, in a clone or installed.

In the repository they are top-level folders (``prompts/``, ``examples/``). A wheel carries
copies under ``geval_async/_data/`` (see ``setup.py``), laid out the same way, so an example
config's relative paths (``../../prompts/ueq/...``) hold in both places.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["shipped"]

_PACKAGE = Path(__file__).resolve().parents[1]
# An installed wheel first; then the clone the package is imported from (editable or not).
_PLACES = (_PACKAGE / "_data", _PACKAGE.parent)


def shipped(*parts: str) -> Path:
    """The path of a shipped file or folder, e.g. ``shipped("prompts", "ueq")``.

    Returns the first place that has it, or the clone's path when none does (for an error
    message that names where it was expected).
    """
    for place in _PLACES:
        path = place.joinpath(*parts)
        if path.exists():
            return path
    return _PACKAGE.parent.joinpath(*parts)
