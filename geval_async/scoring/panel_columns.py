"""A panel's own numbers per pooled item, held beside :class:`~.columns.ScoreColumns`.

A panel's pooled item (:class:`~.scores.PanelItemScore`) is one judge's item plus what the
pool decided: the pooled score, every judge's valid and invalid samples, and which judges
scored it and which were left out (the long table's ``judges_scored`` and
``judges_missing``). Pure: numpy only.
"""

from __future__ import annotations

import numpy as np

from .packed import Coded, PackedColumn, objects
from .scores import PanelItemScore

__all__ = ["PanelColumns"]


class PanelColumns:
    """A panel's own numbers per pooled item (:class:`~.scores.PanelItemScore`): the pooled
    score, every judge's valid and invalid samples, and the judges that scored it and those
    left out (codes of name tuples), the long table's ``judges_scored`` and ``judges_missing``.
    """

    def __init__(self) -> None:
        self.judges: Coded[tuple[str, ...]] = Coded()
        self.pooled = PackedColumn(np.nan, "d")  # NaN: none
        self.valid = PackedColumn(0)
        self.invalid = PackedColumn(0)
        self.scored = PackedColumn(0)
        self.missing = PackedColumn(0)

    def append(self, score: PanelItemScore) -> None:
        self.pooled.append(np.nan if score.pooled is None else score.pooled)
        self.valid.append(score.member_valid)
        self.invalid.append(score.member_invalid)
        self.scored.append(self.judges.code(score.judges_scored))
        self.missing.append(self.judges.code(score.judges_missing))

    def judges_scored(self) -> np.ndarray:
        """Per item, how many judges scored it."""
        counts = np.array([len(names) for names in self.judges.values], dtype=np.int64)
        return counts[self.scored.numbers()]

    def judges_missing(self) -> np.ndarray:
        """Per item, the judges left out, comma-separated ("" for none)."""
        return objects([",".join(names) for names in self.judges.values])[self.missing.numbers()]
