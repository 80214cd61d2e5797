"""The report's "How far to trust the scores" section: the mean standard error per criterion,
the judge's self-consistency over its draws and the n curve (table, sentences, inline SVG).

Plain data for the template, from :attr:`StudyResults.consistency` and
:attr:`StudyResults.n_curve` (see :mod:`..trust`); numbers formatted as in the Markdown report.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from ....options import SamplingMode
from ...scores.results import StudyResults
from ...scores.trust import ONE_DRAW, n_curve_sentences
from .figures import n_curve_figure
from .gallery import Figure
from .overview import Table, number


def trust_section(results: StudyResults) -> dict[str, Any]:
    """The section's tables, sentences and figure (None when the curve is not computed)."""
    logprobs = results.config.sampling.mode == SamplingMode.LOGPROBS
    mean_se = results.long.groupby("criterion", sort=False)["se"].mean()
    consistency = results.consistency
    rows = [
        [
            str(row.criterion),
            number(mean_se.get(row.criterion)),
            str(row.draws),
            str(row.units),
            number(row.alpha_interval),
            number(row.alpha_ordinal),
        ]
        for row in consistency.itertuples()
    ]
    table = Table(
        "Standard error and self-consistency per criterion "
        f"(stats/{results.prefix}_consistency.csv)",
        ["criterion", "mean SE", "draws", "units", "alpha (interval)", "alpha (ordinal)"],
        rows,
        note="; ".join(sorted({str(n) for n in consistency["note"] if isinstance(n, str) and n})),
    )
    curve = results.n_curve
    section: dict[str, Any] = {
        "logprobs": logprobs,
        "table": table,
        "not_computed": ONE_DRAW if logprobs else ("" if len(curve) else "no Likert criterion"),
        "sentences": n_curve_sentences(curve),
        "curve": None,
        "figure": None,
    }
    if len(curve):
        section["curve"] = Table(
            f"Was n worth it (stats/{results.prefix}_n_curve.csv)",
            ["criterion", "k", "Spearman with n", "mean SE"],
            [
                [str(r.criterion), str(r.k), number(r.spearman), number(r.mean_se)]
                for r in curve.itertuples()
            ],
        )
        section["figure"] = Figure(
            "n-curve",
            "Was n worth it",
            "Per criterion, against the draws kept per record (k): the Spearman correlation "
            "of the scores from the first k draws with the scores from all n (left), and the "
            "mean standard error of the record scores (right).",
            Markup(n_curve_figure(curve)),
        )
    return section
