"""Pairwise verdicts: each order's answers read, and each pair's two orders combined.

An item of a pairwise criterion is one pair of a group asked in one order (its record a
:class:`~geval_async.study.pairing.PairRecord`). Its answers (n samples, or one with logprobs)
are read by :mod:`geval_async.scoring.reading.pair_verdicts`; the order's verdict is the side
with more of their preference for the text shown first (a tie when it is exactly half), and
it names the condition that won. A pair's two orders are then combined: when they agree, that
is the pair's verdict (a win, or a tie); when they disagree, the pair is a tie and counts as
inconsistent. An order without a verdict (no answer yet, refused, or no readable verdict)
leaves its pair without one: invalid, never a tie. Asked in one order, its verdict is the
pair's.

Pure and sync: the read model's items in, frames out (:mod:`..stats.pairwise` reads them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...judging.store.read_model import ItemAnswers
from ...options import SamplingMode
from ...study.pairing import PairRecord
from ..reading.pair_verdicts import (
    FIRST,
    SECOND,
    TIE,
    PairVerdict,
    pair_verdict_from_logprobs,
    read_pair_verdict,
)
from ..reading.thinking import message_reasoning
from ..stats.pairwise import OUTCOME_COLUMNS, VERDICT_COLUMNS

__all__ = ["OrderVerdict", "outcomes_frame", "read_orders", "verdicts_frame"]


@dataclass(frozen=True)
class OrderVerdict:
    """One pair of a group asked in one order, its answers read.

    ``verdict`` is "A" (the text shown first won), "B" or "tie"; None without one, ``reason``
    saying why (``missing``, ``refused`` or the readers' reasons joined).
    """

    criterion: str
    record: PairRecord
    answers: tuple[str, ...]
    reasonings: tuple[str | None, ...]
    readings: tuple[PairVerdict, ...]
    missing: bool = False
    refused: bool = False

    @property
    def first_share(self) -> float | None:
        """The mean preference for the text shown first over the valid answers."""
        shares = [r.first_share for r in self.readings if r.first_share is not None]
        return sum(shares) / len(shares) if shares else None

    @property
    def verdict(self) -> str | None:
        share = self.first_share
        if share is None or self.missing or self.refused:
            return None
        return FIRST if share > 0.5 else SECOND if share < 0.5 else TIE

    @property
    def winner(self) -> str | None:
        """The condition that won this order, "tie", or None."""
        verdict = self.verdict
        if verdict is None:
            return None
        return {FIRST: self.record.first, SECOND: self.record.second, TIE: TIE}[verdict]

    @property
    def reason(self) -> str | None:
        if self.missing:
            return "missing"
        if self.refused:
            return "refused"
        if self.verdict is not None:
            return None
        return ", ".join(dict.fromkeys(str(r.reason) for r in self.readings if r.reason)) or None


def read_orders(
    answers: Iterable[ItemAnswers], mode: SamplingMode, choices_per_item: int
) -> list[OrderVerdict]:
    """Every order asked, its first ``choices_per_item`` answers read (items of rated
    criteria are passed over)."""
    reader = pair_verdict_from_logprobs if mode == SamplingMode.LOGPROBS else read_pair_verdict
    orders = []
    for item in answers:
        record = item.item.record
        if not isinstance(record, PairRecord):
            continue
        choices = item.choices[:choices_per_item]
        orders.append(
            OrderVerdict(
                item.item.criterion.name,
                record,
                tuple(_content(c) for c in choices),
                tuple(message_reasoning(_message(c)) for c in choices),
                tuple(reader(c) for c in choices),
                item.missing,
                item.refused,
            )
        )
    return orders


def _message(choice: Any) -> Any:
    return choice.get("message") if isinstance(choice, dict) else None


def _content(choice: Any) -> str:
    message = _message(choice)
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


def verdicts_frame(orders: Iterable[OrderVerdict]) -> pd.DataFrame:
    """One row per order asked (:data:`~..stats.pairwise.VERDICT_COLUMNS`)."""
    rows = []
    for order in orders:
        verdict = order.verdict
        valid = sum(r.valid for r in order.readings)
        rows.append(
            {
                "criterion": order.criterion,
                "group": order.record.group,
                "a": order.record.a,
                "b": order.record.b,
                "first": order.record.first,
                "verdict": verdict,
                "winner": order.winner,
                "first_share": order.first_share,
                "valid": valid,
                "invalid": len(order.readings) - valid,
                "reason": order.reason,
                "shown_first_won": None if verdict in (None, TIE) else verdict == FIRST,
            }
        )
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def outcomes_frame(orders: Iterable[OrderVerdict]) -> pd.DataFrame:
    """One row per pair, its orders combined (:data:`~..stats.pairwise.OUTCOME_COLUMNS`)."""
    pairs: dict[tuple[str, str | None, str, str], list[OrderVerdict]] = {}
    for order in orders:
        record = order.record
        pairs.setdefault((order.criterion, record.group, record.a, record.b), []).append(order)
    rows = []
    for (criterion, group, a, b), asked in pairs.items():
        winners = [order.winner for order in asked]
        inconsistent = False
        if any(w is None for w in winners):
            winner = None
        elif len(set(winners)) == 1:
            winner = winners[0]
        else:
            winner, inconsistent = TIE, True
        rows.append(
            {
                "criterion": criterion,
                "group": group,
                "a": a,
                "b": b,
                "winner": winner,
                "inconsistent": inconsistent,
                "orders": len(asked),
            }
        )
    return pd.DataFrame(rows, columns=OUTCOME_COLUMNS)
