"""What storing an answer costs: ``JudgeCache.put_many`` of 8,000 entries in groups of 1, 6 and 25.

The write half of the client's hot path (benchmark 2), on its own: real cache folders, entries
with a 2.5 kB body like the stub's answers (stored deflated, as every answer
whose body deflates smaller), CPU and wall microseconds per entry for each group size (the
writer commits whatever answers arrived together as one group).

    .venv/bin/python bench/writes.py [--quick] [--entries 8000] [--groups 1,6,25]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cost_by_group, save, table

from geval_async.judging.store.cache import CachedResponse, JudgeCache
from geval_async.options import EntryStatus

CHOICE = '{"index":%d,"message":{"role":"assistant","content":"Rating: 4"},"finish_reason":"stop"}'
BODY = '{"choices":[' + ",".join(CHOICE % i for i in range(10)) + "]}" + " " * 1500


def _entries(count: int) -> list[CachedResponse]:
    return [
        CachedResponse(
            key=f"g2-{i:064d}",
            status=EntryStatus.OK,
            http_status=200,
            body=BODY,
            time=0.0,
            latency_ms=1.0,
            attempts=1,
            n=10,
            draw=0,
            model="judge",
            record_id=str(i),
            criterion="coh",
            received=10,
        )
        for i in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=8_000)
    parser.add_argument("--quick", action="store_true", help="1,000 entries")
    parser.add_argument("--groups", default="1,6,25", help="group sizes, e.g. 6,25,256")
    args = parser.parse_args()
    if args.quick:
        args.entries = 1_000
    entries = _entries(args.entries)

    def put_all(cache: JudgeCache, group: int) -> None:
        for start in range(0, len(entries), group):
            cache.put_many([(e, False) for e in entries[start : start + group]])

    rows = [
        {"group": row["group"], "entries": row["entries"], "body_bytes": len(BODY), **row}
        for row in cost_by_group(
            [int(g) for g in args.groups.split(",")],
            len(entries),
            "entry",
            JudgeCache,
            put_all,
            plural="entries",
        )
    ]
    print(table(rows, list(rows[0])))
    print(f"wrote {save('writes', {'settings': vars(args), 'runs': rows})}")


if __name__ == "__main__":
    main()
