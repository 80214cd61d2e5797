"""Overrides from command-line flags and Python keywords: a patch read like the file.

Settings have one way in. An override (``--n 20`` on the command line, ``n=20`` to
:func:`geval_async.judge`) patches one key of one config table; the patched table is then read
by the same :class:`~geval_async.study.reader.TableReader` and the same section parser as the
file's (:mod:`geval_async.study.sections`), so an override meets exactly the checks a config
value meets: an unknown name, a wrong type or a value out of range is the same one-line
:class:`~geval_async.errors.ConfigError`, prefixed with the flag or keyword that caused it::

    config.toml: [sampling] 'n' must be at most 128 (the OpenAI maximum)
    --n 500: [sampling] 'n' must be at most 128 (the OpenAI maximum)
    n=500: [sampling] 'n' must be at most 128 (the OpenAI maximum)

Three overrides belong to a run rather than to the file: ``criteria`` (which criteria to
use), ``max_cost`` (the ``--max-cost`` cap) and ``shard`` (``--shard I/K``, one machine's share
of the plan); they are read by the same reader too. Paths given
as overrides are taken as written (relative to the working directory), not against the config
file's folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..options import JudgeApi, Provider, ReasoningEffort, SamplingMode, words
from .criteria import CriterionConfig
from .pricing import price_of
from .reader import TableReader
from .sections import (
    SECTION_KEYS,
    parse_cache,
    parse_data,
    parse_human_scale,
    parse_judge,
    parse_limits,
    parse_output,
    parse_sampling,
)
from .settings import DataConfig, EvalConfig
from .shard import Shard

__all__ = [
    "OVERRIDES",
    "Override",
    "as_given",
    "criterion_names",
    "read_overrides",
]


@dataclass(frozen=True)
class Override:
    """One override, listed once for the reader, the Python keywords and the flags.

    ``target``: the [table] key it patches (None: a setting of the run, not of the file).
    ``kind``, ``choices``, ``metavar`` and ``help``: how a command-line flag reads it.
    ``answers``: it chooses which stored answers are read (a setting that is part of a cache
    key, or which part of the study), so ``answers``, ``score`` and ``meta`` take it too;
    ``outputs``: it chooses where (and which shard) those that write outputs write.
    ``every_command``: every study command has the flag (``--max-cost`` is added by the
    commands that spend, with their own words; ``--labelled`` and ``--coverage`` by those that
    put scores on the human scale).
    """

    target: tuple[str, str] | None
    kind: type[str] | type[int] | type[float]
    help: str
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    answers: bool = False
    outputs: bool = False
    every_command: bool = True


# Every override, in the order they apply: --max-cost needs the price of the final --model.
OVERRIDES: dict[str, Override] = {
    "base_url": Override(
        ("judge", "base_url"), str, "chat-completions base URL, e.g. http://127.0.0.1:8000/v1"
    ),
    "model": Override(("judge", "model"), str, "judge model name", answers=True),
    "api": Override(
        ("judge", "api"),
        str,
        "[judge] api: chat completions or the Responses API",
        choices=tuple(words(JudgeApi)),
    ),
    "mode": Override(
        ("sampling", "mode"), str, "sampling mode", choices=tuple(words(SamplingMode)), answers=True
    ),
    "n": Override(("sampling", "n"), int, "sampled ratings per item (samples mode)", answers=True),
    "seed": Override(
        ("sampling", "seed"),
        int,
        "[sampling] seed: each draw is sent seed + its index (servers that honour it repeat it)",
        answers=True,
        every_command=False,  # a Python keyword (`meta --seed` seeds its bootstrap)
    ),
    "target_se": Override(
        ("sampling", "target_se"),
        float,
        "[sampling] target_se: draw in rounds until each item's standard error is at most this",
        metavar="SE",
        answers=True,
    ),
    "draws": Override(
        ("sampling", "draws"),
        int,
        "[sampling] draws: a budget of draws for the study, spent where ratings disagree most",
        metavar="N",
        answers=True,
    ),
    "temperature": Override(
        ("sampling", "temperature"), float, "[sampling] temperature", answers=True
    ),
    "max_tokens": Override(
        ("sampling", "max_tokens"),
        int,
        "[sampling] max_tokens: the whole completion budget",
        answers=True,
    ),
    "reasoning_effort": Override(
        ("sampling", "reasoning_effort"),
        str,
        "[sampling] reasoning_effort",
        choices=tuple(words(ReasoningEffort)),
        answers=True,
    ),
    "concurrency": Override(("limits", "concurrency"), int, "requests in flight at most"),
    "rpm": Override(("limits", "rpm"), float, "requests per minute limit"),
    "tpm": Override(("limits", "tpm"), float, "tokens per minute limit"),
    "timeout": Override(("limits", "timeout"), float, "seconds per attempt"),
    "retries": Override(
        ("limits", "retries"), int, "retries per request after a transient failure"
    ),
    "limit": Override(("data", "limit"), int, "use only the first N records", answers=True),
    "cache": Override(("cache", "path"), str, "cache folder", answers=True),
    "output": Override(("output", "path"), str, "output folder", outputs=True),
    "criteria": Override(None, str, "comma-separated criteria to use (default: all)", answers=True),
    "labelled": Override(
        ("meta", "labelled"),
        float,
        "[meta] labelled: the share of the labelled records used (seeded draw)",
        metavar="SHARE",
        outputs=True,
        every_command=False,
    ),
    "coverage": Override(
        ("meta", "coverage"),
        float,
        "[meta] coverage: the level of the intervals on the human scale",
        metavar="LEVEL",
        outputs=True,
        every_command=False,
    ),
    "max_cost": Override(
        None, float, "cap the study's estimated spend at USD", metavar="USD", every_command=False
    ),
    "shard": Override(
        None,
        str,
        "only share I of K of the items (one of K machines)",
        metavar="I/K",
        outputs=True,
    ),
}


def read_overrides(
    config: EvalConfig, overrides: Mapping[str, Any], *, flags: bool = False
) -> EvalConfig:
    """``config`` with ``overrides`` applied; ``flags``: name them as flags in errors."""
    given = {name: value for name, value in overrides.items() if value is not None}
    TableReader("flags" if flags else "overrides", "", given, set(OVERRIDES))
    for name, override in OVERRIDES.items():
        if name not in given:
            continue
        target = override.target
        value = given[name]
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        origin = f"--{name.replace('_', '-')} {value}" if flags else f"{name}={value!r}"
        if target is None:
            t = TableReader(origin, "", {name: value}, {name})
            if name == "criteria":
                names = criterion_names(t, [c.name for c in (*config.criteria, *config.pairwise)])
                config = replace(
                    config,
                    criteria=_named(config.criteria, names),
                    pairwise=_named(config.pairwise, names),
                )
            elif name == "shard":
                config = replace(config, shard=_shard(t))
            else:
                config = replace(config, max_cost=_max_cost(config, t))
            continue
        section, key = target
        patch = {key: value}
        if name == "base_url":
            patch["provider"] = Provider.OPENAI  # a base URL is the OpenAI form's
        table = {**_table(config, section), **patch}
        config = _READ[section](config, TableReader(origin, section, table, SECTION_KEYS[section]))
        if section == "sampling":  # the key is the flag's now, not a panel judge's own table's
            config = replace(config, judge_sampling=config.judge_sampling - {key})
    return config


def as_given(value: str) -> Path:
    """A path given as an override: taken as written (relative to the working directory),
    ``~`` expanded; a NUL character refused, as in the file's paths."""
    if "\x00" in value:  # as the file's paths (study.config.resolver)
        raise ConfigError(f"path {value!r} contains a NUL character")
    return Path(os.path.expanduser(value))


# How a patched table becomes the config's new section, with the file's own parsers.
_READ: dict[str, Callable[[EvalConfig, TableReader], EvalConfig]] = {
    "judge": lambda c, t: replace(c, judge=parse_judge(t)),
    "sampling": lambda c, t: replace(c, sampling=parse_sampling(t)),
    "limits": lambda c, t: replace(c, limits=parse_limits(t)),
    "data": lambda c, t: _with_data(c, *parse_data(t, as_given)),
    "cache": lambda c, t: replace(c, cache_path=parse_cache(t, as_given)),
    "output": lambda c, t: replace(c, output=parse_output(t, as_given, c.source.stem)),
    "meta": lambda c, t: replace(c, meta=replace(c.meta, **parse_human_scale(t))),
}


def _with_data(config: EvalConfig, data: DataConfig, limit: int | None) -> EvalConfig:
    return replace(config, data=data, limit=limit)


def _table(config: EvalConfig, section: str) -> dict[str, Any]:
    """A section of ``config`` as the table the file would hold for it (values as read)."""
    table: dict[str, Any]
    if section == "data":
        d = config.data
        table = {
            "path": str(d.path),
            "id": d.id_field,
            "group": d.group_field,
            "condition": d.condition_field,
            "writer": d.writer_field,
            "limit": config.limit,
        }
    elif section == "cache":
        table = {"path": str(config.cache_path)}
    elif section == "output":
        table = {"path": str(config.output.path), "prefix": config.output.prefix}
    elif section == "meta":  # the human scale's keys: the rest are read by `meta` itself
        table = {"labelled": config.meta.labelled, "coverage": config.meta.coverage}
    else:
        table = asdict(getattr(config, section))
    return {key: value for key, value in table.items() if value is not None}


def _named(
    criteria: tuple[CriterionConfig, ...], names: Sequence[str]
) -> tuple[CriterionConfig, ...]:
    """The criteria called ``names``, in the order named."""
    by_name = {c.name: c for c in criteria}
    return tuple(by_name[name] for name in names if name in by_name)


def criterion_names(t: TableReader, known: Sequence[str]) -> tuple[str, ...]:
    """The ``criteria`` override read: a comma-separated text or a list, each one of
    ``known`` (the config's criteria)."""
    wanted = t.get("criteria", (str, list))
    names = wanted.split(",") if isinstance(wanted, str) else wanted
    if not all(isinstance(name, str) for name in names):
        raise t.error("'criteria' must be criterion names, e.g. 'con,flu' or ['con', 'flu']")
    names = [name.strip() for name in names if name.strip()]
    if not names:
        raise t.error("'criteria' must name at least one criterion")
    unknown = set(names) - set(known)
    for name in names:
        if name in unknown:
            raise t.error(f"no criterion named {name!r} (the config has: {', '.join(known)})")
    return tuple(names)


def _max_cost(config: EvalConfig, t: TableReader) -> float:
    max_cost = float(t.positive("max_cost", None))
    model = config.judge.model
    if price_of(model, config.price_table) is None:
        raise t.error(
            f"the cap needs the price of model {model!r}: add it to {config.source} "
            f'as [prices] "{model}" = [input, output] (USD per million tokens)'
        )
    return max_cost


def _shard(t: TableReader) -> Shard:
    given = t.get("shard", (str, Shard))
    shard = given if isinstance(given, Shard) else Shard.parse(given)
    if shard is None:
        raise t.error("give I/K with 1 <= I <= K, e.g. 2/3 for the second of three machines")
    return shard
