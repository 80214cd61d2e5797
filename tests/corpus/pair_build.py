"""Build tests/corpus/pair_verdicts.jsonl: pairwise verdicts written for this project, labelled.

The pairwise section of the corpus. Every answer is assembled here from sentences written for
geval-async, and its label is the verdict the builder put into it, set before any parser reads
the text: "A" (the text shown first is better), "B", "tie", or null when the answer gives no
verdict (a refusal, an answer cut off, one that weighs both texts and never decides, one
that only echoes the format, a letter used as an article). The styles imitate how judges
write a pairwise verdict: MT-Bench's [[A]] / [[B]] / [[C]] after reasoning, Arena-Hard's five
levels ([[A>>B]] ... [[B>>A]]), AlpacaEval's "Output (a)", a bare letter, a labelled verdict
("Verdict: B"), a sentence ("Text A is better"), and thinking models whose reasoning (tags or
a field of its own) leans the other way before the verdict.

Each line: ``text``, ``label``, ``style`` and optionally ``finish_reason`` and ``reasoning``.
The combinations are drawn with a fixed seed, so the file is the same on every run:

    python -m tests.corpus.pair_build
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "pair_verdicts.jsonl"

REASONS = [
    "Both questionnaires cover the seven facets, but the first names the user's own app.",
    "The second summary keeps the key figure and drops the invented quote.",
    "Text A repeats two questions under Usable; text B files every question correctly.",
    "The first response is shorter, yet it answers the question the user asked.",
    "Summary B adds a date that the article never gives, which is a factual error.",
    "Questionnaire A asks about screen-reader use, which suits a blind user.",
    "Neither text is perfect: A is generic and B misstates the user's device.",
    "Output B is fluent, though it leaves out the reaction of the officials.",
    "The first summary confuses the two seasons; the second gets both right.",
    "Assistant A follows the instructions closely and is well organised.",
]
SIDES = ("A", "B", "tie")
NOUNS = ("Text", "Summary", "Questionnaire", "Assistant", "Response", "Output")


def _reasoning(rng: random.Random, count: int) -> str:
    return " ".join(rng.sample(REASONS, count))


def _mt_bench(rng: random.Random) -> list[dict]:
    rows = []
    for _ in range(60):
        side = rng.choice(SIDES)
        mark = {"A": "[[A]]", "B": "[[B]]", "tie": "[[C]]"}[side]
        closing = rng.choice(["{m}", "Final verdict: {m}", "My verdict is {m}.", "{m}\n"])
        text = _reasoning(rng, rng.randint(1, 3)) + "\n\n" + closing.format(m=mark)
        rows.append({"text": text, "label": side, "style": "mt_bench"})
    return rows


def _arena_hard(rng: random.Random) -> list[dict]:
    levels = {
        "[[A>>B]]": ("A", "Assistant A is significantly better"),
        "[[A>B]]": ("A", "Assistant A is slightly better"),
        "[[A=B]]": ("tie", "Tie, relatively the same"),
        "[[B>A]]": ("B", "Assistant B is slightly better"),
        "[[B>>A]]": ("B", "Assistant B is significantly better"),
    }
    rows = []
    for _ in range(60):
        mark = rng.choice(list(levels))
        side, words = levels[mark]
        text = (
            _reasoning(rng, rng.randint(1, 3))
            + f"\n\nMy final verdict is {words.lower() if rng.random() < 0.5 else words}: {mark}"
        )
        rows.append({"text": text, "label": side, "style": "arena_hard"})
    return rows


def _alpaca(rng: random.Random) -> list[dict]:
    rows = []
    for _ in range(30):
        side = rng.choice(("A", "B"))
        letter = side.lower()
        text = rng.choice(["Output ({x})", "Output ({x})\n", "Output ({x}) is better."])
        rows.append({"text": text.format(x=letter), "label": side, "style": "alpaca_eval"})
    return rows


def _bare(rng: random.Random) -> list[dict]:
    forms = {
        "A": ["A", "A.", " A", "**A**", "(A)", "Text A", "A\n"],
        "B": ["B", "B.", " B", "**B**", "(B)", "Summary B", "B\n"],
        "tie": ["tie", "Tie", "Tie.", "tie\n", "It's a tie."],
    }
    rows = []
    for _ in range(40):
        side = rng.choice(SIDES)
        rows.append({"text": rng.choice(forms[side]), "label": side, "style": "bare"})
    return rows


def _labelled(rng: random.Random) -> list[dict]:
    labels = ["Verdict: {s}", "Winner: {s}", "Answer: {s}", "Final verdict: {s}", "Better: {s}"]
    rows = []
    for _ in range(40):
        side = rng.choice(SIDES)
        written = side if side != "tie" else rng.choice(["tie", "Tie"])
        if side != "tie" and rng.random() < 0.4:
            written = f"{rng.choice(NOUNS)} {side}"
        head = _reasoning(rng, 1) + "\n" if rng.random() < 0.5 else ""
        text = head + rng.choice(labels).format(s=written)
        rows.append({"text": text, "label": side, "style": "labelled"})
    return rows


def _sentence(rng: random.Random) -> list[dict]:
    forms = ["{n} {s} is better.", "{n} {s} is clearly better.", "Overall, {n} {s} is better."]
    rows = []
    for _ in range(30):
        side = rng.choice(("A", "B"))
        text = (
            _reasoning(rng, rng.randint(0, 2))
            + " "
            + rng.choice(forms).format(n=rng.choice(NOUNS), s=side)
        )
        rows.append({"text": text.strip(), "label": side, "style": "sentence"})
    return rows


def _thinking(rng: random.Random) -> list[dict]:
    rows = []
    for number in range(40):
        side = rng.choice(("A", "B"))
        other = "B" if side == "A" else "A"
        thought = (
            f"At first I'd pick [[{other}]]. {_reasoning(rng, 1)} Maybe {other} is better... "
            "no, let me weigh them again."
        )
        verdict = rng.choice(["[[{s}]]", "Verdict: {s}", "{s}"]).format(s=side)
        if number % 4 == 0:  # the reasoning in a field of its own
            rows.append({"text": verdict, "label": side, "style": "thinking", "reasoning": thought})
        else:
            tag = rng.choice(["think", "thinking"])
            text = f"<{tag}>\n{thought}\n</{tag}>\n\n{verdict}"
            rows.append({"text": text, "label": side, "style": "thinking"})
    return rows


def _no_verdict(rng: random.Random) -> list[dict]:
    texts = [
        "I cannot compare these two texts.",
        "I'm sorry, but I can't decide between them.",
        "Both texts have strengths and weaknesses, and each suits a different reader.",
        "A good questionnaire would ask about the user's own devices.",
        "A clear winner is hard to pick here.",
        'Output "[[A]]" if A is better, "[[B]]" if B is better, and "[[C]]" for a tie.',
        "It is either A or B, depending on what the reader values.",
        "Text A is better on fluency, while text B is better on coverage.",
        "",
        "The comparison depends on the criterion, which is not stated.",
    ]
    rows = [{"text": text, "label": None, "style": "no_verdict"} for text in texts]
    for _ in range(10):
        text = "Let me compare the two texts. " + _reasoning(rng, 2)
        rows.append({"text": text, "label": None, "style": "cut_off", "finish_reason": "length"})
    for _ in range(5):  # reasoning that never ended: its verdicts are not the answer
        text = f"<think>\n{_reasoning(rng, 1)} So [[A]] for now, but let me check"
        rows.append({"text": text, "label": None, "style": "cut_off", "finish_reason": "length"})
    return rows


BUILDERS = (
    _mt_bench,
    _arena_hard,
    _alpaca,
    _bare,
    _labelled,
    _sentence,
    _thinking,
    _no_verdict,
)


def build() -> list[dict]:
    rng = random.Random(20261204)
    rows: list[dict] = []
    for builder in BUILDERS:
        rows += builder(rng)
    return rows


def main() -> None:
    rows = build()
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    print(f"wrote {len(rows)} verdicts to {OUT}")


if __name__ == "__main__":
    main()
