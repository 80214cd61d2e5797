"""A panel of judges: the ``[[judges]]`` tables and ``[panel]`` of a study config.

A panel config lists several judges instead of one ``[judge]``. Each ``[[judges]]`` table holds
a ``name`` and the keys of ``[judge]`` (model, base_url or the Azure fields, api_key_env,
headers), and may hold its own ``[judges.sampling]`` and ``[judges.limits]``: the study's
``[sampling]`` and ``[limits]`` with that judge's keys on top, read by the same section parsers
(different providers have different quotas; a judge may need its own temperature). ``[panel]``
says how the judges' record scores are pooled (``pool = "mean" | "median"``, ``weights``).

Each judge's answers are keyed by its own model and sampling, as one judge's are (the base URL
is not part of a key: :mod:`geval_async.study.keys`), so a judge of a panel and the same judge
alone share their cache entries. Two judges whose requests would have the same keys are refused
here: the second would read the first's answers, and their "agreement" would be a judge agreeing
with itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..options import PanelPool
from .file_names import is_file_name_part
from .reader import TableReader
from .sections import SECTION_KEYS, parse_judge, parse_limits, parse_sampling
from .settings import PanelConfig, PanelJudge

__all__ = ["JUDGE_KEYS", "PANEL_KEYS", "PANEL_NAME", "parse_judges", "parse_panel"]

# A [[judges]] table: [judge]'s keys, its name, and its own sampling and limits tables.
JUDGE_KEYS = SECTION_KEYS["judge"] | {"name", "sampling", "limits"}
PANEL_KEYS = {"pool", "weights"}
PANEL_NAME = "panel"  # the pooled scores' name beside the judges' (long table, meta)


def parse_judges(
    source: Path,
    raw: Any,
    sampling: Mapping[str, Any],
    limits: Mapping[str, Any],
) -> tuple[PanelJudge, ...]:
    """The ``[[judges]]`` of a config; ``sampling`` and ``limits`` are the study's tables."""
    if not isinstance(raw, list) or not raw or not all(isinstance(t, dict) for t in raw):
        raise ConfigError(f"{source}: 'judges' must be [[judges]] tables, one per judge")
    judges: list[PanelJudge] = []
    for position, table in enumerate(raw, start=1):
        t = TableReader(source, f"judges] [{position}", table, JUDGE_KEYS)
        name = t.required("name", str)
        if not is_file_name_part(name):
            raise t.error(
                f"'name' {name!r} must be letters, digits, '.', '_' or '-' (it names the "
                "judge's output files)"
            )
        if name.casefold() == PANEL_NAME:
            raise t.error(
                f"'name' {name!r} is the panel's own name (the `judge` column of the long table "
                "and meta's tables call the pooled scores 'panel'): name the judge otherwise"
            )
        where = f"judges.{name}"
        own_sampling = t.get("sampling", dict, {})
        own_limits = t.get("limits", dict, {})
        endpoint = {k: v for k, v in table.items() if k in SECTION_KEYS["judge"]}
        judges.append(
            PanelJudge(
                name=name,
                judge=parse_judge(TableReader(source, where, endpoint, SECTION_KEYS["judge"])),
                sampling=parse_sampling(
                    TableReader(
                        source,
                        f"{where}.sampling",
                        {**sampling, **own_sampling},
                        SECTION_KEYS["sampling"],
                    )
                ),
                limits=parse_limits(
                    TableReader(
                        source, f"{where}.limits", {**limits, **own_limits}, SECTION_KEYS["limits"]
                    )
                ),
                own_sampling=frozenset(own_sampling),
            )
        )
    _check_distinct(source, judges)
    return tuple(judges)


def _check_distinct(source: Path, judges: list[PanelJudge]) -> None:
    """Judge names unique (case aside: they name files), and no two judges the same requests."""
    seen: dict[str, str] = {}
    asks: dict[tuple[str, Any], str] = {}
    for member in judges:
        folded = member.name.casefold()
        if folded in seen:
            raise ConfigError(
                f"{source}: judge names {seen[folded]!r} and {member.name!r} are one name "
                "(names are compared without case: they name output files); rename one"
            )
        seen[folded] = member.name
        # What the keys hold of a judge: its model and its sampling (min_valid_mass is read
        # by scoring only); the endpoint is not in a key.
        ask = (member.judge.model, replace(member.sampling, min_valid_mass=0.0))
        if ask in asks:
            raise ConfigError(
                f"{source}: judges {asks[ask]!r} and {member.name!r} would share their cached "
                "answers (the same model and sampling; a cache key does not hold the endpoint): "
                "give one a different model name or [judges.sampling], or remove it"
            )
        asks[ask] = member.name


def parse_panel(t: TableReader, judges: tuple[PanelJudge, ...]) -> PanelConfig:
    """``[panel]``: the pooling and the judges' weights (only with ``[[judges]]``)."""
    if t.table and not judges:
        raise t.error("[panel] needs [[judges]]: a study with one [judge] has no panel to pool")
    weights = t.get("weights", dict, {})
    names = [j.name for j in judges]
    for name, weight in weights.items():
        if name not in names:
            raise t.error(f"'weights' names {name!r}, which is not among the [[judges]] {names}")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0:
            raise t.error(f"'weights' of {name!r} must be a number 0 or above, not {weight!r}")
    if names and sum(weights.get(n, 1.0) for n in names) <= 0:
        raise t.error("'weights' must give at least one judge a weight above 0")
    return PanelConfig(
        pool=t.choice("pool", PanelPool, PanelPool.MEAN),
        weights={name: float(w) for name, w in weights.items()},
    )
