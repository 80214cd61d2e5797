"""The panel's part of its Markdown report: the judges, the records only some of them scored,
and how far they agree (sync, pure: handed the panel's results, returns text).

:mod:`.outputs` adds it to the panel's ``<prefix>_report.md``; the judges' own reports
(``<prefix>-judge-<name>_report.md``) are one-judge reports.
"""

from __future__ import annotations

import pandas as pd

from ...options import SamplingMode
from .results import PanelStudyResults

__all__ = ["panel_judges_line", "panel_section"]


def panel_judges_line(results: PanelStudyResults) -> str:
    """The report's line naming the judges (where a one-judge report names its judge)."""
    config = results.config
    pool = f"{config.panel.pool}" + (" (weighted)" if config.panel.weights else "")
    described = []
    for member in config.judges:
        sampling = member.sampling
        n = f", n = {sampling.n}" if sampling.mode == SamplingMode.SAMPLES else ""
        described.append(f"`{member.name}` (`{member.judge.model}`, {sampling.mode}{n})")
    return (
        f"Judges: a panel of {len(config.judges)}, {', '.join(described)}; each record's "
        f"score is the {pool} of the judges' weighted scores. Config: `{config.source}`."
    )


def panel_section(results: PanelStudyResults, prefix: str) -> str:
    """The Markdown of the panel: judges and weights, flagged records (the agreement between
    the judges is its own section: :func:`~.agreement_view.agreement_markdown`)."""
    config = results.config
    flagged = results.flagged()
    out = [
        "",
        "## The panel",
        "",
        f"Pooling: `{config.panel.pool}` of the weighted scores of the judges that scored the "
        "record. A judge that could not score a record (no valid rating, a refusal, no answer) "
        "is left out of its pool and the record is **flagged** (`judges_scored` and "
        f"`judges_missing` in `scores/{prefix}_long.csv`); a record no judge scored is "
        "left unscored.",
        "",
        "| judge | model | weight | report |",
        "|---|---|---:|---|",
    ]
    for member in config.judges:
        out.append(
            f"| {member.name} | `{member.judge.model}` | {config.panel.weight(member.name):g} | "
            f"`{prefix}-judge-{member.name}_report.md` |"
        )
    names = list(results.members)
    out += [
        "",
        f"Records scored by only some judges: {int(flagged['flagged'].sum())}"
        f" (of {int(flagged['scored'].sum())} scored).",
        "",
        "| criterion | records | scored | flagged | unscored | "
        + " | ".join(f"not by {n}" for n in names)
        + " |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(names),
    ]
    for row in flagged.itertuples(index=False):
        values = row._asdict()
        counts = " | ".join(str(values[f"not_{n}"]) for n in names)
        out.append(
            f"| {row.criterion} | {row.records} | {row.scored} | {row.flagged} | "
            f"{row.unscored} | {counts} |"
        )
    out += [
        "",
        "Each judge's self-consistency over its own draws and its n curve are in its own "
        f"report and `stats/{prefix}-judge-<name>_consistency.csv` / `_n_curve.csv`; the "
        "panel has none (a pooled score has no draws of its own).",
    ]
    return "\n".join(out) + "\n"


def _number(value: object) -> str:
    return "" if value is None or pd.isna(value) else f"{float(value):.3f}"  # type: ignore[arg-type]
