"""The drill-down's data: every record with its scores, answers, ratings and prompts, as JSON.

The page carries it inline (``<script type="application/json">``) and renders rows and details
from it on demand, so a study of 10,000 records opens as fast as one of 50. Prompts are not
stored per record: each criterion's template parts go once, and the page fills in the record's
fields literally, exactly as the judge stage rendered them.

Compact keys keep the file small. Per record: ``id``, ``g`` group, ``c`` condition, ``f`` its
fields, ``p`` the prompt text of its non-text fields (as the judge stage rendered them), and ``k``
per criterion ``[weighted score, status, valid samples, invalid samples, parts, standard error]``,
a part being
``[rubric, [[answer, rating, reason?], ...], distribution, weighted score]``.

A thinking judge's answer (reasoning in a field of its own, or ``<think>…</think>`` at the start
of its content) is ``[answer after the reasoning, rating, reason or null, reasoning, length,
unfinished]``: the page shows the reasoning collapsed above the answer the rating was read from.
A long reasoning is shortened to its start and its end, where a judge concludes (the whole of it
is in the cache, and ``geval-async answers --record`` shows it); ``length`` is its full length.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from ...reading.thinking import split_reasoning
from ...scores.results import StudyResults
from ...scores.scores import ItemScore
from .readings import Item, Reading, item_readings

# A reasoning longer than this is shown as its first and last characters.
REASONING_HEAD, REASONING_TAIL = 400, 800


def _value(number: float | None) -> float | None:
    return None if number is None or math.isnan(number) else round(number, 6)


def _prompt_text(value: Any) -> str:
    # The judge stage's rule (geval_async.study.prompts): integral floats print as integers.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _part(score: ItemScore, criterion: str, readings: dict[Item, list[Reading]]) -> list[Any]:
    """[rubric, [[answer, rating, reason], ...], distribution or None, weighted score]."""
    answers = [_answer(r) for r in readings.get((score.record_id, criterion, score.rubric), [])]
    distribution = None
    if score.distribution is not None and score.distribution.probs:
        distribution = [[v, _value(p)] for v, p in sorted(score.distribution.probs.items())]
    return [score.rubric, answers, distribution, _value(score.weighted_score)]


def _answer(reading: Reading) -> list[Any]:
    """[answer, rating, reason?], or with the reasoning it followed (see the module's doc)."""
    split = split_reasoning(reading.text, reading.reasoning)
    if not split.reasoning:
        if reading.reason is None:
            return [reading.text, reading.rating]
        return [reading.text, None, reading.reason]
    thought = split.reasoning
    if len(thought) > REASONING_HEAD + REASONING_TAIL:
        thought = f"{thought[:REASONING_HEAD]} … {thought[-REASONING_TAIL:]}"
    answer = split.answer.strip()
    return [answer, reading.rating, reading.reason, thought, len(split.reasoning), split.unfinished]


def _entry(score: ItemScore | None, readings: dict[Item, list[Reading]]) -> list[Any] | None:
    if score is None:
        return None
    name = score.criterion
    parts = [_part(p, name, readings) for p in score.parts or (score,)]
    return [
        _value(score.weighted_score),
        score.status,
        score.valid,
        score.invalid,
        parts,
        _value(score.se),
    ]


def drilldown_data(results: StudyResults) -> dict[str, Any]:
    """The JSON document the page's drill-down renders from."""
    study = results.study
    config = study.config
    by_item = {(s.record_id, s.criterion): s for s in results.scores}
    readings = item_readings(results.samples)  # the parser's rating or reason, per answer
    criteria = []
    prompt_fields: set[str] = set()
    for c in study.criteria:
        prompts = []
        for rubric in c.rubrics:
            template = c.template if rubric is None else c.template.fill({"rubric": rubric.text})
            prompts.append(
                {"rubric": None if rubric is None else rubric.name, "parts": template.parts}
            )
        prompt_fields.update(c.config.fields.values())
        criteria.append(
            {
                "name": c.name,
                "display": c.config.display_name,
                "lo": c.config.scale.lo,
                "hi": c.config.scale.hi,
                "role": c.config.role,
                "placeholders": dict(c.config.fields),
                "prompts": prompts,
            }
        )
    records = []
    for record in study.selected_records:
        rendered = {
            name: _prompt_text(value)
            for name, value in record.fields.items()
            if name in prompt_fields and not isinstance(value, str)
        }
        row: dict[str, Any] = {
            "id": record.id,
            "g": record.group,
            "c": record.condition,
            "f": record.fields,
            "k": [_entry(by_item.get((record.id, c.name)), readings) for c in study.criteria],
        }
        if rendered:
            row["p"] = rendered
        records.append(row)
    conditions = sorted({c for c in study.selected_records.conditions if c is not None})
    ordered = [c for c in config.stats.conditions if c in conditions]
    return {
        "mode": config.sampling.mode,
        "groupLabel": config.data.group_field or "group",
        "conditions": ordered + [c for c in conditions if c not in ordered],
        "criteria": criteria,
        "records": records,
    }


def script_json(document: dict[str, Any]) -> str:
    """JSON safe inside a <script> element: "<", ">" and "&" escaped as \\u sequences."""
    text = orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
