"""Box plots comparing the conditions, one PNG per criterion and the composite (``--plots``).

A plot is rendered to PNG bytes; :mod:`geval_async.scoring.outputs` writes the files.

matplotlib is an optional extra (``pip install geval-async[plots]``); it is imported only here,
with the non-interactive Agg backend, so the tool runs on machines with no screen.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from ..errors import ConfigError


def box_plot(
    table: pd.DataFrame,
    title: str,
    ylabel: str,
    ylim: tuple[float, float] | None = None,
) -> bytes:
    """A box plot per condition (column) of the per-group values, with every point shown."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError("--plots needs matplotlib: pip install 'geval-async[plots]'") from exc
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
