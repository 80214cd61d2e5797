"""Tests for scoring.ratings: parsing judge answers and building rating distributions."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geval_async.errors import ConfigError
from geval_async.options import Reason
from geval_async.scoring.reading.distributions import with_mass_floor
from geval_async.scoring.reading.ratings import (
    RatingParser,
    Scale,
    distribution_from_logprobs,
    distribution_from_samples,
    first_token_top_logprobs,
)
from geval_async.scoring.reading.rubrics import yes_no_from_logprobs

LIKERT = Scale.integer(1, 5)
HALVES = Scale((0, 0.5, 1))


# --- Scale ---------------------------------------------------------------------------------


def test_integer_scale_has_every_point_and_its_ends() -> None:
    assert LIKERT.points == (1.0, 2.0, 3.0, 4.0, 5.0)
    assert (LIKERT.lo, LIKERT.hi) == (1.0, 5.0)


def test_scale_points_are_sorted_and_deduplicated() -> None:
    assert Scale((1, 0.5, 0, 1)).points == (0.0, 0.5, 1.0)


@pytest.mark.parametrize("points", [(), (1, float("nan")), (1, float("inf")), ("a",)])
def test_bad_scale_is_a_config_error(points: tuple) -> None:
    with pytest.raises(ConfigError):
        Scale(points)


def test_integer_scale_with_ends_swapped_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        Scale.integer(5, 1)


# --- RatingParser configuration ------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "pattern"),
    [
        ("strict", None),  # unknown mode
        ("regex", None),  # regex mode needs a pattern
        ("regex", r"Score: \d"),  # no group
        ("regex", r"(\d)/(\d)"),  # two groups
        ("regex", r"(\d"),  # not a regex
        ("lenient", r"(\d)"),  # a pattern the mode would silently ignore
    ],
)
def test_bad_parser_configuration_is_a_config_error(mode: str, pattern: str | None) -> None:
    with pytest.raises(ConfigError):
        RatingParser(LIKERT, mode=mode, pattern=pattern)


# --- parsing, table-driven -----------------------------------------------------------------

LENIENT_CASES = [
    ("4", 4),
    (" 4", 4),
    ("4.", 4),
    ("4\n", 4),
    ("Score: 4", 4),
    ("4/5", 4),
    ("4 / 5", 4),
    ("Final score: 4.", 4),
    ("Rating: 4", 4),
    ("I would give it a 3.", 3),
    ("**4**", 4),
    ("**Score:** 3/5", 3),
    ("4.0", 4),
    ("3 out of 5", 3),
    ("I'd give it 3 out of 5", 3),
    ("1-5: 3", 3),
    ("On a scale of 1-5 I'd say 2", 2),
    ("On a scale of 1-5, I give 4", 4),
    ("On a scale from 1 to 5: 2", 2),
    ("Rating (1-5): 4", 4),
    ("Coherence: 4", 4),
    ("I would rate this summary a 4", 4),
    ("The final score is 2 out of 5.", 2),
    # A label that is not followed by its number does not capture a later, unrelated number.
    ("Score: 4. This rating reflects 2 issues", 4),
    # Of several final cues the last one wins; two different plain labels are ambiguous.
    ("Final score: 4\nFinal rating: 5", 5),
    ("Score: 4\nFinal score: 5", 5),
    ("Score: 4\nRating: 5", None),
    # Answer first: the opening number is the rating, later numbers are explanation.
    ("4\n\nThe summary misses 2 points.", 4),
    # Verdict last.
    ("It has 2 issues, so I give it a 3", 3),
    ("GPT-4 would say 3", 3),
    ("得分：4分", 4),
    # Invalid: out of scale (never clipped), no number, or ambiguous.
    ("10", None),
    ("0", None),
    ("6", None),
    ("Score: 10/10", None),
    ("Score: 4.5", 4.5),  # fractional = "keep" (the default), as G-Eval keeps it
    ("-4", None),
    ("N/A", None),
    ("", None),
    ("   ", None),
    ("The summary is coherent.", None),
    ("I'd give it 4-5", None),
    ("4th", None),
]


@pytest.mark.parametrize(("text", "expected"), LENIENT_CASES)
def test_lenient_mode(text: str, expected: float | None) -> None:
    assert RatingParser(LIKERT).parse(text) == expected


GEVAL_CASES = [
    ("4", 4),
    (" 4", 4),
    ("4.", 4),
    ("4/5", 4),
    ("4\n", 4),
    ("4.0", 4),
    ("3 out of 5", 3),
    ("4\n\nThe summary misses 2 points.", 4),
    ("Score: 4", None),
    ("**4**", None),
    ("I would give it a 3.", None),
    ("On a scale of 1-5 I'd say 2", None),
    ("10", None),
    ("0", None),
    ("N/A", None),
    ("", None),
]


@pytest.mark.parametrize(("text", "expected"), GEVAL_CASES)
def test_geval_mode_needs_the_number_first(text: str, expected: float | None) -> None:
    assert RatingParser(LIKERT, mode="geval").parse(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.5", 0.5),
        ("Score: 0.5", 0.5),
        ("1", 1),
        ("Score: 1/1", 1),
        ("0", 0),
        ("0.7", None),
        ("2", None),
    ],
)
def test_lenient_mode_on_a_non_integer_scale(text: str, expected: float | None) -> None:
    assert RatingParser(HALVES).parse(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Coherence: 4\nFluency: 2", 4),
        ("Fluency: 2", None),  # no match
        ("Coherence: 7", None),  # out of scale
        ("Coherence: x", None),  # the optional group did not take part
    ],
)
def test_regex_mode_reads_the_group(text: str, expected: float | None) -> None:
    parser = RatingParser(LIKERT, mode="regex", pattern=r"Coherence:\s*(\d+)?")
    assert parser.parse(text) == expected


# --- parsing, properties -------------------------------------------------------------------

# Scales of quarter steps, so str(point) is a plain decimal like "2.25" or "-0.5".
scales = st.lists(st.integers(-40, 40), min_size=1, max_size=8).map(
    lambda ks: Scale(tuple(k / 4 for k in ks))
)
parsers = st.sampled_from(["geval", "lenient", "regex"]).map(
    lambda mode: (
        lambda scale: RatingParser(
            scale, mode, r"([-+]?\d+(?:\.\d+)?)" if mode == "regex" else None
        )
    )
)
# Text built from the pieces judges write, which reaches the parser's corners far more often
# than arbitrary unicode.
judge_like_text = st.lists(
    st.sampled_from(
        [
            "Score",
            "rating",
            ":",
            " ",
            "\n",
            "4",
            "2.5",
            "10",
            "/",
            "/5",
            "-",
            "1-5",
            "out of",
            "to",
            ".",
            "**",
            "is",
            "a",
            "I give it",
            "N/A",
            "-3",
            "0",
        ]  # fmt: skip
    ),
    max_size=12,
).map("".join)


@given(scales, parsers)
def test_every_scale_point_parses_as_itself(scale: Scale, make_parser) -> None:
    parser = make_parser(scale)
    for point in scale.points:
        assert parser.parse(str(point)) == point


@given(st.one_of(st.text(), judge_like_text), scales, parsers)
def test_parse_never_raises_and_only_returns_ratings_inside_the_scale(
    text: str, scale, make_parser
) -> None:
    parser = make_parser(scale)
    reading = parser.read(text)
    assert (reading.rating is None) != (reading.reason is None)
    if reading.rating is not None:
        # A scale point, or (fractional = "keep") a value between two integer points.
        assert reading.rating in scale.points or scale.lo < reading.rating < scale.hi
    parser.fractional = "invalid"
    assert parser.parse(text) is None or parser.parse(text) in scale.points


# --- distributions from samples ------------------------------------------------------------


def test_distribution_from_samples_counts_invalid_samples() -> None:
    dist = distribution_from_samples([4, 4, 3, None, 5])
    assert dist.probs == {3: 0.25, 4: 0.5, 5: 0.25}
    assert (dist.valid, dist.invalid, dist.valid_mass) == (4, 1, 0.8)
    assert dist.weighted_score == 4.0


def test_distribution_from_no_valid_samples_has_no_score() -> None:
    dist = distribution_from_samples([None, None])
    assert dist.probs == {}
    assert (dist.valid, dist.invalid, dist.valid_mass) == (0, 2, 0.0)
    assert dist.weighted_score is None
    assert distribution_from_samples([]).valid_mass == 0.0


def test_distribution_to_json_uses_readable_rating_keys() -> None:
    data = distribution_from_samples([0.5, 1, 1, None]).to_json()
    assert data == {
        "probs": {"0.5": 1 / 3, "1": 2 / 3},
        "valid": 3,
        "invalid": 1,
        "valid_mass": 0.75,
        "weighted_score": pytest.approx(0.5 / 3 + 2 / 3, abs=1e-15),
    }
    json.dumps(data)


@given(
    scales.flatmap(lambda s: st.tuples(st.just(s), st.lists(st.sampled_from((*s.points, None)))))
)
def test_sample_distribution_sums_to_one_and_scores_inside_the_scale(case) -> None:
    scale, ratings = case
    dist = distribution_from_samples(ratings)
    assert dist.valid + dist.invalid == len(ratings)
    if dist.valid:
        assert math.isclose(sum(dist.probs.values()), 1.0, abs_tol=1e-12)
        assert scale.lo <= dist.weighted_score <= scale.hi
    else:
        assert dist.weighted_score is None


# --- distributions from logprobs -----------------------------------------------------------


def _top(*pairs: tuple[str, float]) -> list[dict]:
    """OpenAI-shaped top_logprobs from (token, probability) pairs."""
    return [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in pairs]


def test_spaced_and_bare_tokens_of_one_rating_add_up() -> None:
    top = _top((" 4", 0.5), ("4", 0.2), ("3", 0.1), (" 5", 0.05), ("The", 0.05))
    dist = distribution_from_logprobs(top, LIKERT)
    # Valid mass 0.5 + 0.2 + 0.1 + 0.05 = 0.85, on 4 (0.7), 3 (0.1) and 5 (0.05).
    assert dist.valid_mass == pytest.approx(0.85, abs=1e-12)
    assert dist.probs == pytest.approx({3: 0.1 / 0.85, 4: 0.7 / 0.85, 5: 0.05 / 0.85}, abs=1e-12)
    assert dist.weighted_score == pytest.approx((3 * 0.1 + 4 * 0.7 + 5 * 0.05) / 0.85, abs=1e-12)
    assert (dist.valid, dist.invalid) == (1, 0)


def test_the_same_token_listed_twice_counts_once_with_its_higher_logprob() -> None:
    top = _top(("4", 0.3), ("4", 0.6), ("3", 0.2))
    dist = distribution_from_logprobs(top, LIKERT)
    # 4 keeps 0.6 (not 0.9); mass 0.8 -> 4: 0.75, 3: 0.25 -> score 3.75.
    assert dist.valid_mass == pytest.approx(0.8, abs=1e-12)
    assert dist.probs == pytest.approx({3: 0.25, 4: 0.75}, abs=1e-12)
    assert dist.weighted_score == pytest.approx(3.75, abs=1e-12)


def test_tokenizer_space_markers_and_whitespace_are_ignored() -> None:
    top = _top(("▁4", 0.4), ("Ġ3", 0.3), ("\n5", 0.2), (" 2 ", 0.1))
    dist = distribution_from_logprobs(top, LIKERT)
    assert dist.probs == pytest.approx({2: 0.1, 3: 0.3, 4: 0.4, 5: 0.2}, abs=1e-12)
    assert dist.weighted_score == pytest.approx(0.2 + 0.9 + 1.6 + 1.0, abs=1e-12)


def test_ratings_missing_from_top_logprobs_get_no_probability() -> None:
    top = _top(("5", 0.6), ("4", 0.15), ("**", 0.1), ("10", 0.05))
    dist = distribution_from_logprobs(top, LIKERT)
    # "10" is not on a 1-5 scale; only 4 and 5 share the renormalised mass 0.75.
    assert dist.probs == pytest.approx({4: 0.2, 5: 0.8}, abs=1e-12)
    assert dist.valid_mass == pytest.approx(0.75, abs=1e-12)
    assert dist.weighted_score == pytest.approx(4.8, abs=1e-12)


def test_no_valid_rating_token_is_one_invalid_sample() -> None:
    top = _top(("The", 0.5), ("I", 0.3), ("0", 0.1), ("6", 0.05))
    top.append({"token": "4", "logprob": -9999.0})  # OpenAI's "negligible": exp() is 0.0
    dist = distribution_from_logprobs(top, LIKERT)
    assert dist.probs == {}
    assert (dist.valid, dist.invalid, dist.valid_mass) == (0, 1, 0.0)
    assert dist.weighted_score is None
    assert distribution_from_logprobs([], LIKERT).invalid == 1


token_probs = st.lists(
    st.tuples(
        st.sampled_from(["1", " 2", "3", "▁4", "Ġ5", "5", "x", " ", "6"]),
        st.floats(min_value=1e-6, max_value=1.0),
    ),
    max_size=10,
)


@given(token_probs)
def test_logprob_distribution_sums_to_one_and_scores_inside_the_scale(pairs) -> None:
    # Distinct tokens' probabilities as a server gives them: summing to at most 1.
    best: dict[str, float] = {}
    for token, p in pairs:
        best[token] = max(p, best.get(token, 0.0))
    total = max(1.0, sum(best.values()))
    pairs = [(token, p / total) for token, p in pairs]
    dist = distribution_from_logprobs(_top(*pairs), LIKERT)
    if dist.probs:
        assert math.isclose(sum(dist.probs.values()), 1.0, abs_tol=1e-12)
        assert LIKERT.lo <= dist.weighted_score <= LIKERT.hi
        assert dist.valid_mass > 0
    else:
        assert dist.weighted_score is None and dist.invalid == 1


# --- logprobs that lie ----------------------------------------------------------------


def test_a_logprob_within_rounding_of_zero_is_certainty() -> None:
    # "4" with top logprobs [4: +1e-7, 3: -12] must score 4.0, not drop the 4 and score 3.0.
    top = [{"token": "4", "logprob": 1e-7}, {"token": "3", "logprob": -12.0}]
    dist = distribution_from_logprobs(top, LIKERT)
    assert dist.weighted_score == pytest.approx(4.0, abs=1e-4)
    assert dist.valid_mass == pytest.approx(1.0, abs=1e-4) and dist.reason is None


@pytest.mark.parametrize(
    "top",
    [
        [{"token": "4", "logprob": "-0.1"}, {"token": "3", "logprob": -2.0}],
        [{"token": "4", "logprob": None}, {"token": "3", "logprob": -2.0}],
        [{"token": "4", "logprob": float("nan")}, {"token": "3", "logprob": -2.0}],
        [{"token": "4", "logprob": float("inf")}, {"token": "3", "logprob": -2.0}],
        [{"token": "4", "logprob": 0.5}],  # a probability of 1.65
        [{"token": t, "logprob": 0.0} for t in "12345"],  # a mass of 5
        [{"token": "4", "logprob": math.log(0.7)}, {"token": "3", "logprob": math.log(0.6)}],
    ],
)
def test_logprobs_that_are_not_probabilities_make_the_answer_invalid(top: list[dict]) -> None:
    dist = distribution_from_logprobs(top, LIKERT)
    assert (dist.valid, dist.invalid, dist.weighted_score) == (0, 1, None)
    assert dist.reason == Reason.BAD_LOGPROBS


any_logprob = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-30, max_value=1e-6),
    st.none(),
    st.booleans(),
    st.text(max_size=4),
    st.integers(-5, 1),
)


@given(st.lists(st.tuples(st.sampled_from(["1", " 2", "3", "4", "5", "x", "10"]), any_logprob)))
def test_whatever_the_logprobs_the_score_is_a_distribution_or_an_invalid_reason(pairs) -> None:
    top = [{"token": token, "logprob": logprob} for token, logprob in pairs]
    dist = distribution_from_logprobs(top, LIKERT)
    if dist.probs:
        assert dist.reason is None and math.isclose(sum(dist.probs.values()), 1.0)
        assert 0 < dist.valid_mass <= 1.001 and LIKERT.lo <= dist.weighted_score <= LIKERT.hi
    else:
        assert dist.invalid == 1 and dist.reason in (Reason.NO_RATING, Reason.BAD_LOGPROBS)


def test_yes_no_logprobs_that_lie_are_invalid_too() -> None:
    top = [{"token": "Yes", "logprob": "-0.1"}, {"token": "No", "logprob": -2.0}]
    assert yes_no_from_logprobs(top).reason == Reason.BAD_LOGPROBS
    sure = yes_no_from_logprobs([{"token": "Yes", "logprob": 5e-7}, {"token": "No", "logprob": -9}])
    assert sure.probs[1.0] == pytest.approx(1.0, abs=1e-3)


def test_a_mass_floor_makes_scraps_invalid_as_low_mass() -> None:
    # Out-of-scale tokens hold 99.99%: scored before from the 0.01% left.
    top = _top(("10", 0.9999), ("4", 0.0001))
    dist = distribution_from_logprobs(top, LIKERT)
    assert dist.weighted_score == pytest.approx(4.0)  # the distribution alone renormalises
    floored = with_mass_floor(dist, 0.5)
    assert (floored.valid, floored.invalid, floored.reason) == (0, 1, Reason.LOW_MASS)
    assert floored.valid_mass == pytest.approx(0.0001)
    assert with_mass_floor(dist, 0.0) is dist


# --- list numbers and concluding verdicts (issues 23 and 19) -----------------------------


@pytest.mark.parametrize(
    ("text", "rating", "reason"),
    [
        ("1. Accuracy: 4/5", 4, None),
        ("1) The summary is accurate: 3/5", 3, None),
        ("1. Coherence: 4", 4, None),
        ("1, 2, 3, 4, 5", None, "ambiguous"),
        ("1 2", None, "ambiguous"),
        ("4 5", None, "ambiguous"),
        ("3. The summary is poor.", 3, None),  # one number opening the answer is its rating
        ("1. Accuracy: 4/5\n2. Clarity: 2/5", None, "ambiguous"),
    ],
)
def test_list_numbers_are_never_the_rating(text: str, rating: float | None, reason) -> None:
    reading = RatingParser(LIKERT, names=("Coherence",)).read(text)
    assert (reading.rating, reading.reason) == (rating, reason)


ASPECTS = (
    "Accuracy: The summary gets the facts right. Score: 4/5\n"
    "Completeness: It omits the officials' reaction. Score: 3/5\n"
    "Clarity: It is easy to read. Score: 5/5\n"
)


@pytest.mark.parametrize(
    ("text", "rating", "reason"),
    [
        ("It scores 3 on detail and gets the 2019 date wrong. Therefore, I would score this "
         "summary 5/5 for coherence.", 5, None),
        ("Each sentence builds on the last, thus earning a coherence score of 5.", 5, None),
        ("It mentions 2 of the 4 events and gets 1 date wrong. I would score it a 1 out of 5 "
         "for coherence.", 1, None),
        (ASPECTS + "\nTherefore, I would score the consistency of this summary as 4 out of 5.",
         4, None),
        (ASPECTS + "\nTaking everything into account, I would give this summary a 2.", 2, None),
        (ASPECTS, None, "ambiguous"),  # no conclusion: nothing says which is the rating
        (ASPECTS + "\nFinal score: 8/10", None, "off_scale"),
        (ASPECTS + "\nTherefore, I would rate it 7 out of 10.", None, "off_scale"),
        # A conclusion naming two values concludes nothing about one criterion.
        (ASPECTS + "\nTherefore, I would score fluency 4 and grammar 3.", None, "ambiguous"),
    ],
)  # fmt: skip
def test_the_rating_a_judge_concludes_with(text: str, rating: float | None, reason) -> None:
    reading = RatingParser(LIKERT, names=("Coherence",)).read(text)
    assert (reading.rating, reading.reason) == (rating, reason)


# --- first token of a chat choice ----------------------------------------------------------


def _entry(token: str, top: list[dict]) -> dict:
    return {"token": token, "logprob": -0.1, "bytes": list(token.encode()), "top_logprobs": top}


def test_first_token_skips_leading_whitespace_tokens() -> None:
    rating_top = _top(("4", 0.7), ("3", 0.3))
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": " \n4"},
        "logprobs": {
            "content": [
                _entry(" ", _top((" ", 0.9))),
                _entry("\n", _top(("\n", 0.9))),
                _entry("4", rating_top),
            ]
        },
    }
    top = first_token_top_logprobs(choice)
    assert top == rating_top
    assert distribution_from_logprobs(top, LIKERT).weighted_score == pytest.approx(3.7, abs=1e-12)


@pytest.mark.parametrize(
    "choice",
    [
        {"message": {"content": "4"}},
        {"logprobs": None},
        {"logprobs": {"content": None}},
        {"logprobs": {"content": []}},
        {"logprobs": {"content": [_entry(" ", _top((" ", 1.0)))]}},
    ],
)
def test_first_token_without_logprobs_is_none(choice: dict) -> None:
    assert first_token_top_logprobs(choice) is None


# --- the answers real judges wrote, with the reason when there is no rating -------

JUDGE_CASES = [
    ("The summary fails to give a clear overview, scoring a one out of five.", 1, None),
    ("Four stars. The story says the car was found on April 1 near the station.", 4, None),
    ("Final score: 4.5.", 4.5, None),
    (
        "The summary receives a score of 4 out of 5. The only reason for not giving it a "
        "perfect score of 5 is the missing date.",
        4,
        None,
    ),
    (
        "Final Score: 4/5\n\nHere's a breakdown:\n1. Accuracy of main events: 5/5\n2. Clarity: 3/5",
        4,
        None,
    ),
    ("Portugal won Euro 2016 after the team scored 15 penalties.", None, "no_rating"),
    ("The summary is a 3 out of 5 in terms of coherence, as it skips the ending.", 3, None),
    ("Feedback: Clear and faithful. [RESULT] 4", 4, None),
    ("**Coherence: 2**\n\nThe order of events is confused.", 2, None),
    ("A score of 1 would mean the summary is incoherent.", None, "no_rating"),
    ("I'd give it a 3 or a 4.", None, "ambiguous"),
    ("1. Accuracy: 4/5\n2. Clarity: 2/5", None, "ambiguous"),
    ("Score: 8/10", None, "off_scale"),
    ("Rating: 7", None, "off_scale"),
    ("I cannot rate this text.", None, "refused"),
    ("", None, "refused"),
]


@pytest.mark.parametrize(("text", "rating", "reason"), JUDGE_CASES)
def test_what_judges_write(text: str, rating: float | None, reason: str | None) -> None:
    reading = RatingParser(LIKERT, names=("coh", "Coherence")).read(text)
    assert (reading.rating, reading.reason) == (rating, reason)


def test_fractional_setting_keeps_rounds_or_refuses_half_points() -> None:
    assert RatingParser(LIKERT, fractional="keep").parse("Final score: 3.5") == 3.5
    assert RatingParser(LIKERT, fractional="round").parse("Final score: 3.5") == 4
    reading = RatingParser(LIKERT, fractional="invalid").read("Final score: 3.5")
    assert (reading.rating, reading.reason) == (None, "fractional")
    assert RatingParser(LIKERT).read("Score: 5.5").reason == "off_scale"


def test_an_answer_cut_off_before_its_rating_says_so() -> None:
    parser = RatingParser(LIKERT)
    assert parser.read("To evaluate the summary, I will", "length").reason == "cut_off"
    assert parser.read("4\n\nThe summary", "length").rating == 4  # the rating came first


def test_an_answer_read_again_reads_the_same_whatever_came_before() -> None:
    """A parser remembers each distinct answer: a cut-off answer seen first must not make
    the same text read as cut off when it finished, nor the other way round."""
    parser = RatingParser(LIKERT)
    text = "To evaluate the summary, I will"
    assert parser.read(text, "length").reason == "cut_off"
    assert parser.read(text, "stop").reason == "no_rating"
    assert parser.read(text).reason == "no_rating"
    assert parser.read(text, "length").reason == "cut_off"
    assert [parser.parse("Score: 4") for _ in range(3)] == [4, 4, 4]


def test_a_user_function_is_called_for_every_answer() -> None:
    calls: list[str] = []

    def count(text: str) -> str:
        calls.append(text)
        return text.strip()

    parser = RatingParser(LIKERT, mode="function", function=count)
    assert [parser.parse("3") for _ in range(3)] == [3, 3, 3]
    assert calls == ["3", "3", "3"]


def test_options_are_read_as_their_ratings() -> None:
    letters = RatingParser(LIKERT, options={"A": 1, "B": 2, "C": 3, "D": 4, "E": 5})
    assert [letters.parse(t) for t in ("D", "Answer: B", "(E)", "A good one. Answer: C")] == [
        4, 2, 5, 3,
    ]  # fmt: skip
    assert letters.read("C or D").reason == "ambiguous"
    agree = RatingParser(LIKERT, options={"Disagree": 2, "Agree": 4, "Strongly agree": 5})
    assert agree.parse("Strongly agree.") == 5 and agree.parse("I disagree.") == 2


def test_a_very_long_answer_is_read_at_its_opening_and_its_end() -> None:
    middle = "The summary mentions 3 people and 2 cars. " * 3000
    parser = RatingParser(LIKERT)
    assert parser.parse(middle + "\n\nFinal score: 4") == 4
    assert parser.parse("Score: 2\n\n" + middle) == 2


# Pieces of a judge's reasoning before its verdict: figures, labelled aspects, hedges, quotes,
# code with numbers and brackets, lists: none of them may outweigh the mark that closes it.
reasoning_pieces = st.lists(
    st.sampled_from(
        [
            "The answer says 12 x 7 = 94.",
            "Score: 7",
            "I'd give the code a 3.",
            "[[2]]",
            "a[[1]]",
            "return n or 1",
            "`x[1]`",
            "3/4 of the tests pass",
            "35/36",
            "(0, 0)",
            '"Rating: [[4]]" is the format.',
            "“the 2nd trial”",
            "1. Accuracy: 4/5",
            "\n",
            "2. Clarity: 9/10",
            "```python\nprint([1, 2][1])\n```",
            "Overall, 6.",
            "maybe 8?",
            "It is not a 10.",
            "between 2 and 5",
            "’",
            '"',
            "'",
            "**",
            "Final score: 2",
        ]
    ),
    max_size=15,
).map(" ".join)
closing_marks = st.sampled_from(
    [
        "Rating: [[{n}]]",
        '"Rating: [[{n}]]".',
        "**Rating: [[{n}]]**",
        "Rating: [[{n}]].",
        'Therefore, I would rate it as follows: "Rating: [[{n}]]".',
        "“Rating: [[{n}]]”.",
        "`Rating: [[{n}]]`",
        "**Rating:** [[{n}]]\n",
        "'[[{n}]]'.",
    ]  # fmt: skip
)


@given(reasoning_pieces, closing_marks, st.sampled_from([5, 10]), st.data())
def test_an_explicit_mark_closing_the_answer_outranks_every_number_before_it(
    reasoning: str, mark: str, top: int, data: st.DataObject
) -> None:
    rating = data.draw(st.integers(1, top))
    parser = RatingParser(Scale.integer(1, top))
    assert parser.parse(f"{reasoning}\n\n{mark.format(n=rating)}") == rating


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("The code is right: 3 of 3 tests pass.\n\nRating: [[rating]]", Reason.NO_RATING),
        ("Helpful: 8, accurate: 9.\n\nRating: [[11]]", Reason.OFF_SCALE),
        ("Helpful: 8, accurate: 9.\n\nRating: [[7]] or [[8]]", Reason.AMBIGUOUS),
        ("It fixes the bug:\n\n```python\n>>> sorted({1})\n[1]\n```", Reason.NO_RATING),
    ],
)
def test_a_closing_mark_that_names_no_rating_leaves_the_answer_invalid(
    text: str, reason: Reason
) -> None:
    assert RatingParser(Scale.integer(1, 10)).read(text).reason == reason


@pytest.mark.parametrize(
    ("text", "rating"),
    [
        ("The fix:\n\n```python\nreturn n or 3\n```\n\nScore: 7", 7),
        ("```python\nprint([1])\n```\n\nThe code is correct. I'd give it a 9.", 9),
        ('My evaluation:\n\n```json\n{"score": 4, "reason": "clear"}\n```', 4),
        ('My evaluation:\n\n```\n{"score": 4}\n```', 4),
        ("Verdict:\n```text\nScore: 6\n```", 6),
        ("```\nScore: 8\n```", 8),
        ("The assistant prints the list:\n\n```\n>>> xs\n[1]\n```", None),
    ],
)
def test_code_a_judge_quotes_in_a_fenced_block_is_never_its_rating(
    text: str, rating: float | None
) -> None:
    assert RatingParser(Scale.integer(1, 10)).parse(text) == rating
