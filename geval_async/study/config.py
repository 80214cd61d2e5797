"""The evaluation config: one TOML file describes a whole study.

A config names the records file and its id/group/condition fields, the judge (OpenAI or Azure
form), how to sample (n draws or token logprobs), the rate limits, the criteria (prompt file,
rating scale, which record fields each one receives), where the cache lives and where outputs
go, how to build the composite and the statistics, and (``[prices]``) what models cost, for
``--dry-run`` estimates and the ``--max-cost`` cap. Relative paths resolve against the config
file's folder; criteria are parsed in :mod:`geval_async.study.criteria`. Command-line flags
and Python keywords override settings through :func:`apply_overrides`, a patch read by the
same section parsers (:mod:`geval_async.study.overrides`; on a panel, to every judge or one:
:mod:`geval_async.study.judge_choice`).

Everything is checked here, before any request is planned: unknown keys (typos), wrong types,
missing prompt files. Problems are raised as :class:`~geval_async.errors.ConfigError` with the
file and the key in the message.
"""

from __future__ import annotations

import os
import tomllib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..options import Normalization, StatTest
from .criteria import CriterionConfig, parse_criterion
from .input_files import file_problem
from .judge_choice import apply_overrides
from .panel import parse_judges, parse_panel
from .reader import TableReader
from .sections import (
    SECTION_KEYS,
    Resolve,
    parse_bias,
    parse_cache,
    parse_data,
    parse_judge,
    parse_limits,
    parse_meta,
    parse_output,
    parse_prices,
    parse_sampling,
)
from .settings import (
    DEFAULT_BASE_URL,
    CompositeConfig,
    DataConfig,
    EvalConfig,
    JudgeConfig,
    LimitsConfig,
    MetaConfig,
    OutputConfig,
    PanelConfig,
    PanelJudge,
    SamplingConfig,
    StatsConfig,
)

__all__ = [
    "CompositeConfig",
    "CriterionConfig",
    "DEFAULT_BASE_URL",
    "DataConfig",
    "EvalConfig",
    "JudgeConfig",
    "LimitsConfig",
    "MetaConfig",
    "OutputConfig",
    "PanelConfig",
    "PanelJudge",
    "SamplingConfig",
    "StatsConfig",
    "apply_overrides",
    "load_config",
    "parse_config",
]

# --- loading -------------------------------------------------------------------------------


def load_config(path: str | os.PathLike[str]) -> EvalConfig:
    """Read and check a study config.

    Raises:
        ConfigError: the file is missing, unreadable, not TOML, or describes an invalid study.
    """
    source = Path(path)
    return parse_config(read_document(source), source)


def read_document(source: Path) -> dict[str, Any]:
    """The parsed TOML of a config file; ConfigError if missing, unreadable or not TOML."""
    problem = file_problem(source)  # a FIFO would block the open, a device never end
    if problem is not None:
        raise ConfigError(f"{source}: config file {problem}")
    try:
        # utf-8-sig: Windows editors save a byte order mark, which TOML alone calls an
        # "Invalid statement (at line 1, column 1)".
        return tomllib.loads(source.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(f"{source}: config file not found") from None
    except RecursionError as exc:
        # Tables or arrays nested hundreds deep: Python's parser runs out of stack.
        raise ConfigError(
            f"{source}: not a study config (tables or arrays nested too deep to read)"
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{source}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x}): "
            "save the config file as UTF-8"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the config file ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML ({exc})") from exc


def parse_config(document: Mapping[str, Any], source: Path) -> EvalConfig:
    """Build an :class:`EvalConfig` from a parsed TOML document (paths relative to ``source``)."""
    readers = section_readers(document, source)

    def table(name: str) -> TableReader:
        return readers[name]

    resolve = resolver(source)
    data, data_limit = parse_data(table("data"), resolve)
    judges: tuple[PanelJudge, ...] = ()
    if "judges" in document:
        if "judge" in document:
            raise ConfigError(
                f"{source}: both [judge] and [[judges]]: use [judge] for one judge or "
                "[[judges]] for a panel, not both"
            )
        judges = parse_judges(
            source, document["judges"], table("sampling").table, table("limits").table
        )
        # The first judge stands for the panel where one judge is read (see EvalConfig).
        judge, sampling, limits = judges[0].judge, judges[0].sampling, judges[0].limits
    else:
        judge = parse_judge(table("judge"))
        sampling = parse_sampling(table("sampling"))
        limits = parse_limits(table("limits"))

    raw_criteria = document.get("criteria")
    if not isinstance(raw_criteria, list) or not raw_criteria:
        raise ConfigError(f"{source}: no criteria: add at least one [[criteria]] table")
    parsed = tuple(
        parse_criterion(source, i, c, resolve) for i, c in enumerate(raw_criteria, start=1)
    )
    # Pairwise criteria are planned and judged with the rest but scored apart (a verdict
    # between two texts, not a rating of one): the tables, composite and tests never see them.
    criteria = tuple(c for c in parsed if not c.is_pairwise)
    pairwise = tuple(c for c in parsed if c.is_pairwise)
    names = [c.name for c in parsed]
    # Counted and looked up by hash, not by list.count or `in names`: for 10,000 criteria
    # each of those checks is 100 million comparisons.
    known = Counter(names)
    duplicated = sorted(n for n, uses in known.items() if uses > 1)
    if duplicated:
        raise ConfigError(f"{source}: criterion name {duplicated[0]!r} is used twice")
    by_fold: dict[str, str] = {}
    for name in names:
        other = by_fold.setdefault(name.casefold(), name)
        if other != name:
            raise ConfigError(
                f"{source}: criterion names {other!r} and {name!r} differ only in case: their "
                "output files would be one file on macOS and Windows; rename one"
            )

    output = parse_output(table("output"), resolve, source.stem)
    composite_t = table("composite")
    rated = [c.name for c in criteria]
    composite_names = tuple(composite_t.get("criteria", list, rated))
    rated_names = set(rated)  # looked up by hash, as the names above
    for name in composite_names:
        if not isinstance(name, str):
            raise composite_t.error(
                f'\'criteria\' holds {name!r}: list the criteria\'s names, e.g. ["con", "flu"]'
            )
        if name not in rated_names:
            raise composite_t.error(
                f"criterion {name!r} is not among the [[criteria]]"
                + (" that rate (a pairwise criterion has no score)" if name in known else "")
            )
    composite = CompositeConfig(
        criteria=composite_names,
        normalize=composite_t.choice("normalize", Normalization, Normalization.MAX),
    )
    stats_t = table("stats")
    conditions = tuple(str(c) for c in stats_t.get("conditions", list, []))
    if conditions and len(conditions) != 2:
        raise stats_t.error("'conditions' must name exactly two conditions to compare")
    alpha = stats_t.get("alpha", (int, float), 0.05)
    if not 0 < alpha < 1:
        raise stats_t.error(f"'alpha' must be between 0 and 1, not {alpha!r}")
    stats = StatsConfig(
        conditions=conditions,
        alpha=float(alpha),
        # Unset is not Welch: the design chooses then, while a named test is always honoured.
        test=stats_t.choice("test", StatTest, StatTest.WELCH) if "test" in stats_t.table else None,
    )
    return EvalConfig(
        source=source,
        data=data,
        judge=judge,
        sampling=sampling,
        limits=limits,
        criteria=criteria,
        cache_path=parse_cache(table("cache"), resolve),
        output=output,
        composite=composite,
        stats=stats,
        limit=data_limit,
        meta=parse_meta(table("meta"), rated, resolve),
        bias=parse_bias(table("bias"), rated),
        prices=parse_prices(source, document.get("prices", {})),
        judges=judges,
        panel=parse_panel(table("panel"), judges),
        pairwise=pairwise,
    )


def section_readers(document: Mapping[str, Any], source: Path) -> dict[str, TableReader]:
    """A reader per section; raises on an unknown section or, in any section, an unknown key."""
    lists = {"criteria", "prices", "judges"}  # read apart from the plain sections
    unknown = sorted(set(document) - set(SECTION_KEYS) - lists)
    if unknown:
        raise ConfigError(
            f"{source}: unknown section [{unknown[0]}] "
            f"(known: {', '.join(sorted([*SECTION_KEYS, *lists]))})"
        )
    readers: dict[str, TableReader] = {}
    # Every section is checked for unknown keys first: a typo is the likeliest mistake.
    for name, known in SECTION_KEYS.items():
        value = document.get(name, {})
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: [{name}] must be a table")
        readers[name] = TableReader(source, name, value, known)
    return readers


def resolver(source: Path) -> Resolve:
    """Resolves a path of the config against the config file's folder (``~`` expanded)."""
    folder = source.resolve().parent

    def resolve(value: str) -> Path:
        if "\x00" in value:  # no file system takes it; Path would fail later, far from here
            raise ConfigError(f"{source}: path {value!r} contains a NUL character")
        candidate = Path(os.path.expanduser(value))
        return candidate if candidate.is_absolute() else folder / candidate

    return resolve
