"""``status``'s numbers, from one walk of the stored answers: coverage and invalid shares.

Per criterion, the items answered, refused, missing and in live batch jobs; per criterion and
condition, the samples and the invalid ones by reason, with the share differences between the
compared conditions. Every item is read once through the read model
(:mod:`geval_async.judging.store.read_model`) and its answers are parsed (:func:`~.scores.
score_item`) and counted at once: status holds numbers, never an item's scores or the study's
results, so its memory stays flat however large the study.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

import pandas as pd

from ...judging.store.read_model import Coverage, open_answers
from ...options import Left
from ...study.plan import Study
from .draws import DrawTally, adaptive_criteria, counted, item_stops
from .readings import ShareCounts, ShareDifference
from .scores import parser_for, score_item

__all__ = ["StudyStatus", "study_status"]


@dataclass
class StudyStatus:
    """Where a study stands, counted from its cache."""

    coverage: dict[str, Coverage]
    shares: ShareCounts
    corrupted: int  # entries that did not decode (counted as missing)
    mixed: bool  # answers of the simulated judge and of another server
    conditions: tuple[str, ...] = ()
    alpha: float = 0.05
    draws: DrawTally | None = None  # draws spent by need: items settled and still drawing

    def invalid_shares(self) -> pd.DataFrame:
        """Invalid samples per criterion and condition, with a count per reason (as
        :meth:`~geval_async.scoring.scores.results.StudyResults.invalid_shares`)."""
        return self.shares.shares()

    def share_differences(self) -> list[ShareDifference]:
        """Criteria whose invalid share differs between the two compared conditions."""
        return self.shares.differences(self.conditions, self.alpha)


def study_status(study: Study, in_batch: Container[str] = frozenset()) -> StudyStatus:
    """Count the study's coverage and invalid samples in one read of its cache (no network).

    Args:
        study: the prepared study.
        in_batch: the keys live batch jobs are asking for.

    Raises:
        ConfigError: generated steps are not in the cache (run ``run`` first).
    """
    counts = {c.name: Coverage() for c in (*study.criteria, *study.pairwise)}
    shares = ShareCounts()
    with open_answers(study, in_batch) as answers:
        planned = {c.name: c for c in answers.study.criteria}
        parsers = {name: parser_for(criterion) for name, criterion in planned.items()}
        sampling = answers.study.config.sampling
        stops = item_stops(answers.study, answers) if adaptive_criteria(answers.study) else {}
        for item in answers:
            item = counted(item, stops)
            name = item.item.criterion.name
            counts[name].add(item.left)  # as the dry run and the batch commands count
            # A pairwise criterion's answers are verdicts, not ratings: counted as covered.
            if item.left is Left.CACHED and name in parsers:
                # A rubric's answers count per rubric part, as the samples table lists them.
                score = score_item(
                    item,
                    parsers[name],
                    sampling.mode,
                    sampling.choices_per_item,
                    sampling.min_valid_mass,
                )
                reasons = score.reasons[: len(score.answers)]
                reasons += (None,) * (len(score.answers) - len(reasons))
                shares.add(name, score.condition, reasons)
    stats = study.config.stats
    draws = DrawTally.of(stops, sampling.first_draws) if stops else None
    return StudyStatus(
        counts,
        shares,
        answers.corrupted,
        answers.mixed,
        tuple(stats.conditions),
        stats.alpha,
        draws,
    )
