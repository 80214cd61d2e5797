"""``geval-async answers``: what the judge wrote and how each answer was read.

Without ``--record`` it lists the study's invalid samples grouped by reason and by the shape of
their text, with counts and examples, after the invalid shares per criterion and condition.
With ``--record ID`` it tells one record's whole story: the rendered prompt of each criterion,
every answer (a thinking model's reasoning shortened, then the answer the rating is read from),
and the rating or reason read from it. A pairwise criterion's orders are listed after:
those without a verdict by why, or with ``--record`` every order of the record's pairs, its
answers and verdict. Filters: ``--criterion``,
``--condition``, ``--record``, ``--reason``. Reads the cache only; the same table is
``geval_async.read_answers`` in Python. On a panel config (``[[judges]]``) it shows every
judge's answers, each under ``judge NAME (model at url):``, or with ``--judge NAME`` that
judge's alone.

Also here: the invalid-share lines that ``status`` and ``score`` print, and the load warnings
(a prompt stating another scale), errors with ``--strict``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..options import Reason, words
from .overrides import ANSWER_FLAGS, add_judge_flag, study_config
from .summary import table

if TYPE_CHECKING:
    import pandas as pd

    from ..scoring.scores.results import StudyResults
    from ..scoring.scores.status import StudyStatus
    from ..study.config import EvalConfig

_TEXT_WIDTH = 70


def add_answers_command(
    commands: Any, study_arguments: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Register ``answers`` on the CLI's subparsers."""
    parser = commands.add_parser(
        "answers", help="invalid answers grouped by reason and shape; one record's whole story"
    )
    study_arguments(parser)
    parser.add_argument("--criterion", help="only this criterion")
    parser.add_argument("--condition", help="only this condition")
    parser.add_argument("--record", help="show this record's prompts, answers and readings")
    parser.add_argument(
        "--reason",
        choices=[*words(Reason), "invalid", "valid"],
        help="only answers read with this reason (default: every invalid one)",
    )
    parser.add_argument("--examples", type=int, default=2, help="examples per shape (default 2)")
    parser.add_argument("--strict", action="store_true", help="load warnings are errors")
    add_judge_flag(parser)  # a panel: every judge's answers, each labelled, or this judge's
    parser.set_defaults(handler=cmd_answers)


def warn(warnings: Sequence[str], *, strict: bool) -> None:
    """Print load warnings to stderr; with ``strict`` the first one is an error."""
    if strict and warnings:
        raise ConfigError(f"{warnings[0]} (--strict makes this an error)")
    for message in warnings:
        print(f"warning: {message}", file=sys.stderr)


def invalid_lines(results: StudyResults | StudyStatus) -> list[str]:
    """The invalid shares per criterion and condition, and the share-difference warnings
    (of a study's results, or of ``status``'s counts)."""
    shares = results.invalid_shares()
    if shares.empty or not shares["invalid"].any():
        return []
    reasons = [c for c in shares.columns[5:] if shares[c].any()]
    rows = [
        [r.criterion, r.condition, r.samples, r.invalid, f"{r.share:.1%}"]
        + [getattr(r, c) for c in reasons]
        for r in shares.itertuples()
    ]
    header = ["criterion", "condition", "samples", "invalid", "share", *reasons]
    lines = ["invalid samples (not scored, never counted as 0):", table(header, rows)]
    lines += [f"warning: {d.warning()}" for d in results.share_differences()]
    return lines


def cmd_answers(args: argparse.Namespace) -> int:
    config = study_config(args, ANSWER_FLAGS)  # --judge NAME: that judge's one-judge study
    if config.is_panel:
        return _panel_answers(args, config)
    results = _judge_results(args, config)
    if not results.study.criteria and config.pairwise:
        if not any(not order.missing for order in results.orders):
            raise ConfigError(
                f"the cache {config.cache_path} holds no verdict for the study's "
                f"{len(results.orders)} pairwise orders: check --cache (or [cache] path), or "
                f"run `geval-async run {config.source}` first"
            )
        _show_pairs(args, results)
        return 0
    if args.record is None and results.samples.empty:
        # "0 of 0 answers are invalid" would read as a clean bill of health.
        raise ConfigError(
            f"the cache {config.cache_path} holds no answer for the study's "
            f"{len(results.scores)} items: check --cache (or [cache] path), or run "
            f"`geval-async run {config.source}` first"
        )
    return _show(args, results)


def _panel_answers(args: argparse.Namespace, config: EvalConfig) -> int:
    """Every judge's answers of a panel, each under ``judge NAME (model at url):``; a judge
    the cache holds nothing of says so, and a cache that holds nothing of any judge is an
    error (as for one judge)."""
    shown: set[str] = set()  # the judges share prompts: a prompt's warning is shown once
    loaded = [(m.judge_name, m, _judge_results(args, m, shown)) for m in config.members()]
    if args.record is None and all(r.samples.empty for _, _, r in loaded):
        raise ConfigError(
            f"the cache {config.cache_path} holds no answer of any judge "
            f"({', '.join(config.judge_names)}) for the study's {len(loaded[0][2].scores)} "
            f"items: check --cache (or [cache] path), or run `geval-async run {config.source}`"
        )
    for position, (name, member, results) in enumerate(loaded):
        print(
            ("\n" if position else "")
            + f"judge {name} ({member.judge.model} at {member.judge.url}):"
        )
        if args.record is None and results.samples.empty:
            print(
                "the cache holds no answer of this judge: run "
                f"`geval-async run {config.source} --judge {name}`"
            )
            continue
        _show(args, results)
    return 0


def _judge_results(
    args: argparse.Namespace, config: EvalConfig, shown: set[str] | None = None
) -> StudyResults:
    """One judge's results, its load warnings shown (those not in ``shown`` yet), the
    filters' names checked."""
    from ..scoring.scores.results import load_results

    results = load_results(config)
    shown = set() if shown is None else shown
    warn([w for w in results.warnings if w not in shown], strict=args.strict)
    shown.update(results.warnings)
    if args.criterion is not None:
        names = [c.name for c in (*results.config.criteria, *results.config.pairwise)]
        if args.criterion not in names:  # an unknown name is a one-line error
            raise ConfigError(
                f"{results.config.source}: no criterion named {args.criterion!r} (the config "
                f"has: {', '.join(names)})"
            )
    if args.condition is not None:  # else a misspelt one finds "0 of 0 answers"
        seen = sorted({str(c) for c in results.study.records.conditions if c is not None})
        if args.condition not in seen:
            known = f"the records' conditions: {', '.join(seen)}" if seen else "the study has none"
            raise ConfigError(f"--condition {args.condition}: no record has it ({known})")
    return results


def _show(args: argparse.Namespace, results: StudyResults) -> int:
    """One judge's overview of its invalid answers, or one record's story (``--record``)."""
    from ..scoring.scores.results import filter_samples

    reason: str | None = args.reason or ("invalid" if args.record is None else None)
    samples = filter_samples(
        results.samples,
        criterion=args.criterion,
        condition=args.condition,
        record=args.record,
        reason=reason,
    )
    if args.record is not None:
        code = _story(results, args.record, samples, args.criterion)
    else:
        _overview(results, samples, args.examples, reason or "invalid")
        code = 0
    if results.orders:
        _show_pairs(args, results)
    return code


def _show_pairs(args: argparse.Namespace, results: StudyResults) -> None:
    """The pairwise criteria's orders: those without a verdict by why, with examples; or,
    with ``--record``, every order of the pairs the record is in, its answers and verdict."""
    orders = [
        order
        for order in results.orders
        if (args.criterion is None or order.criterion == args.criterion)
        and (args.condition is None or args.condition in (order.record.a, order.record.b))
    ]
    if args.record is not None:
        study = results.study
        match = [i for i, found_id in enumerate(study.records.ids) if found_id == str(args.record)]
        if not match:
            raise ConfigError(f"record {args.record!r} is not in {study.config.data.path}")
        found = study.records[match[0]]
        mine = [
            o
            for o in orders
            if o.record.group == found.group and found.condition in (o.record.a, o.record.b)
        ]
        print(f"\npairwise orders of record {found.id} ({len(mine)}):")
        for order in mine:
            read = order.verdict or f"no verdict ({order.reason})"
            print(
                f"=== {order.criterion}: {order.record.first} shown first, "
                f"{order.record.second} second: {read}"
                + (f", {order.winner} won" if order.winner not in (None, "tie") else "")
                + " ==="
            )
            for draw, text in enumerate(order.answers):
                print(f"[draw {draw}] {_cut(text)!r}")
        return
    without = [order for order in orders if order.verdict is None]
    print(f"\n{len(without)} of {len(orders)} pairwise orders have no verdict (none is a tie)")
    by_reason: dict[str, list[str]] = {}
    for order in without:
        by_reason.setdefault(order.reason or "unread", []).extend(order.answers[:1])
    for reason, texts in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(texts):6d}  {reason}")
        for example in texts[: args.examples]:
            print(f"{'':8}e.g. {_cut(example)}")


def _overview(results: StudyResults, samples: pd.DataFrame, examples: int, reason: str) -> None:
    from ..scoring.scores.readings import invalid_shapes

    total = len(results.samples)
    what = "are invalid" if reason == "invalid" else f"match --reason {reason}"
    print(f"{len(samples)} of {total} answers {what}")
    for line in invalid_lines(results):
        print(line)
    if samples.empty:
        return
    valid_only = samples["reason"].isna().all()
    shapes = samples.assign(reason="valid") if valid_only else samples
    grouped = invalid_shapes(shapes, examples=examples)
    print("\nby reason and shape of text:")
    for row in grouped.itertuples():
        print(f"{row.count:6d}  {row.reason:<10}  {row.shape!r}  [{row.criteria}]")
        for example in row.examples:
            print(f"{'':8}e.g. {_cut(example)}")


def _story(results: StudyResults, record: str, samples: pd.DataFrame, only: str | None) -> int:
    from ..study.plan import JudgeItem, render_messages

    study = results.study
    # The index finds the record; only its line is read.
    match = [i for i, found_id in enumerate(study.records.ids) if found_id == str(record)]
    if not match:
        raise ConfigError(f"record {record!r} is not in {study.config.data.path}")
    found = study.records[match[0]]
    print(f"record {found.id} (group {found.group}, condition {found.condition})")
    for criterion in study.criteria:
        if only is not None and criterion.name != only:
            continue
        rows = samples[samples["criterion"] == criterion.name]
        for rubric in criterion.rubrics:
            name = criterion.name + (f" [{rubric.name}]" if rubric is not None else "")
            part = rows if rubric is None else rows[rows["rubric"] == rubric.name]
            print(f"\n=== {name} ===")
            for message in render_messages(JudgeItem(found, criterion, rubric)):
                print(f"--- {message['role']} ---\n{message['content']}")
            print(f"--- {len(part)} answers ---")
            if part.empty:
                print("(none in the cache: run the study, or the request was refused)")
            for answer in part.itertuples():
                print(_reading_line(answer))
    return 0


def _reading_line(answer: Any) -> str:
    """One answer of ``--record``: how it was read, its reasoning (shortened), then the answer."""
    from ..scoring.reading.thinking import REASONING_CUT_OFF, split_reasoning

    valid = not isinstance(answer.reason, str)
    split = split_reasoning(answer.text, answer.reasoning)
    read = f"rating {answer.rating:g}" if valid else answer.reason
    inside = split.unfinished or (split.reasoning and not split.answer.strip())
    if answer.reason == "cut_off" and inside:
        read += f" ({REASONING_CUT_OFF})"
    if not split.reasoning:
        return f"[draw {answer.draw}] {read}: {answer.text!r}"
    thought = f"{len(split.reasoning):,} characters: {_ends(split.reasoning)}"
    return f"[draw {answer.draw}] {read}\n  reasoning ({thought})\n  answer: {split.answer!r}"


def _ends(text: str) -> str:
    """A long reasoning as its start and its end, where a judge concludes."""
    text = " ".join(text.split())
    if len(text) <= 2 * _TEXT_WIDTH:
        return repr(text)
    return f"{text[:_TEXT_WIDTH]!r} … {text[-_TEXT_WIDTH:]!r}"


def _cut(text: str) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= _TEXT_WIDTH + 20 else text[: _TEXT_WIDTH + 19] + "…"
