"""The content of two outputs: the raw exports (JSON per criterion) and the Markdown report.

:mod:`geval_async.scoring.output.writer` decides the file names and writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import pandas as pd

from ...options import SamplingMode, StatTest
from ...study.evaluation_steps import steps_origin
from ...study.plan import JudgeItem, Study, render_messages
from ...study.pricing import PromptCacheShare
from ...study.records import Record
from ..panel.agreement_view import agreement_markdown
from ..scores.bias_checks import JudgeReactions
from ..scores.columns import ScoreColumns
from ..scores.scores import CriterionTally, ItemScore
from ..scores.trust import ONE_DRAW, n_curve_sentences
from ..stats.comparisons import Comparison


def write_raw_document(
    out: BinaryIO, study: Study, criterion: str, scores: Iterable[ItemScore]
) -> None:
    """Write the raw export of ``criterion`` to ``out``, one item at a time: the prompts of a
    large study are rendered as they are written, never all held (the records are read
    again from the file by offset). The bytes are those of the whole document dumped with
    ``orjson.OPT_INDENT_2``."""
    with _RecordLookup(study) as records:
        _write_raw_items(out, study, criterion, scores, records)


def _write_raw_items(
    out: BinaryIO,
    study: Study,
    criterion: str,
    scores: Iterable[ItemScore],
    records: _RecordLookup,
) -> None:
    criteria = {c.name: c for c in study.criteria}
    head = {
        "criterion": criterion,
        "display_name": criteria[criterion].config.display_name,
        "model": study.config.judge.model,
        "mode": study.config.sampling.mode,
        "items": None,
    }
    opening = orjson.dumps(head, option=orjson.OPT_INDENT_2).removesuffix(b"null\n}")
    written = 0
    # Rebuilt one at a time, this criterion's only, each with its record's position.
    found = (
        scores.with_records(criterion)
        if isinstance(scores, ScoreColumns)
        else ((score, None) for score in scores)
    )
    for score, position in found:
        if score.criterion != criterion:
            continue
        entry: dict[str, object] = {
            "record_id": score.record_id,
            "group": score.group,
            "condition": score.condition,
            "status": score.status,
        }
        if score.parts:
            # Each part is an item of the same record: at the same position.
            entry["rubrics"] = [_raw_item(p, records, criteria, position) for p in score.parts]
            if score.outcome is not None:
                entry["judged"] = score.outcome.judged
                entry["probability"] = score.outcome.probability
            entry["score"] = score.weighted_score
        else:
            entry.update(_raw_item(score, records, criteria, position))
        item = orjson.dumps(entry, option=orjson.OPT_INDENT_2)
        # JSON text holds no raw newline, so each line of the item moves in by its depth.
        out.write(
            (b",\n    " if written else opening + b"[\n    ") + item.replace(b"\n", b"\n    ")
        )
        written += 1
    out.write(b"\n  ]\n}" if written else opening + b"[]\n}")


class _RecordLookup:
    """A study's records by id (or by position), each read from the file when asked for (not
    all held), through one open handle; ``with`` closes it."""

    def __init__(self, study: Study) -> None:
        self._records = study.records
        self._reader = study.records.reader()
        self._positions: dict[str, int] | None = None  # made at the first look-up by id

    def find(self, record_id: str, position: int | None = None) -> Record:
        """The record ``record_id``, read at ``position`` when that is where it is."""
        if position is not None and position < len(self._reader):
            record = self._reader[position]
            if record.id == record_id:
                return record
        if self._positions is None:
            self._positions = {key: i for i, key in enumerate(self._records.ids)}
        return self._reader[self._positions[record_id]]

    def __enter__(self) -> _RecordLookup:
        return self

    def __exit__(self, *exc: object) -> None:
        self._reader.close()


def _raw_item(
    score: ItemScore,
    records: _RecordLookup,
    criteria: dict[str, Any],
    position: int | None = None,
) -> dict[str, object]:
    criterion = criteria[score.criterion]
    rubric = next((r for r in criterion.config.rubrics if r.name == score.rubric), None)
    item = JudgeItem(records.find(score.record_id, position), criterion, rubric)
    return {
        **({"rubric": score.rubric} if score.rubric else {}),
        "status": score.status,
        "messages": render_messages(item),
        "answers": list(score.answers),
        "ratings": list(score.ratings),
        "distribution": None if score.distribution is None else score.distribution.to_json(),
        "weighted_score": score.weighted_score,
        # As the server named it: another model than the head's, or a dated snapshot of it.
        **({"served_model": ", ".join(score.served)} if score.served else {}),
    }


def markdown_report(
    study: Study,
    tallies: Mapping[str, CriterionTally],
    tables: Mapping[str, pd.DataFrame],
    composite: pd.DataFrame | None,
    comparisons: list[Comparison],
    paired_file: str | None,
    plots: Mapping[str, Path],
    simulated: bool,
    *,
    invalid: pd.DataFrame | None = None,
    invalid_warnings: Sequence[str] = (),
    agreement: pd.DataFrame | None = None,
    agreement_file: str = "",
    prompt_cache: PromptCacheShare | None = None,
) -> str:
    """The short Markdown report: coverage, invalid samples, tables, tests, plot links, and
    for a panel the agreement between its judges (``agreement``: the frame of
    :func:`~geval_async.scoring.panel.agreement.agreement_frame`; ``agreement_file`` names its CSV,
    ``stats/<prefix>_agreement.csv`` when empty).

    ``invalid`` is :func:`geval_async.scoring.scores.readings.invalid_shares` (per criterion and
    condition, by reason); ``invalid_warnings`` say where the invalid share differs between
    the compared conditions. ``paired_file`` names the paired tests' file when the same
    groups appear in both conditions (None: they do not). ``prompt_cache``: the share of the
    runs' prompt tokens the provider's prompt cache served (None: not reported).
    """
    config = study.config
    out = [f"# {config.output.prefix}: G-Eval report", ""]
    out.append(
        f"Judge: `{config.judge.model}`, mode `{config.sampling.mode}`"
        + (f", n = {config.sampling.n}" if config.sampling.mode == SamplingMode.SAMPLES else "")
        + f". Config: `{config.source}`."
    )
    if prompt_cache is not None:
        out += ["", f"Prompt cache: {prompt_cache.line()}, over the runs of this config."]
    if simulated:
        out += [
            "",
            "> **The judge was geval-async's simulated server**: ratings are synthetic, "
            "for trying the tool, not findings.",
        ]
    out += [
        "",
        "## Coverage",
        "",
        "| criterion | items | scored | missing | refused | no valid rating | "
        "valid samples | invalid samples |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in tallies.items():
        out.append(
            f"| {name} | {t.items} | {t.scored} | {t.missing} | {t.refused} | "
            f"{t.no_valid} | {t.valid_samples} | {t.invalid_samples} |"
        )
    examples = [(n, e) for n, t in tallies.items() for e in t.invalid_examples[:2]]
    if examples:
        out += ["", "Examples of invalid answers (not scored, never counted as 0):", ""]
        out += [f"- {name}: {example}" for name, example in examples]
    out += _invalid_section(invalid, invalid_warnings)
    missing = sum(t.missing + t.refused for t in tallies.values())
    if missing:
        out += ["", f"**{missing} items have no answer and are left out of every table.**"]
    for name, table in tables.items():
        display = config.criterion(name).display_name
        out += ["", f"## {display} (`{name}`, mean weighted score)", "", _markdown(table)]
    if composite is not None:
        out += [
            "",
            "## Composite (100-point)",
            "",
            f"Normalisation: `{config.composite.normalize}` over "
            f"{', '.join(config.composite.criteria)}.",
            "",
            _markdown(composite),
        ]
    if comparisons:
        out += comparison_section(comparisons, config.stats.alpha)
        design = (
            "The same groups appear in both conditions (a within-group design): the "
            f"paired t-test and Wilcoxon signed-rank test in `stats/{paired_file}` match "
            "this design; Welch's test treats the conditions as independent samples."
            + (
                " The summary uses Welch's test because `[stats] test` names it."
                if config.stats.test == StatTest.WELCH and comparisons[0].test == StatTest.WELCH
                else ""
            )
            if paired_file is not None
            else "Groups differ between the conditions: Welch's test (independent samples) "
            "matches this design."
        )
        out += ["", design]
    if agreement is not None:
        csv_name = agreement_file or f"stats/{config.output.prefix}_agreement.csv"
        out += agreement_markdown(agreement, csv_name)
    out += steps_section(study)
    if plots:
        out += ["", "## Plots", ""]
        out += [
            f"![{name}]({path.relative_to(config.output.path)})" for name, path in plots.items()
        ]
    return "\n".join(out) + "\n"


def steps_section(study: Study) -> list[str]:
    """The evaluation steps each criterion's prompt held, and where they came from."""
    shown = [c for c in study.criteria if c.steps is not None and c.steps.text]
    if not shown:
        return []
    out = ["", "## Evaluation steps", ""]
    for planned in shown:
        origin = steps_origin(planned, study.config.judge.model)
        out += [f"**{planned.config.display_name}** (`{planned.name}`): {origin}.", ""]
        out += [str(planned.steps.text if planned.steps else ""), ""]
    return out[:-1]


def comparison_section(comparisons: list[Comparison], alpha: float, note: str = "") -> list[str]:
    """The Markdown lines of one test's table (``note`` follows the heading)."""
    first = comparisons[0]
    out = [
        "",
        f"## {first.test} test: {first.condition_a} vs {first.condition_b}",
        "",
        *([note, ""] if note else []),
        f"Benjamini-Hochberg FDR across the criteria at alpha = {alpha}; "
        "the composite is tested on its own.",
        "",
    ]
    out.append(
        "| criterion | mean A (sd) | mean B (sd) | n A | n B | statistic | df | p | "
        "p adj | reject | Hedges' g [CI] |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|---:|")
    for c in comparisons:
        df = "" if c.df is None else f"{c.df:.2f}"
        p_adj = "" if c.p_adj is None else f"{c.p_adj:.4g}"
        out.append(
            f"| {c.criterion} | {c.mean_a:.3f} ({c.sd_a:.3f}) | {c.mean_b:.3f} ({c.sd_b:.3f})"
            f" | {c.n_a} | {c.n_b} | {c.statistic:.3f} | {df} | {c.p:.4g} | {p_adj} | "
            f"{'yes' if c.reject else 'no'} | {c.hedges_g:.2f} "
            f"[{c.g_ci_low:.2f}, {c.g_ci_high:.2f}] |"
        )
    return out


def _invalid_section(invalid: pd.DataFrame | None, warnings: Sequence[str]) -> list[str]:
    """Invalid shares per criterion and condition, by reason, and the share warnings."""
    if invalid is None or invalid.empty or not invalid["invalid"].any():
        return []
    reasons = [c for c in invalid.columns[5:] if invalid[c].any()]
    out = [
        "",
        "## Invalid samples",
        "",
        "Answers that gave no rating, by reason (`geval-async answers CONFIG` lists them):",
        "",
        "| criterion | condition | samples | invalid | share | " + " | ".join(reasons) + " |",
        "|---|---|---:|---:|---:|" + "---:|" * len(reasons),
    ]
    for row in invalid.itertuples():
        counts = " | ".join(str(getattr(row, r)) for r in reasons)
        out.append(
            f"| {row.criterion} | {row.condition} | {row.samples} | {row.invalid} | "
            f"{row.share:.1%} | {counts} |"
        )
    out += ["", *(f"> **Warning:** {w}" for w in warnings)] if warnings else []
    return out


def _markdown(table: pd.DataFrame) -> str:
    header = [str(table.index.name or "")] + [str(c) for c in table.columns]
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * len(table.columns) + "|"]
    for index, *row in table.itertuples(name=None):
        cells = ["" if pd.isna(v) else f"{v:.3f}" for v in row]
        lines.append("| " + " | ".join([str(index), *cells]) + " |")
    return "\n".join(lines)


def trust_section(
    long: pd.DataFrame,
    consistency: pd.DataFrame,
    n_curve: pd.DataFrame,
    mode: SamplingMode,
    plot: str | None = None,
) -> str:
    """The Markdown of how far to trust the scores: the mean SE per criterion, the judge's
    self-consistency over its draws and the n curve (``plot``: the n curve's image, relative
    to the report)."""
    spread = (
        "the standard deviation of the rating distribution (the spread of the judge's belief "
        "on its one draw, not a sampling error)"
        if mode == SamplingMode.LOGPROBS
        else "s / sqrt(m) of the valid ratings (ddof = 1; undefined below two valid ratings)"
    )
    mean_se = long.groupby("criterion", sort=False)["se"].mean()
    out = [
        "",
        "## How far to trust the scores",
        "",
        f"Each record's standard error (`se` in `scores/*_long.csv`) is {spread}. "
        "Self-consistency is Krippendorff's alpha over the judge's own draws "
        "(records as units, draws as coders; 1 = every draw agrees); units are the records "
        "with two or more valid draws (rubric criteria: each record's rubrics).",
        "",
        "| criterion | mean SE | draws | units | alpha (interval) | alpha (ordinal) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in consistency.itertuples():
        out.append(
            f"| {row.criterion} | {_number(mean_se.get(row.criterion))} | {row.draws} | "
            f"{row.units} | {_number(row.alpha_interval)} | {_number(row.alpha_ordinal)} |"
        )
    notes = sorted({str(n) for n in consistency["note"] if isinstance(n, str) and n})
    out += ["", *(f"Note: {note}." for note in notes)] if notes else []
    out += ["", "### Was n worth it", ""]
    if mode == SamplingMode.LOGPROBS:
        return "\n".join([*out, f"Not computed: {ONE_DRAW}."]) + "\n"
    if n_curve.empty:
        return "\n".join([*out, "Not computed: no Likert criterion with scored records."]) + "\n"
    out += [
        "Every record re-scored from its first k cached draws (no new calls): Spearman with "
        "the n-draw scores (nested draws, so an upper bound for an independent run) and the "
        "mean SE.",
        "",
        *(f"- {sentence}." for sentence in n_curve_sentences(n_curve)),
        "",
        "| criterion | k | Spearman | mean SE |",
        "|---|---:|---:|---:|",
    ]
    for row in n_curve.itertuples():
        out.append(
            f"| {row.criterion} | {row.k} | {_number(row.spearman)} | {_number(row.mean_se)} |"
        )
    if plot is not None:
        out += ["", f"![n curve]({plot})"]
    return "\n".join(out) + "\n"


def _number(value: object) -> str:
    return "" if value is None or pd.isna(value) else f"{float(value):.3f}"  # type: ignore[arg-type]


BIAS_HEADING = "What the judge may be reacting to"
# What each measure is, as the reports name it.
MEASURE_WORDS = {
    "spearman": "Spearman rho, score vs length",
    "top_share": "share of the most common rating",
    "points_used": "share of the scale's points used",
    "entropy_bits": "entropy of the ratings (bits)",
    "first_shown_wins": "share won by the text shown first",
    "own_minus_other": "own family's mean score minus the others'",
}


def bias_flags(reactions: JudgeReactions) -> list[str]:
    """One sentence per flagged check of a criterion: what was found in each scope, then what
    to do about it."""
    flagged = reactions.frame[reactions.frame["flagged"]]
    sentences = []
    for (check, criterion, measure), rows in flagged.groupby(
        ["check", "criterion", "measure"], sort=False
    ):
        found = []
        for row in rows.itertuples():
            interval = (
                "" if pd.isna(row.ci_low) else f" [{_number(row.ci_low)}, {_number(row.ci_high)}]"
            )
            scope = "" if row.condition == "all" else f" in {row.condition}"
            found.append(f"{_number(row.value)}{interval}{scope}")
        words = MEASURE_WORDS.get(str(measure), str(measure))
        advice = rows["advice"].iloc[0]
        sentences.append(f"{check} ({criterion}): {words} = {'; '.join(found)}. {advice}")
    return sentences


def bias_section(reactions: JudgeReactions, csv_name: str) -> str:
    """The Markdown of what the judge may be reacting to besides quality (``csv_name``: the
    bias table's file, relative to the report)."""
    out = [
        "",
        f"## {BIAS_HEADING}",
        "",
        "Checked from the cached answers alone (no request): the rank correlation of each "
        "criterion's weighted score with the length of the text judged (flagged when its "
        "interval excludes 0 and |rho| >= 0.3), the use of the scale (flagged when "
        "one rating takes 80% or more of the valid ratings), the share won by the text shown "
        "first in pairwise criteria (flagged when its interval excludes 0.5) and the judge's "
        "scores of its own model family's texts against the others'. A flag is a reason to "
        f"look, not a verdict. Every row is in `{csv_name}`.",
        "",
    ]
    flags = bias_flags(reactions)
    out += [f"- **Flag:** {sentence}" for sentence in flags] or ["No check is flagged."]
    out += [
        "",
        "| check | criterion | condition | measure | value | interval | n | flagged | note |",
        "|---|---|---|---|---:|---:|---:|:-:|---|",
    ]
    for row in reactions.frame.itertuples():
        interval = "" if pd.isna(row.ci_low) else f"[{_number(row.ci_low)}, {_number(row.ci_high)}]"
        out.append(
            f"| {row.check} | {row.criterion} | {row.condition} | {row.measure} | "
            f"{_number(row.value)} | {interval} | {row.n} | {'yes' if row.flagged else 'no'} | "
            f"{row.note} |"
        )
    out += ["", *(f"Note: {note}." for note in reactions.notes)] if reactions.notes else []
    return "\n".join(out) + "\n"
