"""The default rating parser against the corpus of judge answers written for this project.

tests/corpus/judge_answers.jsonl (built by tests/corpus/build.py) holds answers in every style
judges write, each labelled with the rating a careful reader takes from it, or none. The parser
must agree with the labels on at least 99% of them, and never give a rating where the label
has none: a false rating biases a study silently, a missing one is at least counted.
"""

from __future__ import annotations

from collections import Counter

from corpus.agreement import DOC, document, evaluate, load_corpus
from corpus.build import build

STYLES = {
    "reason_then_verdict", "terse", "word_numbers", "llama_out_of", "markdown_bold",
    "mt_bench_brackets", "prometheus_result", "stars", "letters", "half_points",
    "counterfactual", "breakdown", "quoted_numbers", "refusal", "cut_off", "handwritten",
    "thinking", "concluding", "list_numbers", "verdict_after_reasoning",
}  # fmt: skip


def test_the_corpus_file_is_what_the_builder_writes() -> None:
    assert load_corpus() == build()


def test_the_corpus_covers_every_style_with_at_least_400_answers() -> None:
    rows = load_corpus()
    assert len(rows) >= 400
    styles = Counter(r["style"] for r in rows)
    assert set(styles) >= STYLES
    assert sum(r["label"] is None for r in rows) >= 30  # answers with no rating are tested too


def test_the_parser_agrees_with_the_labels_and_never_invents_a_rating() -> None:
    outcomes = evaluate(load_corpus())
    false_ratings = [o.row["text"] for o in outcomes if o.false_rating]
    assert false_ratings == []
    disagreements = [(o.row["text"], o.row["label"], o.reading) for o in outcomes if not o.agrees]
    assert len(disagreements) <= 0.01 * len(outcomes), disagreements


def test_a_thinking_models_reasoning_is_never_read_as_its_rating() -> None:
    thinking = [o for o in evaluate(load_corpus()) if o.row["style"] == "thinking"]
    assert len(thinking) >= 50
    assert sum(r.row.get("reasoning") is not None for r in thinking) >= 5  # the field, too
    assert [(o.row["text"], o.row["label"], o.reading) for o in thinking if not o.agrees] == []


def test_an_explicit_verdict_mark_after_long_reasoning_is_the_rating() -> None:
    section = [o for o in evaluate(load_corpus()) if o.row["style"] == "verdict_after_reasoning"]
    marked = [o for o in section if o.row["label"] is not None]
    assert len(marked) >= 60
    assert {tuple(o.row["scale"]) for o in marked} == {(1, 5), (1, 10)}
    invalid = [o.row["text"][-80:] for o in marked if o.reading.rating is None]
    assert len(invalid) <= 0.005 * len(marked), invalid
    misread = [
        (o.row["text"][-80:], o.row["label"], o.reading.rating)
        for o in marked
        if o.reading.valid and not o.agrees
    ]
    assert misread == []  # never a rating other than the judge's explicit mark
    unmarked = [o for o in section if o.row["label"] is None]
    assert len(unmarked) >= 10
    assert [o.row["text"][-80:] for o in unmarked if o.reading.valid] == []


def test_the_agreement_table_in_docs_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == document(evaluate(load_corpus()))
