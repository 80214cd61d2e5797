"""Box plots comparing the conditions, one PNG per criterion and the composite (``--plots``),
and the n curve (was n worth it: :mod:`.trust`).

A plot is rendered to PNG bytes; :mod:`geval_async.scoring.output.writer` writes the files.

matplotlib is an optional extra (``pip install geval-async[plots]``); it is imported only here,
with the non-interactive Agg backend, so the tool runs on machines with no screen.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ConfigError


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError("--plots needs matplotlib: pip install 'geval-async[plots]'") from exc
    return plt


def _default_style(render: Callable[..., bytes]) -> Callable[..., bytes]:
    """Render with matplotlib's default style, whatever an earlier figure set (the HTML
    report's figures set their own fonts): the same data gives the same PNG in any order,
    as when a panel writes one judge's plots after another judge's HTML."""

    @functools.wraps(render)
    def rendered(*args: Any, **kwargs: Any) -> bytes:
        with _pyplot().style.context("default"):
            return render(*args, **kwargs)

    return rendered


def draw_n_curve(plt: Any, curve: pd.DataFrame, colours: Sequence[str] | None = None) -> Any:
    """The n curve's figure: per criterion, Spearman with the full n (left) and the mean SE
    of the record scores (right) against k, the draws kept."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(7.5, 3.0), dpi=150)
    for index, (name, rows) in enumerate(curve.groupby("criterion", sort=False)):
        style: dict[str, Any] = {"marker": "o", "markersize": 3, "label": str(name)}
        if colours:
            style["color"] = colours[index % len(colours)]
        left.plot(rows["k"], rows["spearman"], **style)
        right.plot(rows["k"], rows["mean_se"], **style)
    n = int(curve["n"].max()) if len(curve) else 1
    for axes, label in ((left, "Spearman with n = " + str(n)), (right, "mean SE of the scores")):
        axes.set_xlabel("draws kept (k)")
        axes.set_ylabel(label)
        axes.set_xticks(range(1, n + 1))
        axes.grid(alpha=0.3)
    left.legend(fontsize=7, frameon=False)
    figure.tight_layout()
    return figure


@_default_style
def n_curve_plot(curve: pd.DataFrame) -> bytes:
    """The n curve as PNG bytes."""
    plt = _pyplot()
    figure = draw_n_curve(plt, curve)
    png = io.BytesIO()
    figure.savefig(png, format="png")
    plt.close(figure)
    return png.getvalue()


@_default_style
def box_plot(
    table: pd.DataFrame,
    title: str,
    ylabel: str,
    ylim: tuple[float, float] | None = None,
) -> bytes:
    """A box plot per condition (column) of the per-group values, with every point shown."""
    plt = _pyplot()
    columns = [str(c) for c in table.columns]
    values = [table[c].dropna().to_numpy(dtype=float) for c in table.columns]
    figure, axes = plt.subplots(figsize=(1.9 * max(2, len(columns)) + 1.2, 4.0), dpi=150)
    axes.boxplot(
        values,
        tick_labels=columns,
        widths=0.5,
        showmeans=True,
        medianprops={"color": "black"},
        meanprops={
            "marker": "D",
            "markerfacecolor": "white",
            "markeredgecolor": "black",
            "markersize": 5,
        },
    )
    jitter = np.random.default_rng(0)  # fixed: the same data gives the same picture
    for position, column in enumerate(values, start=1):
        x = position + jitter.uniform(-0.12, 0.12, size=len(column))
        axes.scatter(x, column, s=14, alpha=0.6, color="tab:blue", zorder=3)
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    if ylim is not None:
        pad = (ylim[1] - ylim[0]) * 0.05
        axes.set_ylim(ylim[0] - pad, ylim[1] + pad)
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    png = io.BytesIO()
    figure.savefig(png, format="png")
    plt.close(figure)
    return png.getvalue()
