"""The library's front door for notebooks: judge a study, then load its results.

    >>> import geval_async as ga
    >>> run = await ga.judge("examples/ueq/config.toml", base_url="http://127.0.0.1:8000/v1")
    >>> results = ga.load_results("examples/ueq/config.toml")
    >>> results.table("con"), results.composite(), results.comparisons()
    >>> ga.html_report("examples/ueq/config.toml")   # out/ueq_report.html, offline

``judge`` is a coroutine, so it runs inside the notebook's own event loop (top-level ``await``);
a script calls ``asyncio.run(ga.judge(...))``. The scoring side is plain synchronous Python.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .judging.run.panel import PanelRunResult
from .judging.run.runner import RunResult
from .judging.run.stage import judge_panel, judge_study, panel_api_keys
from .options import StatTest
from .scoring.scores.draws import next_round
from .study.config import EvalConfig, apply_overrides, load_config
from .study.prepare import prepare_study

if TYPE_CHECKING:
    import pandas as pd

    from .scoring.scores.human import HumanComparison
    from .scoring.scores.results import StudyResults


async def judge(
    config: EvalConfig | str | os.PathLike[str],
    *,
    judge: str | None = None,
    retry_failed: bool = False,
    **overrides: Any,
) -> RunResult | PanelRunResult:
    """Run the judge stage of a study: every request the cache lacks is sent and stored.

    A panel config (``[[judges]]``) is judged by all its judges at once, as ``run`` does, and
    gives a :class:`PanelRunResult` (``.judges[name].result`` is each judge's RunResult).

    Args:
        config: a loaded config or the path of its TOML file.
        judge: on a panel config, judge with this judge alone (``run --judge NAME``).
        retry_failed: ask again for requests the cache holds as refused.
        overrides: as on the command line (base_url, model, cache, concurrency, rpm, tpm, n,
            mode, criteria, limit, ...); on a panel without ``judge``, each judge's (model
            and base_url need ``judge``).
    """
    if not isinstance(config, EvalConfig):
        config = load_config(config)
    config = apply_overrides(config, judge=judge, **overrides)
    if config.is_panel:
        return await _judge_panel(config, retry_failed=retry_failed)
    study = prepare_study(config)
    return await judge_study(
        study, api_key=config.required_api_key(), retry_failed=retry_failed, rounds=next_round
    )


async def _judge_panel(config: EvalConfig, *, retry_failed: bool) -> PanelRunResult:
    names, members = config.judge_names, config.members()
    studies = {name: prepare_study(m) for name, m in zip(names, members, strict=True)}
    keys = panel_api_keys(config)  # a judge without its key is not run, and says why
    return await judge_panel(studies, api_keys=keys, retry_failed=retry_failed, rounds=next_round)


def load_results(
    config: EvalConfig | str | os.PathLike[str],
    *,
    judge: str | None = None,
    strict: bool = False,
    **overrides: Any,
) -> StudyResults:
    """Score a study from its cache (no network).

    For a panel (``[[judges]]``), the panel's results: each record's score pooled from its
    judges' (``[panel] pool``), with ``judges_scored`` / ``judges_missing`` in its long table;
    its judges' own results are in ``.members`` (:func:`load_panel` gives all of them, and the
    judges' agreement).

    Args:
        config: a loaded config or the path of its TOML file.
        judge: on a panel config, the results of this judge alone (its one-judge study).
        strict: raise ConfigError when any item (of any judge) lacks an answer.
        overrides: as on the command line (cache, criteria, limit, ...); on a panel without
            ``judge``, each judge's, as :func:`apply_overrides` applies them.
    """
    from .scoring.panel.results import load_panel
    from .scoring.scores import results

    if not isinstance(config, EvalConfig):
        config = load_config(config)
    config = apply_overrides(config, judge=judge, **overrides)
    if config.is_panel:
        return load_panel(config, strict=strict).panel
    return results.load_results(config, strict=strict)


def read_answers(
    config: EvalConfig | str | os.PathLike[str],
    *,
    judge: str | None = None,
    criterion: str | None = None,
    condition: str | None = None,
    record: str | None = None,
    reason: str | None = None,
    **overrides: Any,
) -> pd.DataFrame:
    """Every answer of a study and how it was read, from the cache (no network): the table
    ``geval-async answers`` prints from.

    One row per answer: record_id, group, condition, criterion, rubric, draw, text, rating
    (NaN when invalid) and reason (None when valid). On a panel (``[[judges]]``), every judge's
    answers, with a ``judge`` column first.

    Args:
        config: a loaded config or the path of its TOML file.
        judge: on a panel config, this judge's answers alone (``answers --judge NAME``).
        criterion, condition, record: keep the answers of this criterion, condition, record.
        reason: keep the answers read with this reason (``"invalid"``: every invalid one,
            ``"valid"``: every valid one).
        overrides: as on the command line; on a panel without ``judge``, each judge's.
    """
    import pandas as pd

    from .scoring.scores import results

    if not isinstance(config, EvalConfig):
        config = load_config(config)
    config = apply_overrides(config, judge=judge, **overrides)
    filters = {"criterion": criterion, "condition": condition, "record": record, "reason": reason}
    if not config.is_panel:
        return results.read_answers(config, **filters)
    frames = [
        results.read_answers(member, **filters).assign(judge=member.judge_name)
        for member in config.members()
    ]
    frame = pd.concat(frames, ignore_index=True)
    return frame[["judge", *frame.columns.drop("judge")]]


def html_report(
    config: EvalConfig | str | os.PathLike[str],
    *,
    test: StatTest | str | None = None,
    strict: bool = False,
    **overrides: Any,
) -> Path:
    """Score a study from its cache and write ``<output>/<prefix>_report.html`` (no network).

    Args:
        config: a loaded config or the path of its TOML file.
        test: override the configured test ("welch", "paired-t", "wilcoxon").
        strict: raise ConfigError when any item lacks an answer.
        overrides: as on the command line (cache, output, criteria, limit, model, n, ...).

    Returns:
        The path of the report.
    """
    return write_html(load_results(config, strict=strict, **overrides), test=test)


def write_html(results: StudyResults, *, test: StatTest | str | None = None) -> Path:
    """The HTML report of scored results, with judge-vs-human plots when [meta] human is set."""
    from .scoring.output.writer import write_html_report

    return write_html_report(results, test=test, human=human_comparison(results))


def human_comparison(results: StudyResults) -> HumanComparison | None:
    """Judge and human scores side by side with their correlations, or None without
    ``[meta] human`` (see :mod:`geval_async.meta`)."""
    from .meta.evaluate import meta_evaluate
    from .meta.inputs import human_scores, judge_scores, pair_scores
    from .scoring.scores.human import HumanComparison

    config = results.config
    mapping = {
        c.name: config.meta.human[c.name] for c in config.criteria if c.name in config.meta.human
    }
    if not mapping:
        return None
    human = human_scores(results.study.selected_records, mapping, config.data.path)
    pairs = pair_scores(human, judge_scores(results.long))
    # The judge's scores are the ones in hand: the study is not scored a second time.
    return HumanComparison(pairs, meta_evaluate(config, results=results).correlations)
