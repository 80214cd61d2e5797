"""Benchmark: agreement between judges (scoring/panel/agreement.py) on a panel's weighted scores.

For records x judges weighted scores (10% missing), continuous (logprobs mode) or on a grid
of tenths (samples mode, n = 10): the wall time of ``judge_agreement`` with the default
bootstrap (1,000 resamples) and of each part, then, for the record, ``krippendorff.alpha``
itself (one interval alpha, no bootstrap) on small continuous inputs, the reason
:mod:`geval_async.scoring.panel.alpha` owns a closed form (it builds a records x values x values
array).

    .venv/bin/python bench/agreement.py [--quick] [--package]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import save, table

from geval_async.scoring.panel.agreement import judge_agreement
from geval_async.scoring.panel.alpha import alpha_interval, alpha_ordinal, bootstrap_alpha


def panel(records: int, judges: int, *, grid: bool, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.normal(3, 1, records)
    scores = np.stack([truth + rng.normal(0, 0.6, records) for _ in range(judges)], axis=1)
    scores = np.clip(scores, 1, 5)
    if grid:
        scores = np.round(scores * 10) / 10
    scores[rng.random(scores.shape) < 0.1] = np.nan
    return scores


def timed(action: Callable[..., object], *args: object, **kwargs: object) -> float:
    start = time.perf_counter()
    action(*args, **kwargs)
    return time.perf_counter() - start


def both_alphas(x: np.ndarray) -> tuple[float, float]:
    return alpha_interval(x), alpha_ordinal(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,600 records only")
    parser.add_argument(
        "--package", action="store_true", help="also time krippendorff.alpha (slow, GBs)"
    )
    args = parser.parse_args()
    sizes = [1_600] if args.quick else [1_600, 10_000]
    rows = []
    for records in sizes:
        for judges in (3, 5):
            for grid in (False, True):
                x = panel(records, judges, grid=grid)
                ids = [str(i) for i in range(records)]
                names = [f"judge{j}" for j in range(judges)]
                agreement = judge_agreement("c", x, names, ids)
                rows.append(
                    {
                        "records": records,
                        "judges": judges,
                        "scores": "grid 0.1" if grid else "continuous",
                        "distinct": len(np.unique(x[~np.isnan(x)])),
                        "agreement_s": timed(judge_agreement, "c", x, names, ids),
                        "alphas_s": timed(both_alphas, x),
                        "bootstrap_s": timed(
                            bootstrap_alpha, x, bootstrap=1000, seed=0, confidence=0.95
                        ),
                        "alpha_interval": agreement.alpha_interval.value,
                        "icc_2_1": agreement.icc_single.value,
                    }
                )
                print(table(rows[-1:], list(rows[-1])), flush=True)
    package = []
    if args.package:
        import krippendorff

        for records in (100, 200):
            x = panel(records, 3, grid=False)
            seconds = timed(krippendorff.alpha, x.T, level_of_measurement="interval")
            package.append(
                {
                    "records": records,
                    "judges": 3,
                    "package_s": seconds,
                    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                }
            )
            print(table(package[-1:], list(package[-1])), flush=True)
    print(table(rows, list(rows[0])))
    print(save("agreement", {"rows": rows, "package": package}))


if __name__ == "__main__":
    main()
