"""A study's results, computed once from the cache: the library's front door for analysis.

    >>> results = load_results("examples/ueq/config.toml")
    >>> results.long                 # pandas: one row per record and criterion
    >>> results.table("con")         # users x conditions, with the Average row
    >>> results.composite()          # the 100-point composite
    >>> results.comparisons()        # Welch + BH (or the configured test)
    >>> results.consistency          # Krippendorff's alpha over the judge's draws
    >>> results.n_curve              # was n worth it: mean SE and Spearman for k = 1..n
    >>> results.bias()               # what the judge may be reacting to: length, scale, ...
    >>> write_outputs(results)       # every output file, as `geval-async report` writes them

Nothing here calls the network: scoring reads the cache only, so re-scoring is free. Nothing
here writes a file either: :mod:`.outputs` is the one writer.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

import pandas as pd

from ...errors import ConfigError
from ...judging.store.read_model import open_answers
from ...options import SamplingMode, StatTest, parse_option
from ...study.config import EvalConfig, apply_overrides, load_config
from ...study.file_names import file_name_text
from ...study.plan import Study
from ...study.prepare import prepare_study
from ..stats.comparisons import Comparison
from ..stats.human_scale import calibration_summary
from ..stats.pairwise import pairwise_frame, strengths_frame
from .bias_checks import JudgeReactions, judge_reactions
from .columns import ScoreColumns, collect_scores
from .draws import DrawTally, draws_frame, score_by_need
from .joined import join_scores, record_ids
from .labelled import human_scale_estimates, labelled_items
from .pairs import OrderVerdict, outcomes_frame, read_orders, verdicts_frame
from .readings import ShareCounts, ShareDifference, samples_frame, share_counts
from .record_heads import RecordHeads
from .scores import CriterionTally, ItemScore
from .tables import (
    compare,
    composite,
    conditions_present,
    design_is_paired,
    group_tables,
    long_frame,
    with_average,
    with_calibration,
)
from .trust import consistency_frame, n_curve_frame


@dataclass
class StudyResults:
    """Scores of every item of a study plus the tables and tests built from them.

    ``scores`` is read as a sequence of :class:`ItemScore`, in plan order; it is held as
    :class:`~.columns.ScoreColumns` (numbers in arrays, each item rebuilt when read), so a
    study of a million items fits in memory; a list given here is put in columns too.
    """

    study: Study
    scores: Sequence[ItemScore]
    simulated: bool
    corrupted: int
    variant: str = ""  # added to output names: "-criteria-con-flu", "-limit-10"
    # When the answers scored arrived (UNIX times, first and last); None: no answer yet.
    judged: tuple[float, float] | None = None
    # The pairwise criteria's orders asked, their answers read (:mod:`.pairs`).
    orders: list[OrderVerdict] = field(default_factory=list)
    # Draws spent by need: where the adaptive items stand (None: a fixed n, :mod:`.draws`).
    draws: DrawTally | None = None
    # The DataFrame a study built in code was given (None: read from a records file), which
    # :meth:`frame` gives back with the scores joined on.
    records_frame: pd.DataFrame | None = field(default=None, init=False, repr=False, compare=False)
    # Each test's comparisons, computed once: `report` asks for them in several outputs.
    _comparisons: dict[StatTest, list[Comparison]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.scores, ScoreColumns):
            self.scores = collect_scores(self.study, self.scores)

    @property
    def columns(self) -> ScoreColumns:
        """The scores as the tables read them: numbers in columns."""
        assert isinstance(self.scores, ScoreColumns)  # __post_init__
        return self.scores

    @property
    def config(self) -> EvalConfig:
        return self.study.config

    @property
    def prefix(self) -> str:
        """The output files' name prefix: ``[output] prefix`` plus what varies (the variant)."""
        return self.config.output.prefix + self.variant

    @cached_property
    def long(self) -> pd.DataFrame:
        """One row per record and criterion: score, status, valid/invalid, distribution (and
        with ``[meta] human``: the calibrated score and its interval, ``calibrated``, ``lo``,
        ``hi``)."""
        return with_calibration(long_frame(self.columns), self.labelled)

    @cached_property
    def labelled(self) -> pd.DataFrame | None:
        """Per record and criterion (the long table's rows), the judge's score beside the human
        label, whether the label is used, and the calibrated score with its interval; None
        without ``[meta] human`` (see :mod:`.labelled`)."""
        return labelled_items(self.columns, self.study)

    @cached_property
    def human_scale(self) -> pd.DataFrame:
        """The means and the comparison on the human scale: prediction-powered, labels only and
        judge only (see :mod:`..stats.human_scale`); empty without ``[meta] human``.

        Raises:
            ConfigError: ppi-python is not installed.
        """
        return human_scale_estimates(self.labelled, self.config, self.paired_design)

    @cached_property
    def calibration_summary(self) -> pd.DataFrame:
        """Per criterion: labels used, the judge's bias on them, errors and Spearman before and
        after calibration, the intervals' cross-validated coverage and mean width."""
        items = self.labelled
        return pd.DataFrame() if items is None else calibration_summary(items)

    def frame(self) -> pd.DataFrame:
        """The records, one row each, with each criterion's score, standard error and status
        joined on: ``<criterion>_score``, ``<criterion>_se``, ``<criterion>_status``
        (:mod:`.joined`). The records are the DataFrame given to
        :func:`geval_async.notebook.evaluate`, as given, else the records file's fields."""
        records = self.records_frame
        if records is None:
            selected = list(self.study.selected_records)
            records = pd.DataFrame([r.fields for r in selected])
            return join_scores(self.long, records, [r.id for r in selected])
        return join_scores(self.long, records, record_ids(records, self.config.data.id_field))

    @cached_property
    def consistency(self) -> pd.DataFrame:
        """Per criterion, Krippendorff's alpha (interval, ordinal) over the judge's own draws,
        records as units and draws as coders (see :mod:`.trust`); a note in logprobs mode."""
        return consistency_frame(self.study, self.scores)

    @cached_property
    def n_curve(self) -> pd.DataFrame:
        """Per criterion and k = 1..n, from the cached draws: the mean SE of the scores from
        the first k draws and their Spearman correlation with the n-draw scores (samples
        mode; empty in logprobs mode)."""
        return n_curve_frame(self.study, self.scores)

    def draws_frame(self) -> pd.DataFrame | None:
        """Per criterion whose draws are spent by need: the draws used against the fixed n,
        the share of items stopped at ``first_draws``, and the requests and cost against the
        fixed study's (see :func:`.draws.draws_frame`), as ``stats/<prefix>_draws.csv`` holds
        it; None for a study of a fixed n."""
        if self.draws is None:
            return None
        return draws_frame(self.study, self.draws)

    def bias(self) -> pd.DataFrame:
        """What the judge may be reacting to besides quality: one row per check, criterion
        and scope (length, use of the scale, self-preference; see :mod:`.bias_checks`), as
        ``stats/<prefix>_bias.csv`` holds it."""
        return self.reactions.frame.copy()

    @cached_property
    def reactions(self) -> JudgeReactions:
        """The bias table and its notes on the checks not made (computed once: the CSV, the
        report and the HTML report show them)."""
        # The position check reads the pairwise criteria's statistics.
        return judge_reactions(self.study, self.columns, self._pairwise if self.orders else None)

    @cached_property
    def _heads(self) -> RecordHeads:
        # The records the items name, by code, made once: the tables, the design and the
        # comparisons read them (each made them again: a dict of 125,000 groups each time).
        return RecordHeads.of(self.columns)

    @cached_property
    def group_tables(self) -> dict[str, pd.DataFrame]:
        """Per criterion, the mean weighted score per group and condition (no Average row):
        computed once, as every table, the composite and each test read them (from the
        columns, a criterion at a time: a million items' frame is never made for them)."""
        tables = group_tables(self.columns, self.config, self._heads)
        give_back_freed_memory()  # the cells' arrays, before the outputs are written
        return tables

    @cached_property
    def tallies(self) -> dict[str, CriterionTally]:
        """Coverage and invalid samples per criterion."""
        return self.columns.tallies

    @cached_property
    def samples(self) -> pd.DataFrame:
        """One row per answer read: record_id, group, condition, criterion, rubric, draw,
        text, rating (NaN when invalid) and reason (None when valid)."""
        return samples_frame(self.columns)

    def invalid_shares(self) -> pd.DataFrame:
        """Invalid samples per criterion and condition, with a count per reason."""
        return self._invalid_shares.copy()

    def share_differences(self) -> list[ShareDifference]:
        """Criteria whose invalid share differs between the two compared conditions."""
        return list(self._share_differences)

    # Computed once: the report and the command's notes both show them.
    # Counted from the answers' codes: `score` never needs their texts, nor a row per answer.
    @cached_property
    def _share_counts(self) -> ShareCounts:
        counts = share_counts(self.columns)
        give_back_freed_memory()  # the keys per answer
        return counts

    @cached_property
    def _invalid_shares(self) -> pd.DataFrame:
        return self._share_counts.shares()

    @cached_property
    def _share_differences(self) -> list[ShareDifference]:
        stats = self.config.stats
        return self._share_counts.differences(stats.conditions, stats.alpha)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Doubts found at load, such as a prompt that states another scale."""
        return self.study.warnings

    @property
    def missing(self) -> int:
        """Items left out because the cache has no (or only a refused) answer."""
        return sum(t.missing + t.refused for t in self.tallies.values())

    @cached_property
    def pair_verdicts(self) -> pd.DataFrame:
        """Pairwise criteria: one row per pair of a group asked in one order (criterion,
        group, a, b, the condition shown first, its verdict "A"/"B"/"tie", the condition
        that won, the preference for the text shown first, valid and invalid answers)."""
        return verdicts_frame(self.orders)

    @cached_property
    def pair_outcomes(self) -> pd.DataFrame:
        """Pairwise criteria: one row per pair of a group, its orders combined (winner a, b
        or "tie", None without a verdict; inconsistent when the orders disagreed)."""
        return outcomes_frame(self.orders)

    def pairwise(self) -> pd.DataFrame:
        """Pairwise criteria: per criterion and pair of conditions, the wins, ties,
        inconsistent pairs, ``a``'s win rate with its interval, the sign test (BH-adjusted
        across criteria) and the share of verdicts won by the text shown first with its
        interval (``stats/<prefix>_pairwise.csv``)."""
        return self._pairwise.copy()

    def strengths(self) -> pd.DataFrame:
        """Pairwise criteria comparing more than two conditions: Bradley-Terry strengths per
        condition with their intervals (``stats/<prefix>_strengths.csv``)."""
        return self._strengths.copy()

    @cached_property
    def _pairwise(self) -> pd.DataFrame:
        return pairwise_frame(self.pair_outcomes, self.pair_verdicts)

    @cached_property
    def _strengths(self) -> pd.DataFrame:
        return strengths_frame(self.pair_outcomes)

    def table(self, criterion: str, *, average: bool = True) -> pd.DataFrame:
        """Mean weighted score per group and condition (plus the Average row)."""
        self.config.criterion(criterion)
        table = self.group_tables[criterion]
        return with_average(table) if average else table.copy()

    @property
    def compares_conditions(self) -> bool:
        """Whether the rated criteria are tested between two conditions: ``[stats]`` names
        two and the study has criteria that rate (pairwise ones are compared in pairs)."""
        return len(self.config.stats.conditions) == 2 and bool(self.study.criteria)

    @property
    def has_composite(self) -> bool:
        """Whether every criterion of the composite is among the study's (``--criteria``);
        a study whose criteria are all pairwise has none."""
        return bool(self.config.composite.criteria) and not self.composite_missing

    @property
    def composite_missing(self) -> list[str]:
        """The composite's criteria that ``--criteria`` left out."""
        present = {c.name for c in self.config.criteria}
        return [name for name in self.config.composite.criteria if name not in present]

    def composite(self, *, average: bool = True) -> pd.DataFrame:
        """The 100-point composite per group and condition (plus the Average row).

        Raises:
            ConfigError: ``--criteria`` left out some of the composite's criteria.
        """
        if self.composite_missing:
            raise ConfigError(
                "the composite needs criteria "
                f"{', '.join(self.config.composite.criteria)}; --criteria leaves out "
                f"{', '.join(self.composite_missing)}: add them, or drop --criteria"
            )
        table = composite(self.group_tables, self.config)
        return with_average(table) if average else table

    @cached_property
    def paired_design(self) -> bool:
        """Whether the same groups appear under both compared conditions."""
        paired = design_is_paired(self.columns, self.config, self._heads)
        give_back_freed_memory()  # as after the tables: `report` asks for both
        return paired

    def summary_test(self, test: StatTest | str | None = None) -> StatTest:
        """The test of the summary: ``test``, else the one ``[stats] test`` names, else (none
        named) the paired t-test when the same groups appear in both conditions and Welch's
        test otherwise. A named test is honoured even for a paired design: the user may know
        that the pairing is not real."""
        if test is not None:
            return parse_option(StatTest, test, "the test")
        configured = self.config.stats.test
        if configured is not None:
            return configured
        return StatTest.PAIRED_T if self.paired_design else StatTest.WELCH

    def comparisons(self, test: StatTest | str | None = None) -> list[Comparison]:
        """The test between the two configured conditions on each criterion and the composite.

        Args:
            test: "welch", "paired-t" or "wilcoxon" (default: the :meth:`summary_test`).

        Raises:
            ConfigError: an unknown test, or the configured conditions are not in the records.
        """
        test = self.summary_test(test)
        if len(self.config.stats.conditions) != 2:
            raise ConfigError(
                f"{self.config.source}: [stats] conditions must name the two conditions to "
                'compare, e.g. conditions = ["A", "B"]'
            )
        present = conditions_present(self.columns, self._heads)
        for condition in self.config.stats.conditions:
            if condition not in present:
                raise ConfigError(
                    f"{self.config.source}: [stats] condition {condition!r} does not occur in "
                    f"the records' {self.config.data.condition_field!r} field"
                )
        if test not in self._comparisons:
            self._comparisons[test] = compare(self.group_tables, self.config, test)
        return list(self._comparisons[test])


def load_results(
    config: EvalConfig | str | os.PathLike[str], *, strict: bool = False, **overrides: Any
) -> StudyResults:
    """Score a study from its cache (no network).

    Args:
        config: a loaded config or the path of its TOML file.
        strict: raise ConfigError when any item lacks an answer, instead of leaving it out.
        overrides: as on the command line (cache, criteria, limit, ...).
    """
    if not isinstance(config, EvalConfig):
        config = load_config(config)
    config = apply_overrides(config, **overrides)
    prepared = prepare_study(config)
    with open_answers(prepared.rated()) as answers:
        study = answers.study  # with the generated steps read from the cache
        draws: list[DrawTally] = []
        scores = collect_scores(study, score_by_need(study, answers, draws))
    give_back_freed_memory()  # what the pass over the answers left (see .heap)
    orders: list[OrderVerdict] = []
    if prepared.pairwise:
        sampling = config.sampling
        with open_answers(prepared.paired()) as paired:
            orders = read_orders(paired, sampling.mode, sampling.choices_per_item)
        judged = answers.arrived, paired.arrived
        # Each part all simulated or all real, but one of each, mixes them as well.
        mixed = answers.mixed or paired.mixed
        mixed |= None not in judged and answers.simulated != paired.simulated
        simulated = answers.simulated or paired.simulated
        arrived = _span(*judged)
    else:
        mixed, simulated, arrived = answers.mixed, answers.simulated, answers.arrived
    if mixed:
        raise ConfigError(
            f"the cache {config.cache_path} holds answers of geval-async's simulated judge and "
            "of another server for this study: scores would mix synthetic and real ratings; "
            f"run `geval-async run {config.source}` against the real judge (it replaces the "
            "simulated answers), or keep each in its own --cache folder"
        )
    results = StudyResults(
        study,
        scores,
        simulated,
        answers.corrupted,
        _variant(config),
        arrived,
        orders=orders,
        draws=draws[0] if draws else None,
    )
    if strict and study.warnings:
        raise ConfigError(f"{study.warnings[0]} (--strict makes this an error)")
    if strict and results.missing:
        raise ConfigError(
            f"{results.missing} of {len(scores)} items have no answer in the cache "
            f"{config.cache_path}: run `geval-async run {config.source}` to finish, "
            "or drop --strict to score what is there"
        )
    return results


def _span(*spans: tuple[float, float] | None) -> tuple[float, float] | None:
    """The first and last arrival over several spans (None: no answer in any)."""
    known = [span for span in spans if span is not None]
    if not known:
        return None
    return min(first for first, _ in known), max(last for _, last in known)


def _variant(config: EvalConfig) -> str:
    """What overrides change in the output names: a criteria subset, a record limit, a shard,
    a judge model other than the config's (``--model``) and a re-scoring of the same answers
    another way (``--mode``, ``--n``), each of which would otherwise overwrite the study's
    own outputs."""
    try:
        study_file = load_config(config.source)
    except ConfigError:
        return ""  # not read from a file: nothing to tell apart
    # A panel's judge (EvalConfig.for_judge) is told apart from that judge of the file, not
    # from the file's first judge.
    for member in study_file.members() if study_file.is_panel else ():
        if member.output.prefix == config.output.prefix:
            study_file = member
    variant = ""
    names = [c.name for c in (*config.criteria, *config.pairwise)]
    if names != [c.name for c in (*study_file.criteria, *study_file.pairwise)]:
        variant += "-criteria-" + "-".join(names)
    if config.limit is not None and config.limit != study_file.limit:
        variant += f"-limit-{config.limit}"
    if config.shard is not None:
        variant += f"-shard-{config.shard.index}of{config.shard.count}"
    if config.judge.model != study_file.judge.model:
        variant += f"-model-{file_name_text(config.judge.model)}"
    sampling, stated = config.sampling, study_file.sampling
    if sampling.mode != stated.mode:
        variant += f"-mode-{sampling.mode}"
    if sampling.mode == SamplingMode.SAMPLES and sampling.n != stated.n:
        variant += f"-n-{sampling.n}"
    for key in ("labelled", "coverage"):  # the labels drawn, the intervals' level
        if getattr(config.meta, key) != getattr(study_file.meta, key):
            variant += f"-{key}-{getattr(config.meta, key):g}"
    return variant


def read_answers(
    config: EvalConfig | str | os.PathLike[str],
    *,
    criterion: str | None = None,
    condition: str | None = None,
    record: str | None = None,
    reason: str | None = None,
    **overrides: Any,
) -> pd.DataFrame:
    """Every answer of a study and how it was read, from the cache (no network).

    One row per answer: record_id, group, condition, criterion, rubric, draw, text, rating
    (NaN when invalid) and reason (None when valid). The filters narrow it down
    (``reason="invalid"`` keeps every invalid answer, ``"valid"`` every valid one); overrides
    are as on the command line.
    """
    samples = load_results(config, **overrides).samples
    return filter_samples(
        samples, criterion=criterion, condition=condition, record=record, reason=reason
    )


def filter_samples(
    samples: pd.DataFrame,
    *,
    criterion: str | None = None,
    condition: str | None = None,
    record: str | None = None,
    reason: str | None = None,
) -> pd.DataFrame:
    """The rows of a samples table that match every filter given."""
    keep = pd.Series(True, index=samples.index)
    for column, value in (("criterion", criterion), ("condition", condition)):
        if value is not None:
            keep &= samples[column] == value
    if record is not None:
        keep &= samples["record_id"].astype(str) == str(record)
    if reason == "invalid":
        keep &= samples["reason"].notna()
    elif reason == "valid":
        keep &= samples["reason"].isna()
    elif reason is not None:
        keep &= samples["reason"] == reason
    return samples[keep].reset_index(drop=True)


@cache
def _trim() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


def give_back_freed_memory() -> None:
    """Return the allocator's free pages to the system (glibc only; else nothing)."""
    trim = _trim()
    if trim is not None:
        trim(0)  # type: ignore[operator]
