"""Write compare.jsonl: two SummEval systems' summaries of the same 100 articles.

compare.toml compares an abstractive system with an extractive one on the same articles (a
paired design: each article is summarised by both). The SummEval data lives beside the
repository and must not be copied into it, so this script writes the two systems' records to a
git-ignored file next to it. Run it once before judging compare.toml:

    python examples/summeval/make_compare.py                      # M23 vs M0
    python examples/summeval/make_compare.py --systems M22 M0     # another pair

If you change the pair, change [stats] conditions in compare.toml to match.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "../../../shared/data/summeval/summeval.jsonl"
KEEP = ("index", "doc_id", "system_id", "system_type", "source", "system_output", "scores")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", nargs=2, default=["M23", "M0"], metavar="SYSTEM",
                        help="the two system ids (default: M23 M0)")
    parser.add_argument("--source", type=Path, default=SOURCE, help="summeval.jsonl")
    parser.add_argument("--output", type=Path, default=HERE / "compare.jsonl")
    args = parser.parse_args()
    if not args.source.is_file():
        raise SystemExit(f"{args.source}: SummEval not found (see ../shared/data/summeval)")
    wanted = set(args.systems)
    rows = []
    with args.source.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record["system_id"] in wanted:
                rows.append({key: record[key] for key in KEEP})
    found = {row["system_id"] for row in rows}
    if found != wanted:
        raise SystemExit(f"no summaries of {', '.join(sorted(wanted - found))} in {args.source}")
    # Article by article, the two systems in the order given: --limit 2k keeps k whole articles.
    systems = {system: i for i, system in enumerate(args.systems)}
    articles: dict[str, int] = {}
    for row in rows:
        articles.setdefault(row["doc_id"], len(articles))
    rows.sort(key=lambda row: (articles[row["doc_id"]], systems[row["system_id"]]))
    args.output.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    print(f"wrote {len(rows)} summaries ({' vs '.join(args.systems)}) to {args.output}")


if __name__ == "__main__":
    main()
