"""Invalid samples counted per criterion and condition, by reason: the numbers behind the
invalid shares and the test of whether they differ between the compared conditions.

:class:`ShareCounts` is filled one item's answers at a time (``status``'s walk), from a
samples frame (:meth:`ShareCounts.of`), from the codes of items held in columns
(:meth:`~.columns.ScoreColumns.share_counts`, no row per answer), or as the sum of other
counts (a panel's: its judges' answers). Pure and sync: pandas, and scipy for the test.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...options import Reason, words

__all__ = ["REASONS", "ShareCounts", "ShareDifference"]

REASONS = words(Reason)


class ShareCounts:
    """Samples, invalid ones and their reasons per criterion and condition (none: "all"),
    counted as the answers are read: the numbers behind :func:`invalid_shares` and
    :func:`share_differences` without a row per sample (``status`` counts them this way)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], Counter[str]] = {}

    def add(self, criterion: str, condition: str | None, reasons: Iterable[str | None]) -> None:
        """Count one item's answers, each by its reason (None: valid)."""
        counts = self.counts.setdefault((criterion, condition or "all"), Counter())
        for reason in reasons:
            counts["samples"] += 1
            if reason is not None:
                counts["invalid"] += 1
                counts[reason] += 1

    @classmethod
    def of(cls, samples: pd.DataFrame) -> ShareCounts:
        """The counts of a :func:`samples_frame`."""
        out = cls()
        frame = samples.assign(condition=samples["condition"].fillna("all"))
        for (criterion, condition), group in frame.groupby(["criterion", "condition"], sort=False):
            counts: Counter[str] = Counter(
                {
                    str(reason): int(count)
                    for reason, count in group["reason"].value_counts().items()
                }
            )
            counts["samples"] = len(group)
            counts["invalid"] = int(group["reason"].notna().sum())
            out.counts[(str(criterion), str(condition))] = counts
        return out

    @classmethod
    def merged(cls, parts: Iterable[ShareCounts]) -> ShareCounts:
        """The sum of ``parts`` (keys in the order they first appear): a panel's counts are
        its judges' together."""
        out = cls()
        for part in parts:
            for key, counts in part.counts.items():
                out.counts.setdefault(key, Counter()).update(counts)
        return out

    def shares(self) -> pd.DataFrame:
        """Per criterion and condition: samples, invalid, share and a count per reason."""
        rows = []
        for (criterion, condition), counts in self.counts.items():
            row: dict[str, Any] = {
                "criterion": criterion,
                "condition": condition,
                "samples": counts["samples"],
                "invalid": counts["invalid"],
            }
            row["share"] = row["invalid"] / row["samples"] if row["samples"] else 0.0
            row.update({reason: counts[reason] for reason in REASONS})
            rows.append(row)
        columns = ["criterion", "condition", "samples", "invalid", "share", *REASONS]
        return pd.DataFrame(rows, columns=columns)

    def differences(self, conditions: Sequence[str], alpha: float = 0.05) -> list[ShareDifference]:
        """Criteria whose invalid share differs between the two conditions (Fisher's exact
        p < alpha); fewer than two conditions: none."""
        from scipy.stats import fisher_exact

        if len(conditions) != 2:
            return []
        a, b = conditions
        out = []
        for criterion in dict.fromkeys(criterion for criterion, _ in self.counts):
            in_a = self.counts.get((criterion, a), Counter())
            in_b = self.counts.get((criterion, b), Counter())
            invalid_a, samples_a = in_a["invalid"], in_a["samples"]
            invalid_b, samples_b = in_b["invalid"], in_b["samples"]
            if not samples_a or not samples_b or invalid_a + invalid_b == 0:
                continue
            table = [[invalid_a, samples_a - invalid_a], [invalid_b, samples_b - invalid_b]]
            p = float(fisher_exact(table).pvalue)
            if p < alpha:
                out.append(
                    ShareDifference(criterion, a, b, invalid_a, samples_a, invalid_b, samples_b, p)
                )
        return out


@dataclass(frozen=True)
class ShareDifference:
    """Invalid shares of one criterion under the two compared conditions, and the test."""

    criterion: str
    condition_a: str
    condition_b: str
    invalid_a: int
    samples_a: int
    invalid_b: int
    samples_b: int
    p: float

    @property
    def share_a(self) -> float:
        return self.invalid_a / self.samples_a if self.samples_a else 0.0

    @property
    def share_b(self) -> float:
        return self.invalid_b / self.samples_b if self.samples_b else 0.0

    def warning(self) -> str:
        return (
            f"{self.criterion}: {self.share_a:.1%} of the samples are invalid under "
            f"{self.condition_a} ({self.invalid_a}/{self.samples_a}) but {self.share_b:.1%} "
            f"under {self.condition_b} ({self.invalid_b}/{self.samples_b}); Fisher's exact "
            f"p = {self.p:.3g}: the comparison is made on different subsets of the answers"
        )
