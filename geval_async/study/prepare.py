"""Preparing a study: its config's templates and records loaded and checked, once.

:func:`prepare_study` is where bad input fails, before the first request is planned: a missing
prompt file or records file, a placeholder no record field fills, a logprobs study whose points
are not single tokens. What it returns, a :class:`~.plan.Study`, is what the judge stage plans
requests from and the scoring stage scores.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..options import SamplingMode, StepsOrigin
from .checks import check_fields_inserted, check_stats
from .config import CriterionConfig, EvalConfig
from .definition import Steps, expand_record, steps_in_prompt
from .pairing import check_shared
from .plan import PlannedCriterion, Study
from .prompts import check_fields, load_template, stray_braces
from .records import load_records
from .stated_scale import scale_mismatch


def prepare_study(config: EvalConfig) -> Study:
    """Load the templates and records and check that every placeholder can be filled.

    Raises:
        ConfigError: a prompt file or the records file is missing or invalid.
    """
    plans = [_plan_criterion(criterion, config) for criterion in config.criteria]
    paired = [_plan_criterion(criterion, config) for criterion in config.pairwise]
    criteria = [planned for planned, _ in plans]
    braces = tuple(dict.fromkeys(w for _, w in plans + paired if w is not None))
    required = {
        planned.config.fields[name]
        for planned in criteria
        for name in planned.template.placeholders
        if name in planned.config.fields
    }
    for criterion in config.pairwise:
        assert criterion.pairing is not None  # config.pairwise holds pairwise criteria only
        required.update(criterion.pairing.record_fields)
        if config.data.group_field is None or config.data.condition_field is None:
            raise ConfigError(
                f"{config.source}: criterion {criterion.name!r} is pairwise: it compares the "
                'texts of two conditions within a group, so set [data] group = "..." and '
                'condition = "..."'
            )
    records = load_records(
        config.data.path,
        id_field=config.data.id_field,
        group_field=config.data.group_field,
        condition_field=config.data.condition_field,
        required_fields=required,
    )
    check_stats(config, records)
    warnings = _scale_warnings(criteria) + braces
    pairwise = tuple(planned for planned, _ in paired)
    study = Study(config, records, tuple(criteria), warnings, pairwise)
    for planned in study.pairwise:
        assert planned.config.pairing is not None  # study.pairwise holds pairwise criteria
        check_shared(
            study.selected_records,
            study.pair_slots(planned),
            planned.config.pairing,
            f"criterion {planned.name!r} of {config.source}",
        )
    return study


def _scale_warnings(criteria: list[PlannedCriterion]) -> tuple[str, ...]:
    warnings = []
    for planned in criteria:
        c = planned.config
        if c.is_rubric or c.options:
            continue
        fixed = "".join(planned.template.parts[0::2])  # the prompt without record fields
        stated = scale_mismatch(fixed, c.answer_scale)
        if stated is not None:
            scale = c.answer_scale
            warnings.append(
                f"{c.prompt}: criterion {c.name!r} is declared on {scale.lo:g}-{scale.hi:g} "
                f"but its prompt states a {stated[0]}-{stated[1]} scale; make them agree "
                "(scale = [lo, hi] in the config, or the prompt's text)"
            )
    return tuple(warnings)


def _plan_criterion(
    criterion: CriterionConfig, config: EvalConfig
) -> tuple[PlannedCriterion, str | None]:
    """Load a criterion's template and fill its fixed parts; check what is left. With it, the
    warning of a stray brace in the prompt file (None: none)."""
    template = load_template(criterion.prompt, criterion.style)
    # Looked for in the file as written: a filled part's text is not the file's, so the
    # planned template cannot tell a stray brace from one a part brought in.
    braces = stray_braces(template, criterion.style)
    fixed = {
        "metric_name": criterion.display_name,
        "points": criterion.points_text(),
        **criterion.parts,
    }
    names = dict(criterion.fields)
    definition = criterion.definition
    steps: Steps | None = None
    if definition is not None:
        template = expand_record(template, criterion.fields)
        if "steps" not in template.placeholders:
            raise ConfigError(
                f"{template.source}: criterion {criterion.name!r} is given by definition, so "
                "its template needs a {{steps}} placeholder where the evaluation steps go"
            )
        scale = criterion.answer_scale
        fixed |= {"task": definition.task, "definition": definition.text}
        fixed |= {"scale": f"{scale.lo:g}-{scale.hi:g}"}
        if definition.steps is None:
            steps = Steps(StepsOrigin.GENERATED, None)
            names["steps"] = "steps"  # filled once the generated steps are read
        else:
            steps = Steps(StepsOrigin.CONFIG, definition.steps)
            fixed["steps"] = definition.steps
    else:
        written = steps_in_prompt("".join(template.parts[0::2]))
        if written is not None:
            steps = Steps(StepsOrigin.PROMPT, written, source=criterion.prompt)
    template = template.fill({k: v for k, v in fixed.items() if k not in criterion.fields})
    if criterion.is_rubric:
        if "rubric" not in template.placeholders:
            raise ConfigError(
                f"{criterion.prompt}: criterion {criterion.name!r} has rubrics, so its template "
                "needs a {{rubric}} placeholder where each rubric's text goes"
            )
        names["rubric"] = "rubric"
    check_fields(template, names, criterion.name)
    check_fields_inserted(criterion, template)
    points = criterion.answer_scale.points
    if config.sampling.mode == SamplingMode.LOGPROBS and not all(
        float(p).is_integer() for p in points
    ):
        raise ConfigError(
            f"{config.source}: criterion {criterion.name!r} has non-integer points, which are "
            "not single tokens: logprobs mode needs answer = 'option' (or use samples mode)"
        )
    return PlannedCriterion(criterion, template, steps), braces
