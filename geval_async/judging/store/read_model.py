"""The read model: a study's stored answers as the scoring stage reads them.

The judging room owns the cache, the walk of an item's chunks (:mod:`.coverage`) and the rule
that keeps the simulated judge's answers apart from a real server's (:mod:`.origin`); the
scoring stage imports nothing of judging but this module. It is handed, per item of the plan
in plan order, the choices of its answers (draw order) or why it has none (missing, refused),
and, for the study, what was learnt while reading: which servers answered, how many entries
did not decode, and when the answers arrived (first and last), so that a view renders that
without opening the cache or hashing a request.

The walk streams: an item's entries are let go once its choices are handed on, so scoring a
large cache does not hold every body at once.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...study.plan import JudgeItem, Study
from .cache import JudgeCache
from .coverage import Coverage, item_states
from .folder import existing_cache
from .left import Left, left_of
from .origin import ServerEntries
from .stored_steps import read_steps, require_steps

__all__ = [
    "Coverage",
    "EntrySpend",
    "ItemAnswers",
    "JudgeCache",
    "StudyAnswers",
    "open_answers",
    "stored_study",
]


class EntrySpend(NamedTuple):
    """What one stored request of an item took: the draws it asked for and received, and the
    usage the server reported (None: it reported none). A study that spends its draws by need
    counts its requests and prices its answers from these, without keeping the bodies."""

    asked: int
    received: int
    usage: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class ItemAnswers:
    """One item's stored answers: the choices of its entries in draw order, or why none.

    ``missing``: the cache lacks a chunk the item needs; ``refused``: the judge refused a
    request of it for good. Either way ``choices`` holds what came before. ``left``: where it
    stands; in batch when the chunk it lacks is asked by a live batch job (of the keys the
    read model was given).
    """

    item: JudgeItem
    choices: list[dict[str, Any]]
    missing: bool = False
    refused: bool = False
    served: tuple[str, ...] = ()  # the models the server said it served, as it named them
    left: Left = Left.CACHED  # where it stands (left_of: the rule a run sends by)
    # Each stored request of the chain, in draw order, when the study spends its draws by
    # need (the usage dict is the entry's own: nothing is parsed until the spend is read).
    spent: tuple[EntrySpend, ...] = ()

    @property
    def in_batch(self) -> bool:
        return self.left is Left.IN_BATCH


class StudyAnswers:
    """Every item's answers in plan order (read when iterated), and what the reading found.

    Args:
        study: the prepared study.
        cache: the open cache; read under the origin rule with no server chosen, so that
            :attr:`mixed` tells when the simulated judge and a real server both answered.
        in_batch: the keys live batch jobs are asking for (``status`` tells those items apart).
    """

    def __init__(
        self, study: Study, cache: JudgeCache, in_batch: Container[str] = frozenset()
    ) -> None:
        self.study = study
        self._cache = cache
        self._in_batch = in_batch
        self._entries = ServerEntries(cache, None)
        self.first_arrived: float | None = None
        self.last_arrived: float | None = None

    def __iter__(self) -> Iterator[ItemAnswers]:
        first, last = self.first_arrived, self.last_arrived
        # Only a study that spends its draws by need prices its requests: a fixed one's walk
        # makes nothing more an entry.
        spending = self.study.config.sampling.adaptive
        for state in item_states(self.study, self._entries):
            choices: list[dict[str, Any]] = []
            served: list[str] = []
            spent: list[EntrySpend] = []
            for entry in state.entries:
                if spending:
                    spent.append(EntrySpend(entry.n, entry.received, entry.usage))
                entry_choices, model = entry.answer()
                choices.extend(entry_choices)
                if model is not None and model not in served:
                    served.append(model)
                if first is None or entry.time < first:
                    first = entry.time
                if last is None or entry.time > last:
                    last = entry.time
            yield ItemAnswers(
                state.item,
                choices,
                bool(state.missing),
                state.refused is not None,
                tuple(served),
                left=left_of(state, self._in_batch),
                spent=tuple(spent),
            )
            self.first_arrived, self.last_arrived = first, last

    @property
    def arrived(self) -> tuple[float, float] | None:
        """When the answers read arrived (UNIX times, first and last); None when none was."""
        if self.first_arrived is None or self.last_arrived is None:
            return None
        return self.first_arrived, self.last_arrived

    @property
    def simulated(self) -> bool:
        """Whether the simulated judge gave any of the answers read."""
        return True in self._entries.origins

    @property
    def mixed(self) -> bool:
        """Whether the answers read come from the simulated judge and from another server."""
        return self._entries.origins == {True, False}

    @property
    def corrupted(self) -> int:
        """Entries that did not decode (read as missing)."""
        return len(self._cache.corrupted)


@contextmanager
def open_answers(study: Study, in_batch: Container[str] = frozenset()) -> Iterator[StudyAnswers]:
    """The study's cache opened to read only (nothing created or changed), as a read model.

    Its ``study`` has the generated evaluation steps in place, read from the cache;
    ``in_batch``: the keys live batch jobs are asking for.

    Raises:
        ConfigError: the cache folder is missing or is not one (a mistyped ``--cache`` read
            as empty would report every item missing), or generated steps are not in the
            cache (run ``run`` first).
    """
    config = study.config
    with JudgeCache(existing_cache(config.cache_path, config.source), create=False) as cache:
        yield StudyAnswers(require_steps(study, ServerEntries(cache, None)), cache, in_batch)


def stored_study(study: Study) -> Study:
    """The study with the generated evaluation steps its cache holds in place, the cache read
    as :func:`open_answers` reads it; the criteria whose steps it lacks stay in
    ``pending_steps`` (a missing folder holds none): what ``geval-async steps`` shows."""
    with JudgeCache(study.config.cache_path, create=False) as cache:
        return read_steps(study, ServerEntries(cache, None))[0]
