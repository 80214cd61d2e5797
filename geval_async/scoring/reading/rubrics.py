"""Yes/no rubrics (pure): reading a yes/no answer and combining rubrics into AND, OR or a sum.

A rubric's answer is a rating on {0, 1}: 1 when the judge says the rubric holds. From n samples
(or the first token's logprobs) each rubric gets the probability p that it holds; it is *judged*
to hold when p > 0.5 (the majority of the samples, or most of the probability mass). Then:

- AND is TRUE when every rubric is judged to hold; its probability, were the rubrics
  independent, is Π p;
- OR is TRUE when any is; probability 1 - Π (1 - p);
- weighted sums the weights of the rubrics judged to hold; its expectation is Σ w·p.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...options import CriterionKind, Reason
from ...study.criteria import Rubric
from .distributions import best_logprobs, invalid_distribution
from .ratings import RatingDistribution

_YES = {"yes", "true", "1", "y"}
_NO = {"no", "false", "0", "n"}
_WORD = re.compile(r"[A-Za-z]+|\d+")
# A label before the answer ("Answer: Yes", "Final answer - no") is not the answer.
_LABEL = re.compile(r"^\W*(?:final\s+)?answer\s*[:=\-]\s*", re.IGNORECASE)
_SPACE_MARKERS = "▁Ġ"


def parse_yes_no(text: str) -> float | None:
    """1.0 for yes/true, 0.0 for no/false (the first word decides, after an "Answer:" label);
    None when neither."""
    match = _WORD.search(_LABEL.sub("", text, count=1))
    if match is None:
        return None
    word = match.group().lower()
    if word in _YES:
        return 1.0
    if word in _NO:
        return 0.0
    return None


def yes_no_from_logprobs(top_logprobs: Sequence[Mapping[str, Any]]) -> RatingDistribution:
    """P(yes) from the first token's ``top_logprobs``: "Yes", " yes", "TRUE" all count as yes.

    Distinct tokens are disjoint events and add up; the same token listed twice counts once.
    """
    best = best_logprobs(list(top_logprobs) if isinstance(top_logprobs, list) else [])
    if best is None:
        return invalid_distribution(Reason.BAD_LOGPROBS)
    mass = {0.0: 0.0, 1.0: 0.0}
    for token, logprob in best.items():
        value = parse_yes_no(token.strip().lstrip(_SPACE_MARKERS))
        if value is not None and token.strip().lstrip(_SPACE_MARKERS).isalnum():
            mass[value] += math.exp(logprob)
    total = mass[0.0] + mass[1.0]
    if total <= 0:
        return invalid_distribution(Reason.NO_RATING)
    return RatingDistribution(
        probs={v: m / total for v, m in mass.items() if m > 0}, valid=1, invalid=0, valid_mass=total
    )


@dataclass(frozen=True)
class RubricOutcome:
    """The combined result of one record's rubrics."""

    value: float  # AND/OR: 1.0 TRUE, 0.0 FALSE; weighted: sum of weights held
    probability: float  # AND/OR: P(TRUE) assuming independence; weighted: Σ w·p
    holds: dict[str, float]  # rubric name -> probability that it holds
    judged: dict[str, bool]  # rubric name -> judged to hold (p > 0.5)


def combine(
    kind: CriterionKind, rubrics: Sequence[Rubric], holds: Mapping[str, float]
) -> RubricOutcome:
    """Combine per-rubric probabilities into the criterion's result."""
    judged = {r.name: holds[r.name] > 0.5 for r in rubrics}
    p = [holds[r.name] for r in rubrics]
    if kind == CriterionKind.AND:
        value = float(all(judged.values()))
        probability = math.prod(p)
    elif kind == CriterionKind.OR:
        value = float(any(judged.values()))
        probability = 1.0 - math.prod(1.0 - x for x in p)
    elif kind == CriterionKind.WEIGHTED:
        value = math.fsum(r.weight for r in rubrics if judged[r.name])
        probability = math.fsum(r.weight * holds[r.name] for r in rubrics)
    else:
        raise ValueError(f"not a rubric kind: {kind!r}")
    return RubricOutcome(value, probability, dict(holds), judged)
