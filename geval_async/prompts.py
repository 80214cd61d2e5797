"""Prompt templates: a criterion's template file -> the judge's messages for one record.

A template holds ``{{name}}`` placeholders. Each is filled with the text of the record field the
criterion maps it to. Filling is a single pass over the template's own parts, so record text is
inserted literally: braces or ``{{...}}`` inside a record are never interpreted. A placeholder
the criterion has no field for is a :class:`~geval_async.errors.ConfigError` at plan time.

Write templates with the fixed criterion text first and the judged text last: providers cache
identical prompt prefixes, so requests that share one are cheaper and faster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Template:
    """A parsed template: literal text alternating with placeholder names.

    ``parts[0::2]`` are literals, ``parts[1::2]`` placeholder names.
    """

    source: Path
    parts: tuple[str, ...]

    @property
    def placeholders(self) -> tuple[str, ...]:
        """The placeholder names in order of appearance (repeats kept)."""
        return self.parts[1::2]

    def render(self, values: Mapping[str, Any]) -> str:
        """Fill every placeholder with ``str(values[name])``, literally."""
        out = list(self.parts)
        for i in range(1, len(out), 2):
            out[i] = _text(values[out[i]])
        return "".join(out)


def _text(value: Any) -> str:
    # Integral floats print as "3", not "3.0", the way a person would write them in a prompt.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def load_template(path: Path) -> Template:
    """Read and parse a template file.

    Raises:
        ConfigError: the file is missing, unreadable or has no text.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: prompt file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the prompt file ({exc})") from exc
    if not text.strip():
        raise ConfigError(f"{path}: the prompt file is empty")
    return Template(path, tuple(_PLACEHOLDER.split(text)))


def check_fields(template: Template, fields: Mapping[str, str], criterion: str) -> None:
    """Raise ConfigError naming the first placeholder that has no record field."""
    for name in template.placeholders:
        if name not in fields:
            raise ConfigError(
                f"{template.source}: placeholder {{{{{name}}}}} has no record field: add "
                f"{name!r} to 'fields' of criterion {criterion!r}"
            )
