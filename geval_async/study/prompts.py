"""Prompt templates: a criterion's template file -> the judge's messages for one record.

A template holds ``{{name}}`` placeholders (or, with ``style = "format"``, the single-brace
``{name}`` parts of Python's str.format that the OpenAI cookbook's G-Eval recipe uses, where
``{{`` and ``}}`` are literal braces). Each is filled with the text of the record field the
criterion maps it to, or with one of the criterion's fixed parts. Filling is a single pass
over the template's own parts, so record text is inserted literally: braces or ``{{...}}``
inside a record are never interpreted. A placeholder the criterion has no field for is a
:class:`~geval_async.errors.ConfigError` at plan time.

Write templates with the fixed criterion text first and the judged text last: providers cache
identical prompt prefixes, so requests that share one are cheaper and faster.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..options import TemplateStyle
from .input_files import file_problem

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

    def fill(self, values: Mapping[str, Any]) -> Template:
        """A template with the placeholders named in ``values`` replaced by literal text."""
        parts: list[str] = [self.parts[0]]
        for i in range(1, len(self.parts), 2):
            name, after = self.parts[i], self.parts[i + 1]
            if name in values:
                parts[-1] += field_text(values[name]) + after
            else:
                parts += [name, after]
        return Template(self.source, tuple(parts))

    def render(self, values: Mapping[str, Any]) -> str:
        """Fill every placeholder with ``str(values[name])``, literally."""
        out = list(self.parts)
        for i in range(1, len(out), 2):
            value = values[out[i]]
            out[i] = value if type(value) is str else field_text(value)  # text mostly: no call
        return "".join(out)


def field_text(value: Any) -> str:
    """A record field's value as a template inserts it."""
    # Integral floats print as "3", not "3.0", the way a person would write them in a prompt.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def load_template(path: Path, style: TemplateStyle = TemplateStyle.DOUBLE) -> Template:
    """Read and parse a template file (``style`` "double": ``{{name}}``; "format": ``{name}``).

    Raises:
        ConfigError: the file is missing, unreadable or has no text.
    """
    problem = file_problem(path)  # a FIFO would block the open, a device never end
    if problem is not None:
        raise ConfigError(f"{path}: prompt file {problem}")
    try:
        # utf-8-sig: a byte order mark (Windows editors save one) is not the prompt's text.
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{path}: prompt file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the prompt file ({exc})") from exc
    if not text.strip():
        raise ConfigError(f"{path}: the prompt file is empty")
    return parse_template(path, text, style)


def parse_template(path: Path, text: str, style: TemplateStyle = TemplateStyle.DOUBLE) -> Template:
    """Parse a template's text (``path``: where it is, or will be, read from)."""
    if style == TemplateStyle.FORMAT:
        return Template(path, _format_parts(path, text))
    return Template(path, tuple(_PLACEHOLDER.split(text)))


def _format_parts(path: Path, text: str) -> tuple[str, ...]:
    parts = [""]
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ConfigError(f"{path}: not a valid str.format template ({exc})") from exc
    for literal, name, spec, conversion in parsed:
        parts[-1] += literal
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise ConfigError(
                f"{path}: placeholder {{{name}}} must be a plain name like {{document}} "
                "(no positions, attributes or format specs)"
            )
        parts += [name, ""]
    return tuple(parts)


def check_fields(template: Template, fields: Mapping[str, str], criterion: str) -> None:
    """Raise ConfigError naming the first placeholder that has no record field."""
    for name in template.placeholders:
        if name not in fields:
            raise ConfigError(
                f"{template.source}: placeholder {{{{{name}}}}} has no record field: add "
                f"{name!r} to 'fields' (or 'parts') of criterion {criterion!r}"
            )


def stray_braces(template: Template, style: TemplateStyle = TemplateStyle.DOUBLE) -> str | None:
    """A warning when a ``{{``/``}}`` template has braces outside its placeholders, else None.

    ``{{ document}`` or ``{{doc-text}}`` is no placeholder (``{{name}}`` with a plain name is):
    it would be sent to the judge as written, in every request, instead of the record's text.
    ``style = "format"`` has none to warn of: its ``{{``/``}}`` are literal braces by design.
    Call on the template as loaded, before parts are filled (a part's text is not the file's).
    """
    if style != TemplateStyle.DOUBLE:
        return None
    for literal in template.parts[0::2]:
        for brace in ("{{", "}}"):
            at = literal.find(brace)
            if at < 0:
                continue
            line = literal[max(0, at - 20) : at + 22].replace("\n", " ").strip()
            return (
                f"{template.source}: a stray {brace!r} that is not part of a {{{{name}}}} "
                f"placeholder (near {line!r}) is sent to the judge as written: fix the "
                "placeholder's spelling (letters, digits and _ inside {{ }}), or remove it"
            )
    return None
