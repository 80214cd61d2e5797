"""Freezing a study's evaluation steps: each criterion given by definition becomes a prompt file.

``geval-async steps CONFIG --freeze`` writes, beside the config, one finished prompt file per
criterion given by ``definition``: its form exactly as every item is rendered, steps included,
with only the record fields left as ``{{placeholders}}``. A criterion that reads that file
(``prompt = "..."`` in place of ``task``, ``definition``, ``steps`` and ``template``) sends the
very same requests, so its answers are the cached ones, and the study can be published with its
exact prompts. Nothing else is written: the config is the user's file, comments and all, so
the lines to change in it are printed instead of rewritten (:class:`FrozenPrompt`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .definition import DEFINITION_KEYS
from .plan import PlannedCriterion, Study
from .prompts import parse_template

__all__ = ["FrozenPrompt", "freeze_steps", "frozen_text"]


@dataclass(frozen=True)
class FrozenPrompt:
    """A prompt file written (or found already written) for one criterion."""

    criterion: str
    path: Path
    written: bool  # False: the file held this very text already

    def config_change(self, config: Path) -> str:
        """The edit that makes the criterion read the frozen file, as a line to print."""
        relative = os.path.relpath(self.path, config.resolve().parent)
        return (
            f'[[criteria]] name = "{self.criterion}": remove '
            + ", ".join(DEFINITION_KEYS[:4])
            + f' (and style, steps_temperature, steps_max_tokens if set); add prompt = "{relative}"'
        )


def frozen_text(planned: PlannedCriterion) -> str:
    """The criterion's form as a prompt file: every fixed part filled in, record fields as
    ``{{name}}`` placeholders."""
    parts = planned.template.parts
    return "".join(part if i % 2 == 0 else f"{{{{{part}}}}}" for i, part in enumerate(parts))


def freeze_path(study: Study, planned: PlannedCriterion) -> Path:
    """Where a criterion's frozen prompt goes: ``<config stem>.<criterion>.prompt.txt``."""
    source = study.config.source.resolve()
    return source.with_name(f"{source.stem}.{planned.name}.prompt.txt")


def freeze_steps(study: Study) -> list[FrozenPrompt]:
    """Write the frozen prompt of every criterion given by definition (all or none).

    Raises:
        ConfigError: generated steps are not read yet, a file of another text is in the way,
            or a criterion's text would not read back as the same template.
    """
    plans = []
    for planned in study.criteria:
        if planned.config.definition is None:
            continue
        if planned.steps_pending:
            raise ConfigError(
                f"{study.config.source}: criterion {planned.name!r} has no generated steps yet: "
                f"run `geval-async run {study.config.source}` first"
            )
        text, path = frozen_text(planned), freeze_path(study, planned)
        if parse_template(path, text).parts != planned.template.parts:
            raise ConfigError(
                f"{study.config.source}: criterion {planned.name!r} cannot be frozen: its "
                "definition or steps hold '{{', which a prompt file reads as a placeholder"
            )
        existing = _read(path)
        if existing is not None and existing != text:
            raise ConfigError(
                f"{path}: a different prompt file is in the way of criterion "
                f"{planned.name!r}'s frozen prompt: move it away, then freeze again"
            )
        plans.append((planned.name, path, text, existing is None))
    frozen = []
    for name, path, text, new in plans:
        if new:
            path.write_text(text, encoding="utf-8")
        frozen.append(FrozenPrompt(name, path, new))
    return frozen


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc})") from exc
