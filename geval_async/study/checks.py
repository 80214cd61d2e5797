"""Mistakes a study can be seen to have before the first request is sent.

Each one would otherwise cost a whole judge run before anything says so: a criterion that lists
a record field its template never inserts (every record gets the same prompt, so the same
score), ``[stats]`` conditions that occur in no record (caught only by ``ttest``, after the
run), and a paired test over groups that appear under only one of its two conditions.
"""

from __future__ import annotations

from ..errors import ConfigError
from .config import CriterionConfig, EvalConfig
from .prompts import Template
from .records import Records

__all__ = ["check_fields_inserted", "check_stats"]

PAIRED_TESTS = ("paired-t", "wilcoxon")


def check_fields_inserted(criterion: CriterionConfig, template: Template) -> None:
    """Every field a criterion lists must be inserted by its template (and at least one).

    Raises:
        ConfigError: naming the template, the criterion and the field.
    """
    inserted = set(template.placeholders)
    left, right = ("{", "}") if criterion.style == "format" else ("{{", "}}")
    for placeholder, field in criterion.fields.items():
        if placeholder not in inserted:
            raise ConfigError(
                f"{template.source}: criterion {criterion.name!r} lists the record field "
                f"{field!r}, but its template has no {left}{placeholder}{right} placeholder, "
                f"so every record would get the same prompt: add {left}{placeholder}{right} "
                "where the text goes, or remove it from 'fields'"
            )
    if not criterion.fields:
        raise ConfigError(
            f"{template.source}: criterion {criterion.name!r} inserts no record field, so every "
            f"record would get the same prompt: add 'fields' = [...] and a {left}name{right} "
            "placeholder for each"
        )


def check_stats(config: EvalConfig, records: Records) -> None:
    """The ``[stats]`` conditions occur in the records; a paired test has pairs.

    Raises:
        ConfigError: naming the config, the condition or group, and the records file.
    """
    conditions = config.stats.conditions
    if not conditions:
        return
    data = config.data
    if data.condition_field is None:
        raise ConfigError(
            f"{config.source}: [stats] conditions needs the records' condition field: "
            'set [data] condition = "..."'
        )
    present = set(records.conditions)  # from the index: no text is read
    for condition in conditions:
        if condition not in present:
            shown = ", ".join(sorted(str(c) for c in present if c is not None)[:5])
            raise ConfigError(
                f"{config.source}: [stats] condition {condition!r} occurs in no record of "
                f"{data.path} (field {data.condition_field!r} holds: {shown or 'nothing'})"
            )
    if config.stats.test not in PAIRED_TESTS:
        return
    if data.group_field is None:
        raise ConfigError(
            f"{config.source}: [stats] test = '{config.stats.test}' pairs records by group: "
            'set [data] group = "..." (or use test = "welch")'
        )
    a, b = conditions
    groups: dict[str | None, set[str | None]] = {a: set(), b: set()}
    for group, held in zip(records.groups, records.conditions, strict=True):
        if held in groups:
            groups[held].add(group)
    for condition, other in ((a, b), (b, a)):
        alone = sorted(str(g) for g in groups[condition] - groups[other])
        if alone:
            raise ConfigError(
                f"{config.source}: [stats] test = '{config.stats.test}' pairs each group's "
                f"{a!r} and {b!r} records, but {len(alone)} groups appear under {condition!r} "
                f"only (e.g. {alone[0]!r} in {data.path}): fix the records, or use "
                'test = "welch"'
            )
