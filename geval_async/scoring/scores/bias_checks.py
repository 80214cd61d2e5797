"""What the judge may be reacting to, gathered from a scored study (no request).

The statistics are :mod:`..stats.bias`'s; this module finds what they are computed on:

- **the text judged**, whose length the scores are set against: for each criterion the record
  field ``[bias] length_field`` names, else the fields its prompt inserts that differ between
  the records of a group (the UEQ study's questionnaire, not the user's profile that both of a
  user's records share; SummEval's summary, not its article), else every field it inserts.
  Length is counted in characters of the text as the prompt inserts it;
- **the ratings** the judge wrote (in logprobs mode, its most likely rating of each record),
  for the use of the scale;
- **who wrote each text**: the ``[data] writer`` field, read as a model family
  (:func:`~..stats.bias.model_family`; a value that names no known model is its own family),
  set against the judge's family (its model's name, or ``[bias] judge_family``). Records without
  the field are left out of that check.

:func:`judge_reactions` gives the rows (:data:`~..stats.bias.BIAS_COLUMNS`) and the checks it
could not make, each with what would make it possible.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...errors import ConfigError
from ...study.plan import Study
from ...study.prompts import field_text
from ..stats.bias import (
    BiasRow,
    bias_frame,
    length_rows,
    model_family,
    position_rows,
    scale_rows,
    self_preference_row,
)
from .columns import ScoreColumns
from .readings import samples_frame
from .scores import SCORED
from .tables import score_rows

__all__ = ["JudgeReactions", "judge_reactions"]


@dataclass(frozen=True)
class JudgeReactions:
    """The bias table (:data:`~..stats.bias.BIAS_COLUMNS`) and notes on the checks not made
    or made on part of the records, each a sentence that says why and what would help."""

    frame: pd.DataFrame
    notes: tuple[str, ...] = field(default=())


@dataclass
class _Texts:
    """One pass over the records: per record, the length of every field a length check may
    measure, and its writer's family; per field, whether it differs within a group."""

    lengths: dict[str, dict[str, int]]  # field -> record id -> characters
    varies: set[str]  # fields whose text differs between two records of one group
    families: dict[str, str]  # record id -> the family of the model that wrote it
    without_writer: int  # records that do not name their writer


def _inserted(study: Study) -> dict[str, tuple[str, ...]]:
    """Per criterion, the record fields its prompt inserts, in the prompt's order."""
    found = {}
    for planned in study.criteria:
        names = planned.config.fields
        inserted = [names[p] for p in planned.template.placeholders if p in names]
        found[planned.name] = tuple(dict.fromkeys(inserted))
    return found


def _read_texts(study: Study, wanted: set[str], named: dict[str, str]) -> _Texts:
    """Read the records once for the fields ``wanted`` (``named``: the fields ``[bias]
    length_field`` names, by criterion, which every record must hold) and the writer."""
    config = study.config
    writer = config.data.writer_field
    texts = _Texts({name: {} for name in wanted}, set(), {}, 0)
    # (field, group) -> the hash of the group's first text: a large study's texts not held.
    first: dict[tuple[str, str], int] = {}
    records = study.selected_records
    for record in records:
        for name in wanted:
            value = record.fields.get(name)
            if value is None:
                if name in named.values():
                    criterion = next(c for c, f in named.items() if f == name)
                    raise ConfigError(
                        f"{records.path}: record {record.id!r}: field {name!r} is missing "
                        f"([bias] length_field names it for criterion {criterion!r}): add it "
                        "to every record, or name another field"
                    )
                continue
            text = field_text(value)
            texts.lengths[name][record.id] = len(text)
            if record.group is not None:
                seen = first.setdefault((name, record.group), hash(text))
                if seen != hash(text):
                    texts.varies.add(name)
        if writer is not None:
            value = record.fields.get(writer)
            if value is None or not str(value).strip():
                texts.without_writer += 1
            else:
                name = str(value).strip()
                texts.families[record.id] = model_family(name) or name.casefold()
    if writer is not None and not texts.families and len(records):
        raise ConfigError(
            f"{records.path}: [data] writer names field {writer!r}, which no record holds: "
            "name the field that holds the model that wrote each text, or remove the key"
        )
    return texts


def _length_fields(
    study: Study, texts: _Texts, inserted: dict[str, tuple[str, ...]]
) -> dict[str, tuple[str, ...]]:
    """Per criterion, the fields whose length is measured (the rule in the module docstring)."""
    named = study.config.bias.length_fields
    chosen: dict[str, tuple[str, ...]] = {}
    for criterion, fields in inserted.items():
        if criterion in named:
            chosen[criterion] = (named[criterion],)
            continue
        varying = tuple(f for f in fields if f in texts.varies)
        chosen[criterion] = varying or fields
    return chosen


def valid_ratings(scores: ScoreColumns) -> dict[str, np.ndarray]:
    """Per criterion, every valid rating the judge wrote (read from the answers' codes when
    each answer is one row, as a study of Likert criteria has it: no row per answer is made)."""
    if not scores.simple:
        samples = samples_frame(scores)
        valid = samples[samples["reason"].isna() & samples["rating"].notna()]
        return {
            str(name): part["rating"].to_numpy(float)
            for name, part in valid.groupby("criterion", sort=False)
        }
    answers = scores.counts[0].numbers().astype(np.int64)
    criterion = np.repeat(scores.criterion.numbers(), answers)  # per answer
    codes = scores.rating.numbers()
    valid = (codes >= 0) & (scores.reason.numbers() < 0)
    values = np.array([*scores.ratings.values, np.nan], dtype=float)[codes]
    return {
        str(name): values[valid & (criterion == code)]
        for code, name in enumerate(scores.criteria.values)
    }


def judge_reactions(
    study: Study,
    scores: ScoreColumns,
    pairwise: pd.DataFrame | None = None,
) -> JudgeReactions:
    """Every check of :mod:`..stats.bias` that the study allows, as one table.

    Args:
        study: the study scored (its records are read again for the texts' lengths).
        scores: its item scores, as held in columns.
        pairwise: the pairwise statistics' rows, for the position check (None: no pairwise
            criterion).

    Raises:
        ConfigError: a field ``[bias] length_field`` names is missing from a record, or the
            ``[data] writer`` field from every record.
    """
    config = study.config
    bias = config.bias
    inserted = _inserted(study)
    named = {c: f for c, f in bias.length_fields.items() if c in inserted}
    wanted = {f for fields in inserted.values() for f in fields} | set(named.values())
    texts = _read_texts(study, wanted, named)
    chosen = _length_fields(study, texts, inserted)
    long = score_rows(scores)
    scored = long[(long["status"] == SCORED) & long["score"].notna()]
    ratings = valid_ratings(scores)
    rows: list[BiasRow] = []
    notes: list[str] = []
    judge_family = bias.judge_family or model_family(config.judge.model)
    for planned in study.criteria:
        name = planned.name
        mine = scored[scored["criterion"] == name]
        fields = chosen[name]
        if fields:
            lengths = _summed_lengths(texts, fields, mine["record_id"])
            frame = pd.DataFrame(
                {
                    "score": mine["score"].to_numpy(float),
                    "length": lengths,
                    "condition": mine["condition"].to_numpy(object),
                }
            )
            rows += length_rows(
                name,
                frame[~np.isnan(lengths)],
                confidence=bias.confidence,
                # The interval is a formula: ``[bias] interval`` says whether to give it.
                interval=bias.interval,
                fields=" + ".join(fields),
            )
        else:
            notes.append(
                f"length ({name}): its prompt inserts no record field; name one in "
                "[bias] length_field"
            )
        points = planned.config.answer_scale.points if planned.config.is_rubric else None
        found = ratings.get(name, np.empty(0))
        rows += scale_rows(name, found, points or planned.config.scale.points)
        if config.data.writer_field is not None and judge_family is not None:
            family = mine["record_id"].map(texts.families)
            own = mine["score"][family == judge_family].to_numpy(float)
            others = mine["score"][family.notna() & (family != judge_family)].to_numpy(float)
            rows.append(
                self_preference_row(name, own, others, judge_family, alpha=config.stats.alpha)
            )
    if pairwise is not None and len(pairwise):
        rows += position_rows(pairwise)
    if config.data.writer_field is None:
        notes.append("self-preference: no [data] writer field names the model that wrote each text")
    elif judge_family is None:
        notes.append(
            f"self-preference: the family of judge {config.judge.model!r} is not known: name "
            'it in [bias] judge_family (e.g. "openai", "meta")'
        )
    elif texts.without_writer:
        notes.append(
            f"self-preference: {texts.without_writer} records do not name their writer in "
            f"field {config.data.writer_field!r} and are left out"
        )
    return JudgeReactions(bias_frame(rows), tuple(notes))


def _summed_lengths(texts: _Texts, fields: Iterable[str], record_ids: pd.Series) -> np.ndarray:
    """Per record, the characters of ``fields`` together (NaN where a record lacks them all)."""
    total = np.zeros(len(record_ids))
    found = np.zeros(len(record_ids), dtype=bool)
    for name in fields:
        lengths = record_ids.map(texts.lengths.get(name, {})).to_numpy(float)
        present = ~np.isnan(lengths)
        total[present] += lengths[present]
        found |= present
    total[~found] = np.nan
    return total
