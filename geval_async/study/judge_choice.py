"""Which judges a command works with: the whole panel, or one judge by name, with overrides.

On a one-judge config the overrides apply as they always did. On a panel (``[[judges]]``):

- ``--judge NAME`` (``judge=`` in Python) picks that judge's one-judge study
  (:meth:`~geval_async.study.settings.EvalConfig.for_judge`); every override then applies to
  it, ``--model``, ``--base-url`` and ``--api`` included;
- without it, ``--model``, ``--base-url`` and ``--api`` are refused (which judge would they
  replace?), and
  every other override (``--n``, ``--rpm``, ``--concurrency``, ``--limit``, ``--cache``, ...)
  applies to every judge: ``--rpm 30`` caps each judge at 30 requests a minute, each under its
  own limiter. The panel config returned holds the judges so patched, so that
  :meth:`~geval_async.study.settings.EvalConfig.members` gives them.

The command line (:func:`choose_judges`) and the Python API (:func:`apply_overrides`, and
``ga.judge``, ``ga.load_results``... through it) follow this one rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..errors import ConfigError
from .overrides import read_overrides
from .settings import EvalConfig, PanelJudge

__all__ = ["apply_overrides", "choose_judges"]

# Overrides that name one judge's endpoint: on a panel, only with a judge chosen.
_ONE_JUDGE = ("model", "base_url", "api")


def choose_judges(
    config: EvalConfig,
    overrides: Mapping[str, Any],
    *,
    judge: str | None = None,
    flags: bool = False,
) -> EvalConfig:
    """``config`` with ``overrides`` applied, narrowed to the judge ``judge`` when given.

    Args:
        config: the study as loaded from its file.
        overrides: flags or keywords (None: not given), as :func:`read_overrides` takes them.
        judge: the name of one judge of the panel, or None for every judge.
        flags: name the overrides as flags (``--model``) in errors, else as keywords.

    Raises:
        ConfigError: no judge of that name (the line lists the names), a judge chosen on a
            one-judge config, ``--model``/``--base-url``/``--api`` on a panel without a judge
            chosen,
            or an override the file could not hold either.
    """
    if judge is not None:
        return read_overrides(config.for_judge(judge), overrides, flags=flags)
    if not config.is_panel:
        return read_overrides(config, overrides, flags=flags)
    for name in _ONE_JUDGE:
        if overrides.get(name) is not None:
            given = f"--{name.replace('_', '-')}" if flags else f"{name}="
            choose = "--judge NAME" if flags else "judge=NAME"
            raise ConfigError(
                f"{given} on a panel config ({config.source}): each judge has its own; choose "
                f"the judge it is for with {choose} (the judges: {', '.join(config.judge_names)})"
            )
    members = [read_overrides(m, overrides, flags=flags) for m in config.members()]
    panel = read_overrides(config, overrides, flags=flags)
    return replace(
        panel,
        judges=tuple(
            PanelJudge(j.name, m.judge, m.sampling, m.limits, own_sampling=m.judge_sampling)
            for j, m in zip(config.judges, members, strict=True)
        ),
    )


def apply_overrides(
    config: EvalConfig, *, judge: str | None = None, **overrides: Any
) -> EvalConfig:
    """``config`` with keyword overrides applied (None means "not given"), by the rule of
    :func:`choose_judges`: on a panel, to every judge, or to the judge ``judge`` alone.

    Known names: base_url, model, api, mode, n, temperature, max_tokens, reasoning_effort,
    concurrency, rpm, tpm, timeout, retries, limit, cache, output, criteria (a comma-separated
    text or a list of names), max_cost, shard ("I/K" or a :class:`~geval_async.study.shard.Shard`).

    Raises:
        ConfigError: an unknown name, a value the config file could not hold either, or on a
            panel an unknown ``judge``, or ``model``/``base_url``/``api`` without one.
    """
    return choose_judges(config, overrides, judge=judge)
