"""A criterion given by its definition: G-Eval's form rendered from a task and a criterion.

Instead of a finished prompt file, a ``[[criteria]]`` table may give the task introduction
(``task``), the criterion's text (``definition``) and its scale, with ``steps = "generate"``
(the judge writes the evaluation steps once, :mod:`geval_async.study.steps`) or the steps
written out. A template renders G-Eval's form from them: the shipped
``prompts/geval/form.txt`` unless ``template`` names the user's own. Its placeholders are
``{{task}}``, ``{{metric_name}}``, ``{{scale}}`` ("1-5"), ``{{definition}}``, ``{{steps}}`` and
``{{record}}``, which becomes one "Heading:" paragraph per record field the criterion lists
(``source_text`` -> "Source Text:", then the field's text).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..options import StepsOrigin
from .prompts import Template
from .reader import TableReader
from .shipped import shipped

__all__ = [
    "DEFINITION_KEYS",
    "GENERATE",
    "Definition",
    "Steps",
    "expand_record",
    "parse_definition",
    "steps_in_prompt",
]

GENERATE = "generate"
# The keys that belong to a criterion given by definition (``prompt`` is for the others).
DEFINITION_KEYS = (
    "task",
    "definition",
    "steps",
    "template",
    "steps_temperature",
    "steps_max_tokens",
)
_STEPS_MARKER = "evaluation steps:"


@dataclass(frozen=True)
class Definition:
    """What a criterion given by definition says: task, criterion text and steps.

    ``steps`` is None when the judge generates them (``steps = "generate"``), asked once at
    ``temperature`` with at most ``max_tokens``.
    """

    task: str
    text: str
    steps: str | None
    temperature: float = 0.0
    max_tokens: int = 512


@dataclass(frozen=True)
class Steps:
    """A criterion's evaluation steps as used, and where they came from.

    ``text`` is None while generated steps are not read from the cache yet; ``key`` and
    ``time`` are the cache entry's for generated ones; ``source`` the prompt file they are in.
    """

    origin: StepsOrigin
    text: str | None
    key: str | None = None
    time: float | None = None
    source: Path | None = None


def form_template() -> Path:
    """The shipped template of G-Eval's form."""
    return shipped("prompts", "geval", "form.txt")


def parse_definition(
    t: TableReader, resolve: Callable[[str], Path], rated: bool
) -> tuple[Definition, Path] | None:
    """The definition of a ``[[criteria]]`` table and its form template; None when it has a
    ``prompt`` file instead. Raises ConfigError naming the key to fix."""
    given = [key for key in DEFINITION_KEYS if key in t.table]
    if "definition" not in t.table:
        if given:
            raise t.error(
                f"{given[0]!r} belongs to a criterion given by 'definition' (with 'task' and "
                "'steps'); add them, or remove it"
            )
        return None
    if "prompt" in t.table:
        raise t.error(
            "give either 'prompt' (a finished prompt file) or 'definition' (with 'task' and "
            "'steps'), not both"
        )
    if not rated:
        raise t.error("'definition' is for rated criteria (kind = 'geval' or 'likert')")
    text = _text(t, "definition")
    task = _text(t, "task")
    steps = _text(t, "steps")
    if steps == GENERATE:
        generated = None
    elif steps.lower() == GENERATE:
        raise t.error(f"'steps' = {steps!r}: write \"generate\" (lower case) or the steps")
    else:
        generated = steps
    for key in ("steps_temperature", "steps_max_tokens"):
        if generated is not None and key in t.table:
            raise t.error(f'{key!r} applies to steps = "generate" only')
    temperature = float(t.get("steps_temperature", (int, float), 0.0))
    if not 0 <= temperature <= 2:
        raise t.error("'steps_temperature' must be between 0 and 2")
    definition = Definition(
        task=task,
        text=text,
        steps=generated,
        temperature=temperature,
        max_tokens=t.positive("steps_max_tokens", 512, integer=True),
    )
    template = resolve(t.get("template", str)) if "template" in t.table else form_template()
    if not template.is_file():
        raise t.error(f"template file {template} not found")
    return definition, template


def _text(t: TableReader, key: str) -> str:
    value = t.get(key, str)
    if value is None or not value.strip():
        raise t.error(f"{key!r} is required (non-empty text) for a criterion given by definition")
    return value.strip()


def heading(placeholder: str) -> str:
    """The heading a record field gets in ``{{record}}``: ``source_text`` -> "Source Text"."""
    return " ".join(word[:1].upper() + word[1:] for word in placeholder.split("_") if word)


def expand_record(template: Template, fields: Mapping[str, str]) -> Template:
    """``template`` with each ``{{record}}`` made one paragraph per field placeholder."""
    if "record" in fields or "record" not in template.placeholders:
        return template
    names = list(fields)
    parts = [template.parts[0]]
    for i in range(1, len(template.parts), 2):
        name, after = template.parts[i], template.parts[i + 1]
        if name != "record":
            parts += [name, after]
            continue
        for number, field_name in enumerate(names):
            parts[-1] += ("\n\n" if number else "") + f"{heading(field_name)}:\n\n"
            parts += [field_name, ""]
        parts[-1] += after
    return Template(template.source, tuple(parts))


def steps_in_prompt(text: str) -> str | None:
    """The steps a finished prompt file holds: the lines after "Evaluation Steps:" up to the
    next heading (a line ending with ":"), or None when it has no such section."""
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if line.strip().lower() == _STEPS_MARKER:
            steps: list[str] = []
            for after in lines[number + 1 :]:
                if after.strip().endswith(":") and steps:
                    break
                steps.append(after)
            found = "\n".join(steps).strip()
            return found or None
    return None
