"""Benchmark: does the length check's interval for Spearman's rho cover the true rho?

The length check (:mod:`geval_async.scoring.stats.bias`) gives Spearman's rho of the weighted
score with the length of the text judged, and an interval. Here the records are drawn from a
known population, shaped like a study's: a latent quality and a latent length, bivariate
normal with correlation ``r``; the judge's weighted score is the mean of three ratings on a
1-5 scale (so it takes 13 values, with many ties), and the length is a log-normal count of
characters. The population's Spearman's rho is computed once from two million records; then
for each number of records ``n``, ``--draws`` studies are drawn and the share of intervals
that cover the population's rho is counted, beside the intervals' mean width.

    .venv/bin/python bench/length_interval.py [--quick] [--draws 2000]

Prints one line per (n, r) and writes ``bench/results/length_interval.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from geval_async.scoring.stats.bias import spearman_interval  # noqa: E402

SIZES = (50, 200, 1000, 5000)
CORRELATIONS = (0.0, 0.3, 0.6)
POPULATION = 2_000_000


def draw_records(rng: np.random.Generator, n: int, r: float) -> tuple[np.ndarray, np.ndarray]:
    """``n`` records' weighted scores (the mean of three 1-5 ratings around the latent
    quality) and lengths in characters (log-normal, around 600)."""
    quality = rng.normal(size=n)
    length = r * quality + np.sqrt(1 - r**2) * rng.normal(size=n)
    ratings = np.clip(np.round(3 + quality[:, None] + 0.8 * rng.normal(size=(n, 3))), 1, 5)
    return ratings.mean(axis=1), np.round(np.exp(6.4 + 0.5 * length))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=2000, help="studies drawn per (n, r)")
    parser.add_argument("--quick", action="store_true", help="200 draws")
    args = parser.parse_args()
    draws = 200 if args.quick else args.draws
    rng = np.random.default_rng(7)
    rows = []
    for r in CORRELATIONS:
        truth = float(spearmanr(*draw_records(rng, POPULATION, r)).statistic)
        for n in SIZES:
            covered, widths = 0, []
            for _ in range(draws):
                _, low, high, _, _ = spearman_interval(*draw_records(rng, n, r))
                covered += low <= truth <= high
                widths.append(high - low)
            row = {
                "n": n,
                "r": r,
                "rho": round(truth, 4),
                "draws": draws,
                "coverage": covered / draws,
                "mean_width": round(float(np.mean(widths)), 4),
            }
            rows.append(row)
            print(
                f"n={n:5d} r={r:.1f} rho={truth:.3f}: coverage {row['coverage']:.3f} "
                f"({draws} draws), mean width {row['mean_width']:.3f}",
                flush=True,
            )
    out = Path(__file__).resolve().parent / "results" / "length_interval.json"
    out.write_text(json.dumps({"confidence": 0.95, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
