"""Generated evaluation steps: the one request per criterion, and the study once they are read.

G-Eval's "auto chain of thought": from the task introduction and the criterion's definition,
the judge writes the evaluation steps once; they then go into the form of every item. The
request is fixed by the shipped generation prompt (``prompts/geval/steps.txt``, ending with the
line "Evaluation Steps:") filled with the criterion's ``task``, name, scale and ``definition``,
sent to the study's judge at ``steps_temperature`` (0 unless set) for one answer. Its key is
the digest of that body (:func:`~.keys.request_key`), so the task, the definition, the scale,
the model and the generation prompt decide it, and nothing else of the study does: every
rerun, shard and record reads the same stored steps, and editing the definition asks again.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import ConfigError
from ..options import Role, StepsOrigin
from .config import EvalConfig
from .definition import Steps
from .keys import request_key
from .plan import PlannedCriterion, Study
from .prompts import load_template
from .responses_api import answer_choices
from .shipped import shipped

__all__ = [
    "StepsRequest",
    "answer_steps",
    "generation_prompt",
    "steps_request",
    "steps_origin",
    "steps_requests",
    "with_estimated_steps",
    "with_steps",
]


def generation_prompt() -> Path:
    """The shipped prompt that asks the judge for a criterion's evaluation steps."""
    return shipped("prompts", "geval", "steps.txt")


@dataclass(frozen=True)
class StepsRequest:
    """The request that asks the judge for one criterion's evaluation steps."""

    criterion: str
    body: dict[str, Any]
    key: str
    est_tokens: int

    @property
    def model(self) -> str:
        return str(self.body["model"])

    @property
    def max_completion_tokens(self) -> int:
        return int(self.body["max_tokens"])


def steps_request(config: EvalConfig, planned: PlannedCriterion) -> StepsRequest:
    """The steps request of a criterion given by definition with ``steps = "generate"``."""
    criterion, definition = planned.config, planned.config.definition
    if definition is None or definition.steps is not None:
        raise ConfigError(f"criterion {criterion.name!r} does not generate its steps")
    scale = criterion.answer_scale
    prompt = load_template(generation_prompt()).render(
        {
            "task": definition.task,
            "metric_name": criterion.display_name,
            "scale": f"{scale.lo:g}-{scale.hi:g}",
            "definition": definition.text,
        }
    )
    body = {
        "model": config.judge.model,
        "messages": [{"role": Role.USER.value, "content": prompt}],
        "temperature": definition.temperature,
        "max_tokens": definition.max_tokens,
        "n": 1,
    }
    estimate = -(-len(prompt) // 4) + 4 + definition.max_tokens
    return StepsRequest(criterion.name, body, request_key(body, 0), estimate)


def steps_requests(study: Study) -> list[StepsRequest]:
    """The steps requests of the study's criteria that generate their steps (read or not)."""
    return [
        steps_request(study.config, c)
        for c in study.criteria
        if c.steps is not None and c.steps.origin == StepsOrigin.GENERATED
    ]


def with_steps(study: Study, steps: Mapping[str, Steps]) -> Study:
    """The study with the generated steps of the named criteria in their templates."""
    criteria = []
    for planned in study.criteria:
        found = steps.get(planned.name)
        if found is None or not planned.steps_pending or found.text is None:
            criteria.append(planned)
            continue
        template = planned.template.fill({"steps": found.text})
        criteria.append(dataclasses.replace(planned, template=template, steps=found))
    return dataclasses.replace(study, criteria=tuple(criteria))


# Stands for steps not generated yet in a ``--dry-run``'s token estimate: five lines of about
# 30 tokens, about what a judge writes for G-Eval's generation prompt.
_ESTIMATED_STEPS = "\n".join(f"{i}. " + "word " * 24 for i in range(1, 6))


def with_estimated_steps(study: Study) -> Study:
    """The study with a stand-in for each pending criterion's steps, to estimate its items'
    tokens (``--dry-run``); never sent: the keys of these items are not the real ones."""
    pending = {c.name: Steps(StepsOrigin.GENERATED, _ESTIMATED_STEPS) for c in study.pending_steps}
    return with_steps(study, pending)


_THINKING = re.compile(r"\s*<(?:think|thinking)>", re.IGNORECASE)
_THINKING_END = re.compile(r"</(?:think|thinking)>", re.IGNORECASE)


def answer_steps(body: str) -> str | None:
    """The steps in a stored answer body (either API's): the first choice's text, or None."""
    try:
        content = answer_choices(orjson.loads(body))[0]["message"]["content"]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return None
    if not isinstance(content, str):
        return None
    if _THINKING.match(content):
        # A thinking model served with its reasoning in the content (llama.cpp, Ollama):
        # the steps follow the closing tag; a cut-off reasoning has none.
        closing = list(_THINKING_END.finditer(content))
        content = content[closing[-1].end() :] if closing else ""
    return content.strip() or None


def steps_origin(planned: PlannedCriterion, model: str) -> str:
    """Where a criterion's steps came from, in a few words (also the report's line)."""
    steps = planned.steps
    if steps is None:
        return f"no evaluation steps in the prompt file {planned.config.prompt}"
    if steps.origin == StepsOrigin.GENERATED:
        if steps.text is None:
            return "to be generated by the judge (not in the cache yet)"
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(steps.time or 0))
        judge = f"{model} (geval-async's SIMULATED judge)" if steps.simulated else model
        return f"generated by {judge}, cache key {steps.key}, {when}"
    if steps.origin == StepsOrigin.CONFIG:
        return "written in the config ('steps')"
    return f"in the prompt file {steps.source}"
