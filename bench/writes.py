"""What storing an answer costs: ``JudgeCache.put_many`` of 8,000 entries in groups of 1, 6 and 25.

The write half of the client's hot path (benchmark 2), on its own: real cache folders, entries
with a 2.5 kB body like the stub's answers, CPU and wall microseconds per entry for each group
size (the writer commits whatever answers arrived together as one group).

    .venv/bin/python bench/writes.py [--quick] [--entries 8000]
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

from geval_async.judging.cache import CachedResponse, JudgeCache
from geval_async.options import EntryStatus

CHOICE = '{"index":%d,"message":{"role":"assistant","content":"Rating: 4"},"finish_reason":"stop"}'
BODY = '{"choices":[' + ",".join(CHOICE % i for i in range(10)) + "]}" + " " * 1500


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
    args = parser.parse_args()
    if args.quick:
        args.entries = 1_000
    entries = _entries(args.entries)
    rows = []
    for group in (1, 6, 25):
        with tempfile.TemporaryDirectory() as folder, JudgeCache(Path(folder)) as cache:
            cpu, wall = _cpu(), time.perf_counter()
            for start in range(0, len(entries), group):
                cache.put_many([(e, False) for e in entries[start : start + group]])
            wall, cpu = time.perf_counter() - wall, _cpu() - cpu
        rows.append(
            {
                "group": group,
                "entries": len(entries),
                "body_bytes": len(BODY),
                "cpu_us_per_entry": 1e6 * cpu / len(entries),
                "wall_us_per_entry": 1e6 * wall / len(entries),
            }
        )
    print(table(rows, list(rows[0])))
    print(f"wrote {save('writes', {'settings': vars(args), 'runs': rows})}")


if __name__ == "__main__":
    main()
