"""What claiming costs: ``Claims.settle`` of 8,000 keys in groups of 1, 6 and 25.

The other half of the store's hot path (benchmark 2): before a request is sent its key is
claimed, and once its answer is stored the claim is let go, in one transaction per group
(``settle``: let go of the last group, claim the next). Real claims folders; CPU and wall
microseconds per key for each group size.

    .venv/bin/python bench/claims.py [--quick] [--keys 8000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cost_by_group, save, table

from geval_async.judging.store.claims import Claims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=8_000)
    parser.add_argument("--quick", action="store_true", help="1,000 keys")
    args = parser.parse_args()
    if args.quick:
        args.keys = 1_000
    keys = [f"g2-{i:064d}" for i in range(args.keys)]

    def settle_all(claims: Claims, group: int) -> None:
        held: list[str] = []
        for start in range(0, len(keys), group):
            chunk = keys[start : start + group]
            assert all(claims.settle(held, chunk))
            held = chunk
        claims.release_many(held)

    def none_held(claims: Claims) -> None:
        assert len(claims) == 0

    rows = cost_by_group(
        (1, 6, 25),
        len(keys),
        "key",
        lambda folder: Claims(folder, 60.0),
        settle_all,
        check=none_held,
    )
    print(table(rows, list(rows[0])))
    print(f"wrote {save('claims', {'settings': vars(args), 'runs': rows})}")


if __name__ == "__main__":
    main()
