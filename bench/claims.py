"""What claiming costs: ``Claims.settle`` of 8,000 keys in groups of 1, 6 and 25.

The other half of the store's hot path (benchmark 2): before a request is sent its key is
claimed, and once its answer is stored the claim is let go, in one transaction per group
(``settle``: let go of the last group, claim the next). Real claims folders; CPU and wall
microseconds per key for each group size.

    .venv/bin/python bench/claims.py [--quick] [--keys 8000]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import save, table

from geval_async.judging.claims import Claims


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=8_000)
    parser.add_argument("--quick", action="store_true", help="1,000 keys")
    args = parser.parse_args()
    if args.quick:
        args.keys = 1_000
    keys = [f"g2-{i:064d}" for i in range(args.keys)]
    rows = []
    for group in (1, 6, 25):
        with tempfile.TemporaryDirectory() as folder, Claims(Path(folder), 60.0) as claims:
            cpu, wall = _cpu(), time.perf_counter()
            held: list[str] = []
            for start in range(0, len(keys), group):
                chunk = keys[start : start + group]
                assert all(claims.settle(held, chunk))
                held = chunk
            claims.release_many(held)
            wall, cpu = time.perf_counter() - wall, _cpu() - cpu
            assert len(claims) == 0
        rows.append(
            {
                "group": group,
                "keys": len(keys),
                "cpu_us_per_key": 1e6 * cpu / len(keys),
                "wall_us_per_key": 1e6 * wall / len(keys),
            }
        )
    print(table(rows, list(rows[0])))
    print(f"wrote {save('claims', {'settings': vars(args), 'runs': rows})}")


if __name__ == "__main__":
    main()
