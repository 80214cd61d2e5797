"""The records a study's items name, as codes: the group tables' rows and columns, the design
(paired or not) and the conditions present are read from them.

Each record the items name once, in the order they first do, with its group's and its
condition's code into their distinct names (None a name of its own): a few bytes a record,
where a frame of their ids, groups and conditions as objects and pandas strings, factorized,
took about 35 MB of resident set at 250,000 records (``score`` of the million's peak).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .columns import ScoreColumns
from .packed import first_codes

__all__ = ["RecordHeads"]


@dataclass(frozen=True)
class RecordHeads:
    """The records named (codes into ``columns.record_ids``) and their groups and conditions."""

    present: np.ndarray
    groups: np.ndarray  # per record named, a code into group_names
    group_names: list[Any]
    conditions: np.ndarray  # per record named, a code into condition_names
    condition_names: list[Any]

    @classmethod
    def of(cls, columns: ScoreColumns) -> RecordHeads:
        present = columns.records_present()
        at = present  # read a number at a time (a list of them would take 8 MB)
        groups, group_names = first_codes(map(columns.record_groups.__getitem__, at), len(at))
        conditions, condition_names = first_codes(
            map(columns.record_conditions.__getitem__, at), len(at)
        )
        return cls(present, groups, group_names, conditions, condition_names)

    @property
    def by_group(self) -> bool:
        """Whether any record named has a group (else each record is a row of its own)."""
        return any(name is not None for name in self.group_names)

    def rows(self, record_ids: list[str]) -> tuple[np.ndarray, list[Any]]:
        """Per record named, its row of the group tables, and the rows' names in the order
        they first appear: its group's, or (no record has one) its id's."""
        if self.by_group:
            return self.groups, self.group_names
        at = self.present
        return first_codes(map(record_ids.__getitem__, at), len(at))

    def conditions_seen(self) -> list[Any]:
        """The conditions of the records named, in the order they first appear (no None)."""
        return [name for name in self.condition_names if name is not None]

    def groups_under(self, condition: str) -> np.ndarray:
        """Per group (by code), whether it has a record named under ``condition`` (a flag a
        group: a set of 125,000 groups' codes took 12 MB)."""
        codes = [k for k, name in enumerate(self.condition_names) if name == condition]
        under = np.zeros(len(self.group_names), dtype=bool)
        under[self.groups[np.isin(self.conditions, codes)]] = True
        return under
