"""How each section of a study config is read, for the file and for overrides alike.

:func:`~geval_async.study.config.parse_config` reads the file's sections with these, and
:mod:`~geval_async.study.overrides` reads a section patched by a flag or a keyword with the
same ones, so both meet the same checks and the same errors.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..options import JudgeApi, Provider, ReasoningEffort, SamplingMode
from .file_names import is_file_name_part
from .reader import TableReader
from .settings import (
    DEFAULT_BASE_URL,
    BiasConfig,
    DataConfig,
    JudgeConfig,
    JudgeFile,
    LimitsConfig,
    MetaConfig,
    OutputConfig,
    SamplingConfig,
)

__all__ = [
    "SECTION_KEYS",
    "Resolve",
    "parse_bias",
    "parse_bootstrap",
    "parse_cache",
    "parse_data",
    "parse_judge",
    "parse_human_scale",
    "parse_limits",
    "parse_meta",
    "parse_output",
    "parse_prices",
    "parse_sampling",
]

# The keys each table of the file may hold ([[criteria]] and [prices] are read apart).
SECTION_KEYS = {
    "data": {"path", "id", "group", "condition", "writer", "limit"},
    "judge": {
        "model",
        "provider",
        "base_url",
        "api_key_env",
        "azure_endpoint",
        "deployment",
        "api_version",
        "headers",
        "api",
        "store",
    },
    "sampling": {
        "mode",
        "n",
        "temperature",
        "top_p",
        "max_tokens",
        "top_logprobs",
        "seed",
        "min_valid_mass",
        "reasoning_effort",
        "target_se",
        "first_draws",
        "draws",
    },
    "limits": {
        "rpm",
        "tpm",
        "concurrency",
        "retries",
        "timeout",
        "backoff",
        "max_backoff",
        "max_wait",
        "max_answer_bytes",
        "batch_queue_tokens",
    },
    "cache": {"path"},
    "output": {"path", "prefix"},
    "composite": {"criteria", "normalize"},
    "stats": {"conditions", "alpha", "test"},
    "meta": {"human", "bootstrap", "seed", "confidence", "judges", "labelled", "coverage"},
    "panel": {"pool", "weights"},
    "bias": {"length_field", "judge_family", "interval", "bootstrap", "seed", "confidence"},
}

# Turns a path as written into a Path (the file's: against its folder; a flag's: as given).
Resolve = Callable[[str], Path]


def parse_data(t: TableReader, resolve: Resolve) -> tuple[DataConfig, int | None]:
    """``[data]``: the records file, its id/group/condition fields, and the record limit."""
    data = DataConfig(
        path=resolve(t.required("path", str)),
        id_field=t.get("id", str, "id"),
        group_field=t.get("group", str),
        condition_field=t.get("condition", str),
        writer_field=t.get("writer", str),
    )
    if data.writer_field is not None and not data.writer_field.strip():
        raise t.error("'writer' must name the record field holding the model that wrote each text")
    return data, t.positive("limit", None, integer=True)


def parse_limits(t: TableReader) -> LimitsConfig:
    """``[limits]``: client-side rate limits, concurrency, retries, timeouts and the Batch
    API's queue."""
    limits = LimitsConfig(
        rpm=t.positive("rpm", None),
        tpm=t.positive("tpm", None),
        concurrency=t.positive("concurrency", 16, integer=True),
        retries=t.get("retries", int, 8),
        timeout=t.positive("timeout", 60.0),
        backoff=t.positive("backoff", 0.5),
        max_backoff=t.positive("max_backoff", 60.0),
        max_wait=t.positive("max_wait", 120.0),
        max_answer_bytes=t.positive("max_answer_bytes", 1_000_000, integer=True),
        batch_queue_tokens=t.positive("batch_queue_tokens", None, integer=True),
    )
    if limits.retries < 0:
        raise t.error(f"'retries' must be 0 or more, not {limits.retries!r}")
    return limits


def parse_cache(t: TableReader, resolve: Resolve) -> Path:
    """``[cache]``: the cache folder."""
    return resolve(t.get("path", str, "cache"))


def parse_output(t: TableReader, resolve: Resolve, stem: str) -> OutputConfig:
    """``[output]``: the output folder and the file-name prefix (the config's stem)."""
    prefix = t.get("prefix", str, stem)
    if not is_file_name_part(prefix):
        raise t.error(
            f"'prefix' must be a plain file-name start, such as {_example_prefix(stem)!r}: no "
            f"'/', '\\', ':' or '..', not absolute, not empty (it begins every output file's "
            f"name, which must stay in [output] path), not {prefix!r}"
        )
    return OutputConfig(path=resolve(t.get("path", str, "out")), prefix=prefix)


def _example_prefix(stem: str) -> str:
    return stem if is_file_name_part(stem) else "study"


def parse_prices(source: Path, table: Any) -> dict[str, tuple[float, float]]:
    """``[prices]``: model (prefix) -> [input, output] USD per million tokens."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [prices] must be a table of model = [input, output]")
    prices = {}
    for model, value in table.items():
        if not (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
            and all(math.isfinite(v) and v >= 0 for v in value)
        ):
            raise ConfigError(
                f"{source}: [prices] {model!r} must be [input, output] USD per million "
                f"tokens, two numbers of 0 or more, not {value!r}"
            )
        prices[model] = (float(value[0]), float(value[1]))
    return prices


# What an environment variable's name may be (POSIX's portable names, lower case too). A key
# pasted where its variable's name belongs ("sk-proj-...") is not one.
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_judge(t: TableReader) -> JudgeConfig:
    provider = t.choice("provider", Provider, Provider.OPENAI)
    variable = t.get("api_key_env", str)
    if variable is not None and not _VARIABLE_NAME.fullmatch(variable):
        # Never repeat the value: it may be the key itself, and errors reach logs and notebooks.
        raise t.error(
            "'api_key_env' must name the environment variable that holds the key (letters, "
            "digits and _, such as OPENAI_API_KEY), not hold the key: set the variable to the "
            "key and name it here"
        )
    api = t.choice("api", JudgeApi, JudgeApi.CHAT)
    store = t.get("store", bool, False)
    headers = t.get("headers", dict, {})
    if not all(isinstance(v, str) for v in headers.values()):
        raise t.error("'headers' values must be strings")
    carried = sorted(name for name in headers if name.lower() in ("authorization", "api-key"))
    if carried:
        # The key is sent in these from api_key_env's variable; in the file, it would be stored.
        raise t.error(
            f"'headers' must not carry the key ({carried[0]!r}): set an environment variable to "
            "the key and name it with 'api_key_env'"
        )
    if provider == Provider.AZURE:
        endpoint = _http_url(
            t, "azure_endpoint", "AZURE_OPENAI_ENDPOINT", "https://my-resource.openai.azure.com"
        )
        deployment = t.get("deployment", str)
        version = t.get("api_version", str) or os.environ.get("OPENAI_API_VERSION")
        for key, value in (
            ("azure_endpoint", endpoint),
            ("deployment", deployment),
            ("api_version", version),
        ):
            if not value:
                raise t.error(f"{key!r} is required when provider = 'azure'")
        return JudgeConfig(
            model=t.get("model", str) or str(deployment),
            provider=Provider.AZURE,
            api_key_env=t.get("api_key_env", str, "AZURE_OPENAI_API_KEY"),
            azure_endpoint=endpoint,
            deployment=deployment,
            api_version=version,
            headers=headers,
            api=api,
            store=store,
        )
    return JudgeConfig(
        model=t.required("model", str),
        base_url=_http_url(
            t, "base_url", "OPENAI_BASE_URL", "http://127.0.0.1:8080/v1", DEFAULT_BASE_URL
        ),
        api_key_env=t.get("api_key_env", str, "OPENAI_API_KEY"),
        headers=headers,
        api=api,
        store=store,
    )


def _http_url(
    t: TableReader, key: str, env: str, example: str, default: str | None = None
) -> str | None:
    """``key`` (else ``$env``, else ``default``), checked to be an http(s) URL.

    Without a scheme ("127.0.0.1:8080/v1") every request fails as a reset and is retried
    until the retries run out, minutes later: so it is bad input, named before anything runs.
    """
    given = t.get(key, str)
    url = given or os.environ.get(env) or default
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        name = repr(key) if given else f"${env} (the default of {key!r})"
        raise t.error(f"{name} must be an http:// or https:// URL such as {example}, not {url!r}")
    return url


def parse_sampling(t: TableReader) -> SamplingConfig:
    sampling = SamplingConfig(
        mode=t.choice("mode", SamplingMode, SamplingMode.SAMPLES),
        n=t.positive("n", 10, integer=True),
        temperature=float(t.get("temperature", (int, float), 1.0)),
        top_p=float(t.get("top_p", (int, float), 1.0)),
        max_tokens=t.positive("max_tokens", 5, integer=True),
        top_logprobs=t.get("top_logprobs", int, 20),
        seed=t.get("seed", int),
        min_valid_mass=float(t.get("min_valid_mass", (int, float), 0.5)),
        reasoning_effort=(
            t.choice("reasoning_effort", ReasoningEffort, ReasoningEffort.MEDIUM)
            if t.get("reasoning_effort", str) is not None
            else None
        ),
        target_se=_optional_float(t, "target_se"),
        first_draws=t.positive("first_draws", 3, integer=True),
        draws=t.get("draws", int),
    )
    _check_adaptive(t, sampling)
    if not 0 <= sampling.min_valid_mass <= 1:
        raise t.error("'min_valid_mass' must be between 0 and 1 (a share of probability)")
    if not 0 <= sampling.top_logprobs <= 20:
        raise t.error("'top_logprobs' must be between 0 and 20 (the OpenAI maximum)")
    if not 0 <= sampling.temperature <= 2:
        raise t.error("'temperature' must be between 0 and 2")
    if not 0 < sampling.top_p <= 1:
        raise t.error("'top_p' must be above 0 and at most 1")
    if sampling.n > 128:
        raise t.error("'n' must be at most 128 (the OpenAI maximum)")
    return sampling


def _optional_float(t: TableReader, key: str) -> float | None:
    value = t.get(key, (int, float))
    return None if value is None else float(value)


def _check_adaptive(t: TableReader, sampling: SamplingConfig) -> None:
    """Draws by need: a positive target or budget, at most one of them, in samples mode."""
    target, budget = sampling.target_se, sampling.draws
    if target is not None and not 0 < target < math.inf:
        raise t.error("'target_se' must be above 0 (the standard error, in rating points)")
    if budget is not None and budget < 1:
        raise t.error("'draws' must be a positive whole number (the study's budget of draws)")
    if target is not None and budget is not None:
        raise t.error(
            "set 'target_se' (draw until each item is that sure) or 'draws' (a budget for the "
            "study), not both"
        )
    if (target is not None or budget is not None) and sampling.mode != SamplingMode.SAMPLES:
        raise t.error(
            "'target_se' and 'draws' spend sampled ratings: they need mode = \"samples\" "
            "(a logprobs item is one answer)"
        )
    if (target is not None or budget is not None) and sampling.first_draws > sampling.n:
        raise t.error(
            f"'first_draws' ({sampling.first_draws}) must be at most 'n' ({sampling.n}), "
            "the most draws an item gets"
        )


def parse_meta(t: TableReader, criteria: Sequence[str], resolve: Resolve) -> MetaConfig:
    """``[meta]``: human score fields, judge files (``[meta.judges.NAME]``), bootstrap."""
    human = t.get("human", dict, {})
    known = set(criteria)
    for name, path in human.items():
        if name not in known:
            raise t.error(f"'human' names {name!r}, which is not among the [[criteria]]")
        if not isinstance(path, str) or not path.strip(". "):
            raise t.error(
                "'human' must map criterion names to record field paths, "
                f'e.g. {name} = "scores.{name}", not {path!r}'
            )
    judges = _judge_files(t, criteria, resolve)
    return MetaConfig(
        human=dict(human), judges=judges, **parse_bootstrap(t), **parse_human_scale(t)
    )


def parse_human_scale(t: TableReader) -> dict[str, Any]:
    """``[meta]`` labelled and coverage (the keys :class:`MetaConfig` takes for the human
    scale): the share of the labelled records used, and the intervals' coverage."""
    labelled = t.get("labelled", (int, float), 1.0)
    if not 0 < labelled <= 1:
        raise t.error(
            f"'labelled' must be a share of the labelled records above 0 and at most 1 "
            f"(0.1 uses a tenth of them, 1 all), not {labelled!r}"
        )
    coverage = t.get("coverage", (int, float), 0.9)
    if not 0 < coverage < 1:
        raise t.error(
            f"'coverage' must be between 0 and 1 (0.9: intervals that hold the human score "
            f"nine times in ten), not {coverage!r}"
        )
    return {"labelled": float(labelled), "coverage": float(coverage)}


def parse_bootstrap(t: TableReader) -> dict[str, Any]:
    """``[meta]`` bootstrap, seed and confidence (the keys :class:`MetaConfig` takes)."""
    bootstrap = t.get("bootstrap", int, 1000)
    if bootstrap < 0:
        raise t.error(f"'bootstrap' must be 0 (no intervals) or more, not {bootstrap!r}")
    confidence = t.get("confidence", (int, float), 0.95)
    if not 0 < confidence < 1:
        raise t.error(f"'confidence' must be between 0 and 1, not {confidence!r}")
    return {"bootstrap": bootstrap, "seed": t.get("seed", int, 0), "confidence": float(confidence)}


def parse_bias(t: TableReader, criteria: Sequence[str]) -> BiasConfig:
    """``[bias]``: the field whose length is the text judged (one for every criterion, or a
    table criterion -> field), the judge's family, and whether the length correlation gets
    an interval."""
    given = t.get("length_field", (str, dict), {})
    if isinstance(given, str):
        lengths = dict.fromkeys(criteria, given)
    else:
        lengths = dict(given)
        for name, field_name in lengths.items():
            if name not in criteria:
                raise t.error(
                    f"'length_field' names {name!r}, which is not a criterion "
                    f"({', '.join(criteria)})"
                )
            if not isinstance(field_name, str):
                raise t.error(
                    f"'length_field' maps criteria to record fields, e.g. {{ {name} = "
                    f'"summary" }}, not {name} = {field_name!r}'
                )
    if not all(name.strip() for name in lengths.values()):
        raise t.error("'length_field' must name a record field, not an empty text")
    family = t.get("judge_family", str)
    if family is not None and not family.strip():
        raise t.error("'judge_family' must name a model family such as 'openai' or 'llama'")
    # The interval is Bonett and Wright's (no resamples); `bootstrap = 0` is the older way
    # to leave it out, and `seed` is read and checked but seeds nothing.
    resamples = parse_bootstrap(t)
    interval = t.get("interval", bool)
    return BiasConfig(
        length_fields=lengths,
        judge_family=None if family is None else family.strip().casefold(),
        interval=resamples["bootstrap"] > 0 if interval is None else interval,
        confidence=resamples["confidence"],
    )


def _judge_files(t: TableReader, criteria: Sequence[str], resolve: Resolve) -> dict[str, JudgeFile]:
    judges = {}
    for name, table in t.get("judges", dict, {}).items():
        if not isinstance(table, dict):
            raise t.error(f'judge {name!r} must be a table: [meta.judges.{name}] path = "..."')
        j = TableReader(t.source, f"meta.judges.{name}", table, {"path", "keys", "scores"})
        keys, scores = _columns(j, "keys"), _columns(j, "scores")
        for criterion in scores:
            if criterion not in criteria:
                raise j.error(
                    f"'scores' names {criterion!r}, which is not a criterion "
                    f"({', '.join(criteria)})"
                )
        judges[name] = JudgeFile(resolve(j.required("path", str)), keys, scores)
    return judges


def _columns(t: TableReader, key: str) -> dict[str, str]:
    table = t.get(key, dict, {})
    for name, column in table.items():
        if not isinstance(column, str) or not column.strip():
            raise t.error(
                f"{key!r} maps names to the file's column names, e.g. {{ {name} = "
                f'"{name}_column" }}, not {name} = {column!r}'
            )
    return dict(table)
