"""The report's figures as inline SVG, drawn by matplotlib, the same bytes for the same data.

Box plots per condition with every group as a point, the distribution of ratings per
criterion and condition, and judge-vs-human scatter plots. SVG output is made reproducible:
a fixed hash salt per figure (element ids stay unique when several figures share one page),
no date in the metadata, text kept as text (``svg.fonttype = none``) so it is searchable and
screen readers can read it. Colours are the Okabe-Ito palette, distinct under colour blindness.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ....errors import ConfigError

# Okabe & Ito (2008): distinguishable with every common colour-vision deficiency.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
RASTER_POINTS = 600


def require_matplotlib() -> Any:
    """pyplot on the non-interactive Agg backend, or one line that says how to install it.

    Raises:
        ConfigError: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError("--html needs matplotlib: pip install 'geval-async[plots]'") from exc
    return plt


def _pyplot(name: str) -> Any:
    plt = require_matplotlib()
    plt.rcParams.update(
        {
            "svg.hashsalt": f"geval-{name}",
            "svg.fonttype": "none",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    return plt


def _svg(plt: Any, figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", dpi=150, metadata={"Date": None, "Creator": None})
    plt.close(figure)
    text = buffer.getvalue()
    # Inline SVG needs no XML prolog or doctype.
    return text[text.index("<svg") :]


def _margins(figure: Any) -> None:
    # Fixed margins (in inches) instead of tight_layout, which draws the figure once more.
    width, height = figure.get_size_inches()
    figure.subplots_adjust(
        left=0.7 / width, right=1 - 0.15 / width, bottom=0.55 / height, top=1 - 0.15 / height
    )


def box_figure(
    name: str, table: pd.DataFrame, ylabel: str, ylim: tuple[float, float] | None
) -> str:
    """One box per condition (column) of the per-group values, every group drawn as a point."""
    plt = _pyplot(name)
    columns = [str(c) for c in table.columns]
    values = [table[c].dropna().to_numpy(dtype=float) for c in table.columns]
    figure, axes = plt.subplots(figsize=(1.3 * max(2, len(columns)) + 1.4, 3.2))
    present = [i for i, v in enumerate(values) if len(v)]
    if present:
        axes.boxplot(
            [values[i] for i in present],
            positions=[i + 1 for i in present],
            tick_labels=[columns[i] for i in present],
            widths=0.5,
            showmeans=True,
            showfliers=False,
            medianprops={"color": "black"},
            meanprops={"marker": "D", "markerfacecolor": "white", "markeredgecolor": "black"},
        )
    jitter = np.random.default_rng(0)  # fixed: the same data gives the same picture
    # Thousands of points as vector markers make a heavy page; past a few hundred they are drawn
    # as one embedded bitmap (the boxes, axes and text stay vector).
    many = sum(len(v) for v in values) > RASTER_POINTS
    for i, column in enumerate(values):
        x = i + 1 + jitter.uniform(-0.14, 0.14, size=len(column))
        axes.scatter(
            x,
            column,
            s=10,
            alpha=0.55,
            color=PALETTE[i % len(PALETTE)],
            marker=_MARKERS[i % len(_MARKERS)],
            zorder=3,
            linewidths=0,
            rasterized=many,
        )
    axes.set_xticks(range(1, len(columns) + 1), columns)
    axes.set_ylabel(ylabel)
    if ylim is not None:
        pad = (ylim[1] - ylim[0]) * 0.05
        axes.set_ylim(ylim[0] - pad, ylim[1] + pad)
    axes.grid(axis="y", alpha=0.3)
    _margins(figure)
    return _svg(plt, figure)


def distribution_figure(
    name: str, shares: Mapping[str, Mapping[float, float]], points: Sequence[float]
) -> str:
    """Grouped bars: the share of each rating per condition (``shares[condition][rating]``)."""
    plt = _pyplot(name)
    figure, axes = plt.subplots(figsize=(max(3.6, 0.5 * len(points) * len(shares) + 1.6), 3.0))
    width = 0.8 / max(1, len(shares))
    x = np.arange(len(points))
    hatches = ("", "//", "..", "xx", "\\\\", "++", "oo")  # a second cue besides colour
    for i, (condition, share) in enumerate(shares.items()):
        axes.bar(
            x + (i - (len(shares) - 1) / 2) * width,
            [share.get(p, 0.0) for p in points],
            width,
            label=condition,
            color=PALETTE[i % len(PALETTE)],
            hatch=hatches[i % len(hatches)],
            edgecolor="white",
        )
    axes.set_xticks(x, [f"{p:g}" for p in points])
    axes.set_xlabel("rating")
    axes.set_ylabel("share of ratings")
    axes.set_ylim(0, 1)
    axes.grid(axis="y", alpha=0.3)
    if len(shares) > 1:
        axes.legend(frameon=False)
    _margins(figure)
    return _svg(plt, figure)


def scatter_figure(name: str, pairs: pd.DataFrame, ylim: tuple[float, float], label: str) -> str:
    """Judge score (y, on its scale ``ylim``) against human score (x), one point per record."""
    plt = _pyplot(name)
    figure, axes = plt.subplots(figsize=(3.6, 3.2))
    axes.scatter(
        pairs["human"],
        pairs["judge"],
        s=10,
        alpha=0.5,
        color=PALETTE[0],
        linewidths=0,
        rasterized=len(pairs) > RASTER_POINTS,
    )
    axes.set_xlabel("human score")
    axes.set_ylabel(label)
    axes.set_ylim(ylim[0] - 0.1, ylim[1] + 0.1)
    axes.grid(alpha=0.3)
    _margins(figure)
    return _svg(plt, figure)


def n_curve_figure(curve: pd.DataFrame) -> str:
    """The n curve (:func:`..plots.draw_n_curve`: Spearman with the full n and the mean SE
    against the draws kept) as inline SVG."""
    from ..plots import draw_n_curve

    plt = _pyplot("n-curve")
    return _svg(plt, draw_n_curve(plt, curve, PALETTE))
