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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .criteria import CriterionConfig, parse_criterion
from .errors import ConfigError
from .pricing import PRICES, price_of

DEFAULT_BASE_URL = "https://api.openai.com/v1"
SAMPLING_MODES = ("samples", "logprobs")
NORMALIZATIONS = ("max", "minmax")
TESTS = ("welch", "paired-t", "wilcoxon")


@dataclass(frozen=True)
class DataConfig:
    """Where the records are and which of their fields identify them."""

    path: Path
    id_field: str = "id"
    group_field: str | None = None
    condition_field: str | None = None


@dataclass(frozen=True)
class JudgeConfig:
    """The judge endpoint: OpenAI chat-completions form or Azure OpenAI's deployment form."""

    model: str
    provider: str = "openai"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    azure_endpoint: str | None = None
    deployment: str | None = None
    api_version: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The full chat-completions URL."""
        if self.provider == "azure":
            endpoint = (self.azure_endpoint or "").rstrip("/")
            return (
                f"{endpoint}/openai/deployments/{self.deployment}/chat/completions"
                f"?api-version={self.api_version}"
            )
        return f"{(self.base_url or DEFAULT_BASE_URL).rstrip('/')}/chat/completions"

    @property
    def is_local(self) -> bool:
        """Whether the judge is on this machine (a local server may need no key)."""
        host = urlsplit(self.url).hostname or ""
        return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")

    def api_key(self) -> str | None:
        """The key from the environment, or None. Never stored, logged or hashed."""
        return os.environ.get(self.api_key_env) or None

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """Request headers carrying the key in this provider's form."""
        headers = dict(self.headers)
        if key:
            if self.provider == "azure":
                headers["api-key"] = key
            else:
                headers["Authorization"] = f"Bearer {key}"
        return headers


@dataclass(frozen=True)
class SamplingConfig:
    """How each item is judged: n sampled ratings, or one answer with token logprobs."""

    mode: str = "samples"
    n: int = 10
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 5
    top_logprobs: int = 20
    seed: int | None = None

    @property
    def choices_per_item(self) -> int:
        """How many judge answers (choices) one item needs."""
        return 1 if self.mode == "logprobs" else self.n


@dataclass(frozen=True)
class LimitsConfig:
    """Client-side limits; none of these changes an answer, so none is part of a cache key."""

    rpm: float | None = None
    tpm: float | None = None
    concurrency: int = 16
    retries: int = 8
    timeout: float = 60.0
    backoff: float = 0.5
    max_backoff: float = 60.0


@dataclass(frozen=True)
class CompositeConfig:
    """The 100-point composite: which criteria, normalised how."""

    criteria: tuple[str, ...]
    normalize: str = "max"


@dataclass(frozen=True)
class StatsConfig:
    """The two conditions compared, the test and the FDR level."""

    conditions: tuple[str, ...] = ()
    alpha: float = 0.05
    test: str = "welch"


@dataclass(frozen=True)
class MetaConfig:
    """Meta-evaluation: the record field (dotted path) holding each criterion's human score,
    and the bootstrap over documents (see :mod:`geval_async.meta`)."""

    human: Mapping[str, str] = field(default_factory=dict)
    bootstrap: int = 1000
    seed: int = 0
    confidence: float = 0.95


@dataclass(frozen=True)
class OutputConfig:
    """Where tables, statistics, plots and raw exports go."""

    path: Path
    prefix: str = "geval"


@dataclass(frozen=True)
class EvalConfig:
    """A whole study, as loaded from one TOML file (plus overrides)."""

    source: Path
    data: DataConfig
    judge: JudgeConfig
    sampling: SamplingConfig
    limits: LimitsConfig
    criteria: tuple[CriterionConfig, ...]
    cache_path: Path
    output: OutputConfig
    composite: CompositeConfig
    stats: StatsConfig
    limit: int | None = None
    meta: MetaConfig = field(default_factory=MetaConfig)
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    max_cost: float | None = None

    @property
    def price_table(self) -> dict[str, tuple[float, float]]:
        """Built-in prices with the config's ``[prices]`` added (model prefix -> in, out)."""
        return {**PRICES, **self.prices}

    def criterion(self, name: str) -> CriterionConfig:
        """The criterion called ``name``."""
        for criterion in self.criteria:
            if criterion.name == name:
                return criterion
        raise ConfigError(f"{self.source}: no criterion named {name!r}")


# --- loading -------------------------------------------------------------------------------

_SECTIONS = {
    "data": {"path", "id", "group", "condition", "limit"},
    "judge": {
        "model", "provider", "base_url", "api_key_env", "azure_endpoint", "deployment",
        "api_version", "headers",
    },
    "sampling": {"mode", "n", "temperature", "top_p", "max_tokens", "top_logprobs", "seed"},
    "limits": {"rpm", "tpm", "concurrency", "retries", "timeout", "backoff", "max_backoff"},
    "cache": {"path"},
    "output": {"path", "prefix"},
    "composite": {"criteria", "normalize"},
    "stats": {"conditions", "alpha", "test"},
    "meta": {"human", "bootstrap", "seed", "confidence"},
}


class _Reader:
    """Typed access to one table of the TOML document, with errors naming file and key."""

    def __init__(self, source: Path, where: str, table: Mapping[str, Any], known: set[str]):
        self.source, self.where, self.table = source, where, table
        unknown = sorted(set(table) - known)
        if unknown:
            raise self.error(
                f"unknown key {unknown[0]!r} (known keys: {', '.join(sorted(known))})"
            )

    def error(self, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: [{self.where}] {message}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        value = self.table.get(key, default)
        if value is None:
            return None
        # bool is an int in Python; a TOML `n = true` is still a mistake.
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.error(f"{key!r} must be {_kind_name(kind)}, not {value!r}")
        if not isinstance(value, kind):
            raise self.error(f"{key!r} must be {_kind_name(kind)}, not {value!r}")
        return value

    def required(self, key: str, kind: type | tuple[type, ...]) -> Any:
        value = self.get(key, kind)
        if value is None:
            raise self.error(f"{key!r} is required")
        return value

    def positive(self, key: str, default: float | None, *, integer: bool = False) -> Any:
        value = self.get(key, int if integer else (int, float), default)
        # NaN passes a `<= 0` test, and inf is no limit or timeout anyone can wait for.
        if value is not None and (value <= 0 or not math.isfinite(value)):
            raise self.error(f"{key!r} must be a positive number, not {value!r}")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self.get(key, str, default)
        if value not in choices:
            raise self.error(f"{key!r} must be one of {', '.join(choices)}, not {value!r}")
        return str(value)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "a number", float: "a number", str: "a string", list: "a list", dict: "a table"}
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


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

    readers: dict[str, _Reader] = {}
    # Every section is checked for unknown keys first: a typo is the likeliest mistake.
    for name, known in _SECTIONS.items():
        value = document.get(name, {})
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: [{name}] must be a table")
        readers[name] = _Reader(source, name, value, known)

    def table(name: str) -> _Reader:
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
    judge = _parse_judge(table("judge"))
    sampling = _parse_sampling(table("sampling"))
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
        parse_criterion(source, i, c, resolve, _Reader) for i, c in enumerate(raw_criteria, start=1)
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
        normalize=composite_t.choice("normalize", NORMALIZATIONS, "max"),
    )
    stats_t = table("stats")
    conditions = tuple(str(c) for c in stats_t.get("conditions", list, []))
    if conditions and len(conditions) != 2:
        raise stats_t.error("'conditions' must name exactly two conditions to compare")
    alpha = stats_t.get("alpha", (int, float), 0.05)
    if not 0 < alpha < 1:
        raise stats_t.error(f"'alpha' must be between 0 and 1, not {alpha!r}")
    stats = StatsConfig(
        conditions=conditions, alpha=float(alpha), test=stats_t.choice("test", TESTS, "welch")
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
        meta=_parse_meta(table("meta"), names),
        prices=_parse_prices(source, document.get("prices", {})),
    )


def _parse_prices(source: Path, table: Any) -> dict[str, tuple[float, float]]:
    """``[prices]``: model (prefix) -> [input, output] USD per million tokens."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [prices] must be a table of model = [input, output]")
    prices = {}
    for model, value in table.items():
        if not (
            isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
            and all(math.isfinite(v) and v >= 0 for v in value)
        ):
            raise ConfigError(
                f"{source}: [prices] {model!r} must be [input, output] USD per million "
                f"tokens, two numbers of 0 or more, not {value!r}"
            )
        prices[model] = (float(value[0]), float(value[1]))
    return prices


def _parse_judge(t: _Reader) -> JudgeConfig:
    provider = t.choice("provider", ("openai", "azure"), "openai")
    headers = t.get("headers", dict, {})
    if not all(isinstance(v, str) for v in headers.values()):
        raise t.error("'headers' values must be strings")
    if provider == "azure":
        endpoint = t.get("azure_endpoint", str) or os.environ.get("AZURE_OPENAI_ENDPOINT")
        deployment = t.get("deployment", str)
        version = t.get("api_version", str) or os.environ.get("OPENAI_API_VERSION")
        for key, value in (("azure_endpoint", endpoint), ("deployment", deployment),
                           ("api_version", version)):
            if not value:
                raise t.error(f"{key!r} is required when provider = 'azure'")
        return JudgeConfig(
            model=t.get("model", str) or str(deployment),
            provider="azure",
            api_key_env=t.get("api_key_env", str, "AZURE_OPENAI_API_KEY"),
            azure_endpoint=endpoint,
            deployment=deployment,
            api_version=version,
            headers=headers,
        )
    return JudgeConfig(
        model=t.required("model", str),
        base_url=t.get("base_url", str) or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,
        api_key_env=t.get("api_key_env", str, "OPENAI_API_KEY"),
        headers=headers,
    )


def _parse_sampling(t: _Reader) -> SamplingConfig:
    sampling = SamplingConfig(
        mode=t.choice("mode", SAMPLING_MODES, "samples"),
        n=t.positive("n", 10, integer=True),
        temperature=float(t.get("temperature", (int, float), 1.0)),
        top_p=float(t.get("top_p", (int, float), 1.0)),
        max_tokens=t.positive("max_tokens", 5, integer=True),
        top_logprobs=t.get("top_logprobs", int, 20),
        seed=t.get("seed", int),
    )
    if not 0 <= sampling.top_logprobs <= 20:
        raise t.error("'top_logprobs' must be between 0 and 20 (the OpenAI maximum)")
    if not 0 <= sampling.temperature <= 2:
        raise t.error("'temperature' must be between 0 and 2")
    if not 0 < sampling.top_p <= 1:
        raise t.error("'top_p' must be above 0 and at most 1")
    if sampling.n > 128:
        raise t.error("'n' must be at most 128 (the OpenAI maximum)")
    return sampling


def _parse_meta(t: _Reader, criteria: list[str]) -> MetaConfig:
    human = t.get("human", dict, {})
    for name, path in human.items():
        if name not in criteria:
            raise t.error(f"'human' names {name!r}, which is not among the [[criteria]]")
        if not isinstance(path, str) or not path.strip(". "):
            raise t.error("'human' must map criterion names to record field paths, "
                          f"e.g. {name} = \"scores.{name}\", not {path!r}")
    bootstrap = t.get("bootstrap", int, 1000)
    if bootstrap < 0:
        raise t.error("'bootstrap' must be 0 (no intervals) or more")
    confidence = t.get("confidence", (int, float), 0.95)
    if not 0 < confidence < 1:
        raise t.error(f"'confidence' must be between 0 and 1, not {confidence!r}")
    return MetaConfig(human=dict(human), bootstrap=bootstrap, seed=t.get("seed", int, 0),
                      confidence=float(confidence))


def apply_overrides(config: EvalConfig, **overrides: Any) -> EvalConfig:
    """Apply command-line overrides (None means "not given").

    Known names: base_url, model, cache, concurrency, rpm, tpm, n, mode, criteria (a
    comma-separated list or a list of names), limit, timeout, retries, output, max_cost.
    """
    o = {k: v for k, v in overrides.items() if v is not None}
    judge, sampling, limits = config.judge, config.sampling, config.limits
    if "base_url" in o:
        judge = replace(judge, base_url=o["base_url"], provider="openai")
    if "model" in o:
        judge = replace(judge, model=o["model"])
    if "mode" in o:
        if o["mode"] not in SAMPLING_MODES:
            raise ConfigError(f"--mode must be one of {', '.join(SAMPLING_MODES)}")
        sampling = replace(sampling, mode=o["mode"])
    if "n" in o:
        if o["n"] < 1:
            raise ConfigError("--n must be at least 1")
        sampling = replace(sampling, n=o["n"])
    for name in ("concurrency", "rpm", "tpm", "timeout", "retries"):
        if name in o:
            if (o[name] < 0 or (o[name] == 0 and name != "retries")
                    or not math.isfinite(o[name])):
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
        config, judge=judge, sampling=sampling, limits=limits, criteria=criteria,
        cache_path=cache_path, output=output, limit=limit, max_cost=max_cost,
    )
