"""A study as meta-evaluation reads it: records, human scores, judge files, and maybe a judge.

``geval-async meta`` needs a judge of the study's own (``[judge]`` and prompt files) only to
read that judge's answers from the cache. A config for judge files alone needs neither:
``[data]``, ``[meta] human`` and the judge files are enough. Without ``[[criteria]]`` tables the
criteria are the names ``[meta] human`` maps; with them, only each one's ``name`` is read (a
prompt file need not exist). Unknown sections and keys are errors as in every config, and
``run`` and the other commands still read the file with
:func:`~geval_async.study.config.load_config`, which demands everything a judge run needs.

Overrides go in as elsewhere (:mod:`geval_async.study.overrides`): ``bootstrap``, ``seed`` and
``confidence`` patch ``[meta]`` and are read by its parser, so ``--confidence 1.5`` fails as
``confidence = 1.5`` in the file would, with the flag named.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .config import parse_config, read_document, resolver, section_readers
from .criteria import CRITERION_KEYS
from .judge_choice import choose_judges
from .overrides import OVERRIDES, as_given, criterion_names
from .reader import TableReader
from .sections import SECTION_KEYS, parse_bootstrap, parse_data, parse_meta, parse_output
from .settings import EvalConfig, MetaConfig, MetaStudy

__all__ = [
    "META_OVERRIDES",
    "parse_meta_study",
    "read_meta_overrides",
    "read_meta_study",
]

META_OVERRIDES = ("bootstrap", "seed", "confidence")


def read_meta_study(
    config: EvalConfig | MetaStudy | str | os.PathLike[str],
    overrides: Mapping[str, Any] | None = None,
    *,
    use_cache: bool | None = None,
    flags: bool = False,
) -> MetaStudy:
    """The study that ``meta`` evaluates, with overrides applied.

    Args:
        config: a config file, a loaded config, or a study already read by this function.
        overrides: bootstrap, seed, confidence, and the study overrides (criteria, limit,
            output; cache, model, n, mode ... choose the cache judge's answers; on a panel
            config, judge: that judge's alone, as its one-judge study). None: not given.
        use_cache: whether the study's own judge is read from the cache. None: when the config
            has a ``[judge]`` or ``[[judges]]`` (then the whole study is read and checked as
            for ``run``).
        flags: name the overrides as command-line flags in errors.

    Raises:
        ConfigError: an invalid config or override, or ``use_cache`` without a ``[judge]``.
    """
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    bootstrap = {k: given.pop(k) for k in META_OVERRIDES if k in given}
    study = _study(config, given, use_cache, flags, given.pop("judge", None))
    return replace(study, meta=read_meta_overrides(study.meta, bootstrap, flags=flags))


def _study(
    config: EvalConfig | MetaStudy | str | os.PathLike[str],
    overrides: dict[str, Any],
    use_cache: bool | None,
    flags: bool,
    judge: str | None = None,
) -> MetaStudy:
    if isinstance(config, EvalConfig):
        config = MetaStudy.of(config)
    if isinstance(config, MetaStudy):
        study = config
    else:
        source = Path(config)
        document = read_document(source)
        # A panel's judges ([[judges]]) are read from the cache as one [judge] is.
        if ("judge" in document or "judges" in document) and use_cache is not False:
            study = MetaStudy.of(parse_config(document, source))
        else:
            study = parse_meta_study(document, source)
    if use_cache and study.config is None:
        raise ConfigError(
            f"{study.source}: no [judge] section, so no judge of this tool's to read from "
            "the cache: meta-evaluate the config's judge files alone (use_cache=False)"
        )
    if judge is not None and (use_cache is False or study.config is None):
        raise ConfigError(
            f"{_origin('judge', judge, flags)}: only chooses a panel judge's answers in the "
            f"cache, and {study.source} is meta-evaluated from its judge files alone (no "
            "[[judges]], or the cache left out): drop it"
        )
    if use_cache is False or study.config is None:
        return _narrow(replace(study, config=None), overrides, flags)
    if not overrides and judge is None:
        return study
    # A panel's: to every judge (--model and --base-url refused), or to the one chosen, as
    # every command's.
    chosen = choose_judges(study.config, overrides, judge=judge, flags=flags)
    return replace(MetaStudy.of(chosen), meta=study.meta)


def read_meta_overrides(
    meta: MetaConfig, overrides: Mapping[str, Any], *, flags: bool = False
) -> MetaConfig:
    """``meta`` with bootstrap, seed and confidence patched, read by ``[meta]``'s parser."""
    for name in META_OVERRIDES:
        value = overrides.get(name)
        if value is None:
            continue
        table = {"bootstrap": meta.bootstrap, "seed": meta.seed, "confidence": meta.confidence}
        reader = TableReader(
            _origin(name, value, flags), "meta", {**table, name: value}, set(table)
        )
        meta = replace(meta, **parse_bootstrap(reader))
    return meta


def _origin(name: str, value: Any, flags: bool) -> str:
    return f"--{name.replace('_', '-')} {value}" if flags else f"{name}={value!r}"


def _narrow(study: MetaStudy, overrides: Mapping[str, Any], flags: bool) -> MetaStudy:
    """criteria, limit and output on a study without the cache's judge (the judge's own
    overrides choose the cache's answers: without it they change nothing)."""
    TableReader("flags" if flags else "overrides", "", overrides, set(OVERRIDES))
    for name, value in overrides.items():
        origin = _origin(name, value, flags)
        if name not in ("criteria", "limit", "output"):
            # It would choose which of the cache's answers to read, and none are read here:
            # said, not silently dropped.
            raise ConfigError(
                f"{origin}: only chooses the answers of the config's own judge in the cache, "
                f"and {study.source} is meta-evaluated from its judge files alone "
                "(no [judge] section, or the cache left out): drop it"
            )
        if name == "criteria":
            reader = TableReader(origin, "", {name: value}, {name})
            study = replace(study, criteria=criterion_names(reader, study.criteria))
        elif name == "limit":
            table = {"path": str(study.data.path), "id": study.data.id_field, "limit": value}
            _, limit = parse_data(
                TableReader(origin, "data", table, SECTION_KEYS["data"]), as_given
            )
            study = replace(study, limit=limit)
        elif name == "output":
            table = {"path": os.fspath(value), "prefix": study.output.prefix}
            reader = TableReader(origin, "output", table, SECTION_KEYS["output"])
            study = replace(study, output=parse_output(reader, as_given, study.source.stem))
    return study


def parse_meta_study(document: Mapping[str, Any], source: Path) -> MetaStudy:
    """Read a config for judge files alone (no judge, no prompts needed) into a MetaStudy."""
    readers = section_readers(document, source)
    resolve = resolver(source)
    criteria = _criterion_names(document, source, readers["meta"])
    data, limit = parse_data(readers["data"], resolve)
    return MetaStudy(
        source=source,
        data=data,
        criteria=criteria,
        meta=parse_meta(readers["meta"], criteria, resolve),
        output=parse_output(readers["output"], resolve, source.stem),
        limit=limit,
    )


def _criterion_names(
    document: Mapping[str, Any], source: Path, meta: TableReader
) -> tuple[str, ...]:
    raw = document.get("criteria")
    if raw is None:
        human = meta.get("human", dict, {})
        if not human:
            raise meta.error(
                "'human' is required: it names the criteria and the record field holding "
                'each one\'s human score, e.g. human = { coherence = "scores.coherence" }'
            )
        return tuple(human)
    if not isinstance(raw, list):
        raise ConfigError(f"{source}: [[criteria]] must be a list of tables")
    names: dict[str, None] = {}  # in order, looked up by hash
    for index, table in enumerate(raw, start=1):
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: [[criteria]] #{index} must be a table")
        reader = TableReader(source, f"criteria #{index}", table, CRITERION_KEYS)
        name = reader.required("name", str)
        if name in names:
            raise ConfigError(f"{source}: criterion name {name!r} is used twice")
        names[name] = None
    return tuple(names)
