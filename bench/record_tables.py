"""Records read from a table: the peak RSS of reading a study's records as JSONL, CSV, TSV and
Parquet, at two sizes, to show whether memory grows with the records' text.

A reader (a fresh process) opens the records as every command does (``load_records``: the
first pass, its checks and its index of ids, groups and conditions), then walks every record
and its text once, as the judge stage does. Each record is ``--chars`` characters of text; a
Parquet file is written in row groups of ``--row-group`` rows. Beside the peak RSS, a reader
that only imports reports its own (what reading adds is the difference) and, for Parquet,
pyarrow's own allocations at most (``pyarrow.default_memory_pool().max_memory()``).
``--baseline NAME=FOLDER`` reads with another tree's ``geval_async`` too, side by side.

    .venv/bin/python bench/record_tables.py [--quick] [--records 20000,80000] [--chars 5000]
        [--row-group 2000] [--baseline NAME=FOLDER]
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, ROOT, add_baseline, baseline_trees, run_child, save, table, workdir

FORMS = ("jsonl", "csv", "tsv", "parquet")

# The reader: imports first (its RSS then is the import's), then reads and walks the records.
READER = """
import json, resource, sys
from pathlib import Path
import pyarrow
import geval_async
from geval_async.study.records import load_records
imported = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if sys.argv[2] == "read":
    records = load_records(Path(sys.argv[1]), group_field="user", condition_field="condition",
                           required_fields=["text"])
    chars = sum(len(record.fields["text"]) for record in records)
else:
    chars = 0
print(json.dumps({"imported_mb": imported, "chars": chars, "package": geval_async.__file__,
                  "pyarrow_max_mb": pyarrow.default_memory_pool().max_memory() / 2**20}))
"""


def write_tables(folder: Path, records: int, chars: int, row_group: int) -> dict[str, Path]:
    """The same records as each form's file, in ``folder``."""
    import pandas as pd

    rng = random.Random(records)
    # Every text its own (no Parquet dictionary, little to compress), as answers to judge are.
    texts = [
        base64.b64encode(rng.randbytes(chars * 3 // 4)).decode()[:chars] for _ in range(records)
    ]
    frame = pd.DataFrame(
        {
            "id": [f"r{i}" for i in range(records)],
            "user": [f"u{i // 2}" for i in range(records)],
            "condition": ["AB"[i % 2] for i in range(records)],
            "text": texts,
        }
    )
    paths = {form: folder / f"records.{form}" for form in FORMS}
    frame.to_json(paths["jsonl"], orient="records", lines=True)
    frame.to_csv(paths["csv"], index=False)
    frame.to_csv(paths["tsv"], index=False, sep="\t")
    frame.to_parquet(paths["parquet"], row_group_size=row_group)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="20000,80000", help="sizes, comma-separated")
    parser.add_argument("--chars", type=int, default=5000, help="characters of text a record")
    parser.add_argument("--row-group", type=int, default=2000, help="Parquet rows a row group")
    parser.add_argument("--quick", action="store_true", help="2,000 and 8,000 records")
    add_baseline(parser, "read with that tree's geval_async too")
    args = parser.parse_args()
    sizes = [2000, 8000] if args.quick else [int(n) for n in args.records.split(",")]
    trees = {"this": str(ROOT), **baseline_trees(parser, args.baseline)}

    rows = []
    with workdir("record-tables") as folder:
        for records in sizes:
            paths = write_tables(folder, records, args.chars, args.row_group)
            for form, path in paths.items():
                for tree, source in trees.items():
                    # The tree's package, not the working folder's (-c puts it first).
                    env = {"PYTHONPATH": source, "PYTHONSAFEPATH": "1"}
                    only = run_child([PYTHON, "-c", READER, str(path), "import"], env=env)
                    read = run_child([PYTHON, "-c", READER, str(path), "read"], env=env)
                    assert read.returncode == 0, read.stderr
                    report = read.report()
                    assert report["chars"] == records * args.chars
                    assert report["package"].startswith(source), report["package"]
                    rows.append(
                        {
                            "records": records,
                            "text_mb": round(report["chars"] / 2**20, 1),
                            "form": form,
                            "tree": tree,
                            "file_mb": round(path.stat().st_size / 2**20, 1),
                            "peak_rss_mb": round(read.maxrss_mb, 1),
                            "import_rss_mb": round(only.maxrss_mb, 1),
                            "added_mb": round(read.maxrss_mb - only.maxrss_mb, 1),
                            "pyarrow_max_mb": round(report["pyarrow_max_mb"], 1),
                            "cpu_s": round(read.cpu - only.cpu, 2),
                        }
                    )
                    print(json.dumps(rows[-1]), flush=True)
    columns = list(rows[0])
    print(table(rows, columns))
    settings = {"chars": args.chars, "row_group": args.row_group, "trees": trees}
    print(save("record_tables", {"settings": settings, "rows": rows}))


if __name__ == "__main__":
    main()
