"""What of a study's settings goes into its output files' names, and how it is kept inside
the output folder.

Every output file is named ``<prefix>_<name>`` under ``[output] path`` (see
:mod:`geval_async.scoring.output.writer`). The prefix is the user's text, so it is checked when the
config is read (:func:`is_file_name_part`); a setting that varies the names, such as a
``--model`` other than the config's, is made safe to put in one (:func:`file_name_text`).
"""

from __future__ import annotations

import re

__all__ = ["file_name_text", "is_file_name_part"]

# What a model name may keep in a file name; anything else ("/", ":", spaces) becomes "-".
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def is_file_name_part(text: str) -> bool:
    """Whether ``text`` can begin a file name inside a folder and name nothing outside it:
    not empty, no separator or drive colon, no ``..``, no leading dot, no control character."""
    return (
        bool(text.strip())
        and not text.startswith(".")
        and ".." not in text
        and not any(c in text for c in "/\\:")
        and all(c.isprintable() for c in text)
    )


def file_name_text(text: str) -> str:
    """``text`` (a model name, say) as a part of a file name: ``meta-llama/Llama-3:8b`` ->
    ``meta-llama-Llama-3-8b``; letters, digits, ``.``, ``_`` and ``-`` are kept."""
    return _UNSAFE.sub("-", text).replace("..", "-").strip("-.") or "x"
