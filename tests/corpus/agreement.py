"""Agreement of the default rating parser with the corpus labels, by style.

    python -m tests.corpus.agreement            # print the table and any disagreement
    python -m tests.corpus.agreement --write    # also rewrite docs/parser-agreement.md

An answer *agrees* when the parser's rating equals the label, or when both say there is no
rating. A *false rating* is a rating where the label has none: the corpus test allows none.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from geval_async.scoring.reading.ratings import RatingParser, Reading
from geval_async.study.scale import Scale

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "judge_answers.jsonl"
DOC = HERE.parent.parent / "docs" / "parser-agreement.md"


@dataclass(frozen=True)
class Outcome:
    row: dict
    reading: Reading

    @property
    def agrees(self) -> bool:
        label = self.row["label"]
        if label is None:
            return self.reading.rating is None
        return self.reading.rating is not None and abs(self.reading.rating - label) < 1e-9

    @property
    def false_rating(self) -> bool:
        return self.row["label"] is None and self.reading.rating is not None


def load_corpus(path: Path = CORPUS) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_row(row: dict) -> Reading:
    lo, hi = row["scale"]
    names = (row["criterion"],) if row.get("criterion") else ()
    parser = RatingParser(Scale.integer(lo, hi), options=row.get("options"), names=names)
    return parser.read(row["text"], row.get("finish_reason"), row.get("reasoning"))


def evaluate(rows: list[dict]) -> list[Outcome]:
    return [Outcome(row, read_row(row)) for row in rows]


def table(outcomes: list[Outcome]) -> str:
    styles: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        styles.setdefault(outcome.row["style"], []).append(outcome)
    lines = [
        "| style | answers | with a rating | agree | agreement | false ratings |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for style, group in [*styles.items(), ("**all**", outcomes)]:
        agree = sum(o.agrees for o in group)
        rated = sum(o.row["label"] is not None for o in group)
        false = sum(o.false_rating for o in group)
        lines.append(
            f"| {style} | {len(group)} | {rated} | {agree} | {agree / len(group):.1%} | {false} |"
        )
    return "\n".join(lines)


def reasons(outcomes: list[Outcome]) -> str:
    counts = Counter(str(o.reading.reason) for o in outcomes if o.reading.rating is None)
    return ", ".join(f"{reason} {n}" for reason, n in counts.most_common())


def document(outcomes: list[Outcome]) -> str:
    return (
        "# Rating parser: agreement with a corpus of judge answers\n\n"
        f"The corpus (`tests/corpus/judge_answers.jsonl`, {len(outcomes)} answers) was written "
        "for this project by `tests/corpus/build.py`, in the styles judges write: reason then "
        'verdict, terse, word numbers, Llama-style "a 3 out of 5 in terms of coherence", '
        "markdown, MT-Bench `[[8]]`, Prometheus `[RESULT] 4`, stars, letters and labelled "
        "options, half points, counterfactual mentions, breakdown lists, quoted content full of "
        "numbers, refusals, cut-off answers, thinking models' reasoning, concluding verdicts "
        "and list numbers. Each answer carries the rating a careful reader "
        "takes from it, or none.\n\n"
        'An answer agrees when the default parser (`parser = "lenient"`, `fractional = '
        '"keep"`) returns the label, or no rating where the label has none. A false rating is '
        "a rating where the label has none.\n\n"
        f"{table(outcomes)}\n\n"
        f"Reasons given for the answers without a rating: {reasons(outcomes)}.\n\n"
        "Read this as a regression test, not as accuracy on judges the corpus has not seen: "
        "the parser's rules were refined on these answers. The hand-written batches "
        "(`handwritten`, `chat_models`) were each written before the parser first read them, "
        'and each showed misreadings that led to a rule (hedges such as "3? Maybe 4.", '
        'conditionals, "a 2 would be too harsh"); a new judge\'s house style may show more. '
        "`geval-async answers CONFIG` lists what a study's judge wrote that gave no rating.\n\n"
        "Three sections were written for the judges people use now, each with its labels "
        "before the parser first read it: `thinking` (reasoning models: `<think>…</think>`, "
        "`<thinking>`, a lone `</think>` whose opening tag was in the prompt, reasoning that "
        "never ends, reasoning in the message's `reasoning_content` field, and numbers inside "
        "the reasoning that disagree with the final rating), `concluding` (verdicts in running "
        'prose: "Therefore, I would score this summary 5/5 for coherence.", aspects rated one '
        "by one and then concluded, a conclusion on another scale) and `list_numbers` "
        '("1. Accuracy: 4/5", "1, 2, 3, 4, 5", "1 2"). At that first reading `thinking` '
        "agreed on 52 of 52, `concluding` on 12 of 16 and `list_numbers` on 5 of 14 (5 false "
        "ratings, each a list number read as the rating); the rules for concluding sentences, "
        "numbers in a row and rated list items came from those misreadings.\n\n"
        "A fourth, `verdict_after_reasoning`, holds gradings in the MT-Bench form, labelled "
        "before the parser first read them: a paragraph or more of reasoning about an "
        "assistant's answer, with figures, labelled aspects, quoted code full of numbers and "
        'brackets, and lists, then the verdict as `Rating: [[N]]`, quoted (`"Rating: [[9]]".`), '
        "in bold, with a full stop, on 1-10 and 1-5 scales; and answers whose end holds no "
        "rating (code ending in `[1]`, the template's `[[rating]]`, a mark off the scale). At "
        "that first reading it agreed on 67 of 95: 23 marked answers read as invalid, 4 read "
        "as another rating and `[[rating]]` read as 1. The rules that an explicit mark closing "
        "the answer outranks every number before it, that a mark inside quotes is never cited "
        "content, that fenced code is quoted content, and that the graded task's and answer's "
        'figures ("the reference answer is 3", "the assistant answers 1") and shares ("2 of '
        'its 3 sentences") are never the rating came from those misreadings.\n\n'
        "Regenerate with `python -m tests.corpus.agreement --write`; `tests/test_corpus.py` "
        "holds the parser to at least 99% agreement and no false rating, the `thinking` "
        "section to 100%, and `verdict_after_reasoning` to at most 0.5% of its marked answers "
        "read as invalid and none read as a rating other than its mark.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {DOC.name}")
    args = parser.parse_args()
    outcomes = evaluate(load_corpus())
    print(table(outcomes))
    for o in outcomes:
        if not o.agrees:
            print(
                f"\n[{o.row['style']}] label {o.row['label']}, read {o.reading}:\n{o.row['text']}"
            )
    if args.write:
        DOC.write_text(document(outcomes), encoding="utf-8")
        print(f"\nwrote {DOC}")


if __name__ == "__main__":
    main()
