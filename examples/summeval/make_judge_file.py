"""Write noisy_judge.csv: a stand-in for another judge's published scores of SummEval.

judge_files.toml meta-evaluates judge files alone (no [judge], no prompts). To try it without
someone else's outputs, this script writes a synthetic judge: each expert score plus Gaussian
noise (seeded, so the file is the same on every machine), in the shape published judge outputs
often have. Its correlations are only as good as the noise allows: they show the mechanics.

- rows keyed by the article and the system, in columns of its own (``document``, ``model``),
  in shuffled order, with no record index;
- scores in columns named ``coherence``, ``consistency``, ``fluency``, ``relevance``;
- the last five articles missing (not covered), and a few cells where the judge wrote text
  instead of a number (unparseable).

    python examples/summeval/make_judge_file.py
    geval-async meta examples/summeval/judge_files.toml
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "../../../shared/data/summeval/summeval.jsonl"
CRITERIA = ("coherence", "consistency", "fluency", "relevance")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=SOURCE, help="summeval.jsonl")
    parser.add_argument("--output", type=Path, default=HERE / "noisy_judge.csv")
    parser.add_argument("--noise", type=float, default=0.6, help="standard deviation")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not args.source.is_file():
        raise SystemExit(f"{args.source}: SummEval not found (see ../shared/data/summeval)")
    with args.source.open(encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    rng = random.Random(args.seed)
    articles = list(dict.fromkeys(r["doc_id"] for r in records))
    left_out = set(articles[-5:])
    rows = []
    for number, record in enumerate(records):
        if record["doc_id"] in left_out:
            continue
        row = {"document": record["doc_id"], "model": record["system_id"]}
        for criterion in CRITERIA:
            score = record["scores"][criterion] + rng.gauss(0, args.noise)
            row[criterion] = f"{score:.2f}"
        if number % 151 == 7:
            row["coherence"] = "The summary is coherent"  # text where a number belongs
        rows.append(row)
    rng.shuffle(rows)
    with args.output.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["document", "model", *CRITERIA])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows ({len(articles) - len(left_out)} articles) to {args.output}")


if __name__ == "__main__":
    main()
