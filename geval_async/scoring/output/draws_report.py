"""The reports' "Draws spent by need" section: what a study that stops drawing where ratings
settle used, against the fixed study of the same n.

Read from :meth:`~geval_async.scoring.scores.results.StudyResults.draws_frame` (the rows of
``stats/<prefix>_draws.csv``); the Markdown report and the HTML report show the same rows
and the same sentences. A study of a fixed n has no such section.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ...study.pricing import usd
from ...study.settings import SamplingConfig

__all__ = ["DRAWS_HEADER", "draws_intro", "draws_markdown", "draws_rows", "draws_sentences"]

DRAWS_HEADER = [
    "criterion",
    "settled",
    "drawing",
    "draws",
    "fixed draws",
    "share",
    "stopped at first_draws",
    "requests",
    "fixed requests",
    "prompt tokens",
    "fixed prompt tokens",
    "completion tokens",
    "fixed completion tokens",
    "cost",
    "fixed cost",
    "saving",
]


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _share(value: object) -> str:
    return "" if _missing(value) else f"{float(value):.0%}"  # type: ignore[arg-type]


def _usd(value: object) -> str:
    return "" if _missing(value) else usd(float(value))  # type: ignore[arg-type]


def draws_intro(sampling: SamplingConfig) -> str:
    """How the study spent its draws, in one sentence."""
    first, n = sampling.first_draws, sampling.n
    if sampling.draws is not None:
        rule = (
            f"from a budget of {sampling.draws:,} draws, each item was asked {first} draws "
            "(`first_draws`) and the rest went in rounds to the items whose ratings disagree most"
        )
    else:
        rule = (
            f"each item was asked {first} draws (`first_draws`), then more in rounds while its "
            f"standard error was above `target_se` = {sampling.target_se:g}"
        )
    return (
        f"Draws were spent by need, up to n = {n} an item: {rule}. Against the fixed "
        "study (n draws every item), on the same prompts and answers: the fixed study's "
        "requests are one an item on an endpoint that takes `n` and n an item on one that "
        "answers one draw a request, each with the prompt tokens the requests here carried on "
        "average, and its draws take the completion tokens the draws here took on average. "
        "The cost is what the answers' usage billed, priced at the config's model (else the "
        "token estimate: `cost_basis`)."
    )


def draws_rows(frame: pd.DataFrame) -> list[list[str]]:
    """The section's table, one row per criterion, formatted."""
    rows = []
    for row in frame.itertuples():
        rows.append(
            [
                str(row.criterion),
                f"{row.settled:,}",
                f"{row.drawing:,}",
                f"{row.draws:,}",
                f"{row.fixed_draws:,}",
                _share(row.draws_share),
                _share(row.at_first_draws),
                f"{row.requests:,}",
                f"{row.fixed_requests:,}",
                f"{row.prompt_tokens:,}",
                f"{row.fixed_prompt_tokens:,}",
                f"{row.completion_tokens:,}",
                f"{row.fixed_completion_tokens:,}",
                _usd(row.cost),
                _usd(row.fixed_cost),
                _share(row.saving),
            ]
        )
    return rows


def draws_sentences(frame: pd.DataFrame) -> list[str]:
    """A sentence per criterion: the draws used, the items stopped at once, the requests and
    the saving, saying where more requests than the fixed study's ate into it."""
    sentences = []
    for row in frame.itertuples():
        text = (
            f"{row.criterion}: {row.draws:,} draws of the fixed study's {row.fixed_draws:,} "
            f"({_share(row.draws_share)})"
        )
        if not _missing(row.at_first_draws):
            text += f", {_share(row.at_first_draws)} of the settled items stopped at first_draws"
        if row.requests > row.fixed_requests:
            text += (
                f"; {row.requests:,} requests against the fixed study's {row.fixed_requests:,}: "
                "the endpoint takes n, so each round is one more request that pays the prompt "
                f"again, and the saving is in completion tokens ({row.completion_tokens:,} "
                f"against {row.fixed_completion_tokens:,})"
            )
        else:
            text += f"; {row.requests:,} requests against the fixed study's {row.fixed_requests:,}"
        if _missing(row.saving):
            text += "; no saving in cost computed (the model has no price: add it to [prices])"
        else:
            saving = float(row.saving)
            word = "a saving" if saving >= 0 else "a loss"
            text += (
                f"; cost {_usd(row.cost)} against {_usd(row.fixed_cost)}, {word} of "
                f"{abs(saving):.0%} ({row.cost_basis})"
            )
        if row.drawing:
            text += (
                f"; {row.drawing:,} items still drawing (run again to finish them; the draws "
                "counted are the settled items')"
            )
        sentences.append(text)
    return sentences


def draws_markdown(frame: pd.DataFrame | None, sampling: SamplingConfig, csv_name: str) -> str:
    """The Markdown section ("" for a study of a fixed n)."""
    if frame is None:
        return ""
    out: list[Any] = [
        "",
        "## Draws spent by need",
        "",
        draws_intro(sampling) + f" Per criterion in `{csv_name}`.",
        "",
        *(f"- {sentence}." for sentence in draws_sentences(frame)),
        "",
        "| " + " | ".join(DRAWS_HEADER) + " |",
        "|---|" + "---:|" * (len(DRAWS_HEADER) - 1),
    ]
    out += ["| " + " | ".join(row) + " |" for row in draws_rows(frame)]
    return "\n".join(out) + "\n"
