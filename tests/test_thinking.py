"""A thinking model's reasoning is never read as its rating (scoring.thinking and the parser).

Reasoning comes in a field of its own (``reasoning_content``, ``reasoning``) or at the start of
the content (``<think>…</think>``, ``<thinking>…</thinking>``, or up to a lone ``</think>``).
The rating is read from what follows it; an answer that ends inside its reasoning is cut off.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geval_async.options import Reason
from geval_async.scoring.reading.ratings import (
    RatingParser,
    Scale,
    distribution_from_logprobs,
    first_token_top_logprobs,
)
from geval_async.scoring.reading.thinking import (
    REASONING_CUT_OFF,
    message_reasoning,
    split_reasoning,
)

LIKERT = Scale.integer(1, 5)


def _parser() -> RatingParser:
    return RatingParser(LIKERT, names=("Coherence",))


# --- the split ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reasoning", "answer"),
    [
        ("<think>\nIt's a 1 out of 5? No.\n</think>\n4", "It's a 1 out of 5? No.", "\n4"),
        ("  \n<thinking>Score: 2</thinking>Score: 3", "Score: 2", "Score: 3"),
        ("Maybe 4.\n</think>\n\n5", "Maybe 4.", "\n\n5"),  # the opening tag was in the prompt
        ("<THINK>a 2</THINK> 4", "a 2", " 4"),
        ("<thinking>a 2\n</think>4", "a 2", "4"),  # tags that do not pair still end it
        ("<think></think>\n3", "", "\n3"),
        ("Score: 4", "", "Score: 4"),
    ],
)
def test_the_reasoning_is_split_from_the_answer(content: str, reasoning: str, answer: str) -> None:
    split = split_reasoning(content)
    assert (split.reasoning, split.answer, split.unfinished) == (reasoning, answer, False)
    assert content[split.answer_start :] == answer


def test_an_opening_tag_without_its_closing_one_is_reasoning_that_never_ended() -> None:
    split = split_reasoning("<think>\nI would give it a 5, but the second")
    assert split.unfinished and split.answer == ""
    assert split.reasoning == "I would give it a 5, but the second"


def test_the_reasoning_field_is_kept_with_the_tags_reasoning() -> None:
    split = split_reasoning("<think>then 4</think>4", "first a 2")
    assert split.reasoning == "first a 2\nthen 4" and split.answer == "4"
    assert message_reasoning({"content": "4", "reasoning_content": "a 2?"}) == "a 2?"
    assert message_reasoning({"content": "4", "reasoning": "a 3?"}) == "a 3?"
    assert message_reasoning({"content": "4", "reasoning": ""}) is None
    assert message_reasoning(None) is None


# --- the parser reads what follows the reasoning -----------------------------------------


@pytest.mark.parametrize(
    ("text", "rating"),
    [
        # Two answers of a thinking judge: each must read as its verdict, not as 1 or ambiguous.
        ("<think>\nLet me evaluate... It's a 1 out of 5 for grammar? No.\n</think>\n4", 4),
        ("<think>...maybe 4.\n</think>\n\n5", 5),
        ("<thinking>Rating: 5? Too generous.</thinking>\nRating: 3", 3),
        ("Score: 1 is too harsh.\n</think>\n\nCoherence: 2", 2),
    ],
)
def test_the_rating_is_read_after_the_reasoning(text: str, rating: float) -> None:
    assert _parser().read(text).rating == rating


def test_a_rating_inside_the_reasoning_alone_is_no_rating() -> None:
    assert _parser().read("<think>Final score: 5</think>").reason == Reason.REFUSED


def test_an_answer_cut_off_inside_its_reasoning_is_cut_off_and_says_so() -> None:
    parser = _parser()
    tagged = parser.read("<think>\nI think it deserves a 4, but the article says 3", "length")
    assert (tagged.rating, tagged.reason, tagged.detail) == (None, "cut_off", REASONING_CUT_OFF)
    # Even when the server says it stopped: the reasoning never ended, so no answer came.
    assert parser.read("<think>I would give it a 5.", "stop").reason == Reason.CUT_OFF
    # Reasoning in its own field and empty content, cut by max_tokens.
    field = parser.read("", "length", reasoning="Coherence: 3 or 4? Let me re-read")
    assert (field.reason, field.detail) == (Reason.CUT_OFF, REASONING_CUT_OFF)
    # Cut off without any reasoning: cut_off, no detail.
    assert parser.read("The summary", "length").detail is None


def test_the_reasoning_field_is_never_read() -> None:
    parser = _parser()
    reading = parser.read("4", "stop", reasoning="The summary scores 2? Final score: 5?")
    assert reading.rating == 4
    assert parser.read("", "stop", reasoning="Score: 5").reason == Reason.REFUSED


reasoning_text = st.lists(
    st.one_of(
        st.integers(0, 10).map(str),
        st.sampled_from(
            [
                "Score:",
                "Final score:",
                "Rating:",
                "[[3]]",
                "out of 5",
                "/5",
                "a",
                "maybe",
                "\n",
                "Coherence:",
                "I'd give it",
                "5/5",
                "1.",
                "2)",
                "?",
                "no.",
                "<think>",
                "<thinking>",
            ]
        ),  # fmt: skip
    ),
    max_size=40,
).map(" ".join)


@given(
    reasoning=reasoning_text,
    rating=st.integers(1, 5),
    form=st.sampled_from(["{r}", "Score: {r}", "{r}/5", "Rating: {r}\n\nIt's short.", "**{r}**"]),
    carrier=st.sampled_from(
        ["<think>{t}</think>\n", "  <thinking>\n{t}\n</thinking>\n\n", "{t}\n</think>\n", "field"]
    ),  # fmt: skip
)
def test_the_rating_after_any_reasoning_is_the_rating_after_it(
    reasoning: str, rating: int, form: str, carrier: str
) -> None:
    answer = form.format(r=rating)
    parser = _parser()
    if carrier == "field":
        reading = parser.read(answer, "stop", reasoning=reasoning)
    else:
        if "</think" in reasoning or "</thinking" in reasoning:
            return  # not generated: the strategy writes no closing tag
        reading = parser.read(carrier.format(t=reasoning) + answer, "stop")
    assert reading.rating == rating


# --- logprobs mode: the rating token comes after the reasoning ---------------------------


def _token(token: str, top: list[tuple[str, float]] | None = None) -> dict:
    alternatives = [{"token": t, "logprob": math.log(p)} for t, p in (top or [(token, 1.0)])]
    return {"token": token, "logprob": alternatives[0]["logprob"], "top_logprobs": alternatives}


def test_in_logprobs_mode_the_rating_token_is_looked_for_after_the_reasoning() -> None:
    rating = [("4", 0.7), ("3", 0.3)]
    tokens = [_token(t) for t in ("<think>", "\n", "maybe", " 2", "?", "\n", "</", "think", ">")]
    choice = {"logprobs": {"content": [*tokens, _token("\n\n"), _token("4", rating)]}}
    top = first_token_top_logprobs(choice)
    assert distribution_from_logprobs(top or [], LIKERT).weighted_score == pytest.approx(3.7)
    # A lone </think> (the opening tag was in the prompt), then the rating.
    lone = [_token(t) for t in ("a", " 1", "?", "</think>")]
    choice = {"logprobs": {"content": [*lone, _token("4", rating)]}}
    assert first_token_top_logprobs(choice) == [
        {"token": t, "logprob": math.log(p)} for t, p in rating
    ]


def test_in_logprobs_mode_reasoning_that_never_ended_gives_no_rating_token() -> None:
    tokens = [_token(t) for t in ("<think>", "It", " is", " a", " 4")]
    assert first_token_top_logprobs({"logprobs": {"content": tokens}}) is None


def test_a_rubric_answer_is_read_after_the_reasoning_too() -> None:
    from geval_async.scoring.scores.scores import _YesNo

    rubric = _YesNo()
    assert rubric.read("<think>No... wait, it does.</think>\nYes").rating == 1.0
    assert rubric.read("Yes, it might. No.\n</think>\nNo").rating == 0.0
    assert rubric.read("<think>Yes", "length").detail == REASONING_CUT_OFF
