"""The pairwise verdict reader against the pairwise section of the corpus.

tests/corpus/pair_verdicts.jsonl (built by tests/corpus/pair_build.py) holds verdicts in every
style judges write a comparison, each labelled, before any parser read it, with the verdict
the builder wrote into it ("A", "B", "tie") or none. The reader must agree with every label,
never give a verdict where the label has none (an unreadable answer is invalid, not a tie),
and never read a thinking model's reasoning as its verdict.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from corpus.pair_build import OUT, build
from hypothesis import given
from hypothesis import strategies as st

from geval_async.scoring.reading.pair_verdicts import (
    PairVerdict,
    pair_verdict_from_logprobs,
    read_pair_choice,
    read_pair_verdict,
)

STYLES = {"mt_bench", "arena_hard", "alpaca_eval", "bare", "labelled", "sentence", "thinking"}
STYLES |= {"no_verdict", "cut_off"}


def _rows() -> list[dict]:
    return [json.loads(line) for line in Path(OUT).read_text(encoding="utf-8").splitlines()]


def _read(row: dict) -> PairVerdict:
    message = {"role": "assistant", "content": row["text"]}
    if row.get("reasoning"):
        message["reasoning_content"] = row["reasoning"]
    return read_pair_verdict({"message": message, "finish_reason": row.get("finish_reason")})


def test_the_corpus_file_is_what_the_builder_writes() -> None:
    assert _rows() == build()


def test_the_corpus_covers_every_style_and_answers_without_a_verdict() -> None:
    rows = _rows()
    styles = Counter(r["style"] for r in rows)
    assert set(styles) == STYLES
    assert len(rows) >= 300
    assert Counter(r["label"] for r in rows)["tie"] >= 30
    assert sum(r["label"] is None for r in rows) >= 25


def test_the_reader_agrees_with_every_label() -> None:
    misread = [(r["text"][-60:], r["label"], _read(r).choice) for r in _rows()
               if _read(r).choice != r["label"]]  # fmt: skip
    assert misread == []


def test_an_unreadable_verdict_is_invalid_never_a_tie() -> None:
    unlabelled = [r for r in _rows() if r["label"] is None]
    readings = [_read(r) for r in unlabelled]
    assert all(not v.valid and v.reason is not None for v in readings)
    assert {str(v.reason) for v in readings} >= {"no_rating", "refused", "ambiguous", "cut_off"}


def test_a_thinking_models_reasoning_is_never_its_verdict() -> None:
    thinking = [r for r in _rows() if r["style"] == "thinking"]
    assert sum(r.get("reasoning") is not None for r in thinking) >= 5
    # Every reasoning leans to the other text ("At first I'd pick [[B]]") before the verdict.
    assert [r["text"] for r in thinking if _read(r).choice != r["label"]] == []


def _logprob_choice(tokens: list[tuple[str, dict[str, float]]]) -> dict:
    import math

    content = [
        {
            "token": token,
            "logprob": math.log(alternatives.get(token, 1.0)),
            "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in alternatives.items()],
        }
        for token, alternatives in tokens
    ]
    text = "".join(token for token, _ in tokens)
    return {"message": {"content": text}, "logprobs": {"content": content}}


def test_logprobs_give_the_probability_of_a_against_b() -> None:
    choice = _logprob_choice([("[[", {}), ("A", {"A": 0.6, "B": 0.3, "C": 0.1}), ("]]", {})])
    verdict = pair_verdict_from_logprobs(choice)
    assert verdict.choice == "A"
    assert abs(verdict.first_share - (0.6 + 0.05) / 1.0) < 1e-12
    spaced = _logprob_choice([(" B", {" B": 0.7, " A": 0.2})])
    assert pair_verdict_from_logprobs(spaced).choice == "B"
    assert abs(pair_verdict_from_logprobs(spaced).first_share - 0.2 / 0.9) < 1e-12
    # Reasoning first: its letters are not the verdict.
    reasoned = _logprob_choice(
        [
            ("<think>", {}),
            ("B", {"B": 0.99}),
            ("</think>", {}),
            ("\n\n", {}),
            ("A", {"A": 0.8, "B": 0.2}),
        ]
    )
    assert pair_verdict_from_logprobs(reasoned).choice == "A"


# --- properties ----------------------------------------------------------------------------------

# Prose with no letter a judge could mean as a side: no A, B or C in either case, no "tie".
_PROSE = st.text(alphabet=st.sampled_from("defghijklmnopqrsuvwxyz .,;:!?'\n0123456789"))
_MARKS = {"[[A]]": "A", "[[B]]": "B", "[[C]]": "tie", "[[A>>B]]": "A", "[[B>A]]": "B",
          "[[A=B]]": "tie", "Output (b)": "B"}  # fmt: skip


@given(_PROSE)
def test_prose_without_a_side_is_never_a_verdict(text: str) -> None:
    assert read_pair_choice(text).choice is None


@given(_PROSE, st.sampled_from(sorted(_MARKS)))
def test_a_mark_after_any_reasoning_is_the_verdict(reasoning: str, mark: str) -> None:
    assert read_pair_choice(f"{reasoning}\n\n{mark}").choice == _MARKS[mark]
