"""The evaluation config: one TOML file describes a whole study.

A config names the records file and its id/group/condition fields, the judge (OpenAI or Azure
form), how to sample (n draws or token logprobs), the rate limits, the criteria (prompt file,
rating scale, which record fields each one receives), where the cache lives and where outputs
go, how to build the composite and the statistics, and (``[prices]``) what models cost, for
``--dry-run`` estimates and the ``--max-cost`` cap. Relative paths resolve against the config
file's folder; criteria are parsed in :mod:`geval_async.criteria`. Command-line flags
override the common settings through :func:`apply_overrides`.

Everything is checked here, before any request is planned: unknown keys (typos), wrong types,
missing prompt files. Problems are raised as :class:`~geval_async.errors.ConfigError` with the
file and the key in the message.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..options import Normalization, Provider, SamplingMode, StatTest, parse_option
from .criteria import CriterionConfig, parse_criterion
from .pricing import price_of
from .reader import TableReader
from .sections import parse_judge, parse_meta, parse_prices, parse_sampling
from .settings import (
    DEFAULT_BASE_URL,
    CompositeConfig,
    DataConfig,
    EvalConfig,
    JudgeConfig,
    LimitsConfig,
    MetaConfig,
    OutputConfig,
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
    "SamplingConfig",
    "StatsConfig",
    "apply_overrides",
    "load_config",
    "parse_config",
]

# --- loading -------------------------------------------------------------------------------

_SECTIONS = {
    "data": {"path", "id", "group", "condition", "limit"},
    "judge": {
        "model",
        "provider",
        "base_url",
        "api_key_env",
        "azure_endpoint",
        "deployment",
        "api_version",
        "headers",
    },
    "sampling": {"mode", "n", "temperature", "top_p", "max_tokens", "top_logprobs", "seed"},
    "limits": {"rpm", "tpm", "concurrency", "retries", "timeout", "backoff", "max_backoff"},
    "cache": {"path"},
    "output": {"path", "prefix"},
    "composite": {"criteria", "normalize"},
    "stats": {"conditions", "alpha", "test"},
    "meta": {"human", "bootstrap", "seed", "confidence"},
}


def load_config(path: str | os.PathLike[str]) -> EvalConfig:
    """Read and check a study config.

    Raises:
        ConfigError: the file is missing, unreadable, not TOML, or describes an invalid study.
    """
    source = Path(path)
    try:
        document = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{source}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read the config file ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML ({exc})") from exc
    return parse_config(document, source)


def parse_config(document: Mapping[str, Any], source: Path) -> EvalConfig:
    """Build an :class:`EvalConfig` from a parsed TOML document (paths relative to ``source``)."""
    folder = source.resolve().parent
    unknown = sorted(set(document) - set(_SECTIONS) - {"criteria", "prices"})
    if unknown:
        raise ConfigError(
            f"{source}: unknown section [{unknown[0]}] "
            f"(known: {', '.join(sorted([*_SECTIONS, 'criteria', 'prices']))})"
        )

    readers: dict[str, TableReader] = {}
    # Every section is checked for unknown keys first: a typo is the likeliest mistake.
    for name, known in _SECTIONS.items():
        value = document.get(name, {})
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: [{name}] must be a table")
        readers[name] = TableReader(source, name, value, known)

    def table(name: str) -> TableReader:
        return readers[name]

    def resolve(value: str) -> Path:
        candidate = Path(os.path.expanduser(value))
        return candidate if candidate.is_absolute() else folder / candidate

    data_t = table("data")
    data = DataConfig(
        path=resolve(data_t.required("path", str)),
        id_field=data_t.get("id", str, "id"),
        group_field=data_t.get("group", str),
        condition_field=data_t.get("condition", str),
    )
    judge = parse_judge(table("judge"))
    sampling = parse_sampling(table("sampling"))
    limits_t = table("limits")
    limits = LimitsConfig(
        rpm=limits_t.positive("rpm", None),
        tpm=limits_t.positive("tpm", None),
        concurrency=limits_t.positive("concurrency", 16, integer=True),
        retries=limits_t.get("retries", int, 8),
        timeout=limits_t.positive("timeout", 60.0),
        backoff=limits_t.positive("backoff", 0.5),
        max_backoff=limits_t.positive("max_backoff", 60.0),
    )
    if limits.retries < 0:
        raise limits_t.error("'retries' must be 0 or more")

    raw_criteria = document.get("criteria")
    if not isinstance(raw_criteria, list) or not raw_criteria:
        raise ConfigError(f"{source}: no criteria: add at least one [[criteria]] table")
    criteria = tuple(
        parse_criterion(source, i, c, resolve) for i, c in enumerate(raw_criteria, start=1)
    )
    names = [c.name for c in criteria]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ConfigError(f"{source}: criterion name {duplicated[0]!r} is used twice")

    data_limit = data_t.positive("limit", None, integer=True)
    cache_t = table("cache")
    output_t = table("output")
    output = OutputConfig(
        path=resolve(output_t.get("path", str, "out")),
        prefix=output_t.get("prefix", str, source.stem),
    )
    composite_t = table("composite")
    composite_names = tuple(composite_t.get("criteria", list, names))
    for name in composite_names:
        if name not in names:
            raise composite_t.error(f"criterion {name!r} is not among the [[criteria]]")
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
        test=stats_t.choice("test", StatTest, StatTest.WELCH),
    )
    return EvalConfig(
        source=source,
        data=data,
        judge=judge,
        sampling=sampling,
        limits=limits,
        criteria=criteria,
        cache_path=resolve(cache_t.get("path", str, "cache")),
        output=output,
        composite=composite,
        stats=stats,
        limit=data_limit,
        meta=parse_meta(table("meta"), names),
        prices=parse_prices(source, document.get("prices", {})),
    )


def apply_overrides(config: EvalConfig, **overrides: Any) -> EvalConfig:
    """Apply command-line overrides (None means "not given").

    Known names: base_url, model, cache, concurrency, rpm, tpm, n, mode, criteria (a
    comma-separated list or a list of names), limit, timeout, retries, output, max_cost.
    """
    o = {k: v for k, v in overrides.items() if v is not None}
    judge, sampling, limits = config.judge, config.sampling, config.limits
    if "base_url" in o:
        judge = replace(judge, base_url=o["base_url"], provider=Provider.OPENAI)
    if "model" in o:
        judge = replace(judge, model=o["model"])
    if "mode" in o:
        sampling = replace(sampling, mode=parse_option(SamplingMode, o["mode"], "--mode"))
    if "n" in o:
        if o["n"] < 1:
            raise ConfigError("--n must be at least 1")
        sampling = replace(sampling, n=o["n"])
    for name in ("concurrency", "rpm", "tpm", "timeout", "retries"):
        if name in o:
            if o[name] < 0 or (o[name] == 0 and name != "retries") or not math.isfinite(o[name]):
                raise ConfigError(f"--{name} must be positive")
            limits = replace(limits, **{name: o[name]})
    criteria = config.criteria
    if "criteria" in o:
        wanted = o["criteria"]
        names = [w.strip() for w in wanted.split(",")] if isinstance(wanted, str) else wanted
        names = [n for n in names if n]
        criteria = tuple(config.criterion(n) for n in names)
    cache_path = Path(o["cache"]) if "cache" in o else config.cache_path
    output = replace(config.output, path=Path(o["output"])) if "output" in o else config.output
    limit = o.get("limit", config.limit)
    if limit is not None and limit < 1:
        raise ConfigError("--limit must be at least 1")
    max_cost = o.get("max_cost", config.max_cost)
    if max_cost is not None:
        if not (math.isfinite(max_cost) and max_cost > 0):
            raise ConfigError("--max-cost must be a positive amount of USD")
        if price_of(judge.model, config.price_table) is None:
            raise ConfigError(
                f"--max-cost needs the price of model {judge.model!r}: add it to {config.source} "
                f'as [prices] "{judge.model}" = [input, output] (USD per million tokens)'
            )
    return replace(
        config,
        judge=judge,
        sampling=sampling,
        limits=limits,
        criteria=criteria,
        cache_path=cache_path,
        output=output,
        limit=limit,
        max_cost=max_cost,
    )
