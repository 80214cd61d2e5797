"""Build tests/corpus/judge_answers.jsonl: judge answers written for this project, with labels.

Every sentence below was written for geval-async (none is copied from a data set). The answers
imitate how judge families write: GPT-4-class reason-then-verdict, terse numbers, word numbers,
Llama-2-chat "The summary is a 3 out of 5 in terms of coherence, as ...", markdown with bold
verdicts, MT-Bench "[[8]]", Prometheus "Feedback: ... [RESULT] 4", stars, letters and labelled
options, half points, counterfactual mentions ("a perfect score of 5"), breakdown lists, quoted
content full of numbers (years, money, counts, dates, times), refusals and cut-off answers.

Each line: ``text``, ``scale`` ([lo, hi]), ``label`` (the rating a careful reader takes, or
null when the answer gives none), ``style``, and optionally ``options`` (label -> rating),
``criterion`` (the criterion's display name), ``finish_reason`` and ``reasoning`` (the
message's reasoning field, as DeepSeek, vLLM and OpenRouter send a thinking model's reasoning).

The combinations are drawn with a fixed seed, so the file is the same on every run:

    python -m tests.corpus.build
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "judge_answers.jsonl"
WORD = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}

# Content a judge cites from the text it rates: numbers that are never the rating.
CONTENT = [
    'the summary says the bridge was closed on March 3 after "two lorries collided at 6:45 am"',
    "the article reports that Portugal won Euro 2016 and that the team scored 15 penalties in "
    "the tournament",
    "the summary keeps the figure of $4 million but drops the date, 12 June 2019",
    'it quotes the minister ("we will hire 3,000 nurses by 2025") accurately',
    "the source mentions 2 arrests and 14 injuries, and the summary keeps both counts",
    "the car was found on April 1 near the A40, which the summary mentions",
    "it repeats that the company laid off 250 workers in 2020",
    "the summary says the match ended 2-1, while the article says 3-1",
    "the piece states the flight left at 10:30 and landed 4 hours late",
    "the summary gets the 45% turnout figure right but omits the 1998 precedent",
    "the article lists 5 victims and the summary says 3 people were hurt",
    'the summary claims "over 1 million downloads in the first week", which the article supports',
    "it mentions the 10-year sentence and the £2,500 fine",
    "the writer notes the storm on 14 February brought 3 inches of rain",
    "the summary confuses the 2014 and 2015 seasons",
    "it keeps the detail that 7 of the 11 players were under 21",
    "the article's key event (the vote on 5 May) is in the first sentence",
    "the summary invents a 2nd trial that the article never mentions",
    "the source says 4 people were rescued; the summary says 40",
    "it notes the museum opened in 1987 and receives 2 million visitors a year",
]
STRENGTHS = [
    "The summary is well organised and flows logically from one point to the next.",
    "It captures the main event and the key consequences without padding.",
    "The sentences are grammatical and easy to read.",
    "It stays faithful to the source and adds nothing that the article does not say.",
    "The structure mirrors the article: cause, event, reaction.",
    "Transitions between sentences are smooth.",
    "It is concise and keeps only the important facts.",
]
WEAKNESSES = [
    "However, the last sentence jumps to an unrelated detail.",
    "It omits the reaction of the officials, which the article stresses.",
    "Some sentences are repetitive and a little clumsy.",
    "The order of events is hard to follow in the middle.",
    "It includes a minor detail at the expense of the main point.",
    "There is one factual slip about the timeline.",
    "The ending is abrupt and leaves the reader without context.",
]
CRITERIA = ["Coherence", "Consistency", "Fluency", "Relevance"]


def _reason(rng: random.Random, with_content: bool) -> str:
    parts = [rng.choice(STRENGTHS), rng.choice(WEAKNESSES)]
    if with_content:
        parts.insert(1, f"For example, {rng.choice(CONTENT)}.")
    return " ".join(parts)


def reason_then_verdict(rng: random.Random) -> list[dict]:
    verdicts = [
        "Score: {r}",
        "Final score: {r}",
        "Overall, I would rate this summary a {r}.",
        "Therefore, I give it a score of {r}.",
        "{c}: {r}",
        "Rating: {r}/5",
        "Final rating: {r} out of 5.",
        "Taking everything into account, the {lc} score is {r}.",
        "{c} score: {r}",
        "So my rating is {r}.",
    ]
    out = []
    for i in range(60):
        r, c = rng.randint(1, 5), rng.choice(CRITERIA)
        verdict = verdicts[i % len(verdicts)].format(r=r, c=c, lc=c.lower())
        text = f"{_reason(rng, i % 2 == 0)}\n\n{verdict}"
        out.append(dict(text=text, scale=[1, 5], label=r, style="reason_then_verdict", criterion=c))
    return out


def terse(rng: random.Random) -> list[dict]:
    forms = ["{r}", " {r}", "{r}.", "{r}\n", "Score: {r}", "{r}/5", " {r} ", "Rating: {r}",
             "**{r}**", "{r} - {why}", "{r}\n\n{why}", "{c} (1-5): {r}", "- {c}: {r}"]  # fmt: skip
    whys = ["The summary is mostly coherent.", "Clear and accurate.", "It misses 2 key points.",
            "Too long and it repeats itself 3 times.", "Good, but the ending is weak."]  # fmt: skip
    out = []
    for i in range(40):
        r, c = rng.randint(1, 5), rng.choice(CRITERIA)
        text = forms[i % len(forms)].format(r=r, c=c, why=rng.choice(whys))
        out.append(dict(text=text, scale=[1, 5], label=r, style="terse", criterion=c))
    for top in (3, 10):
        for _ in range(5):
            r = rng.randint(1, top)
            out.append(dict(text=f"{r}", scale=[1, top], label=r, style="terse"))
    return out


def word_numbers(rng: random.Random) -> list[dict]:
    forms = [
        "{W}.",
        "{w}",
        "I'd give it a {w}.",
        "The summary fails to give a clear overview, scoring a {w} out of five.",
        "Score: {W}",
        "Overall this deserves a {w} out of five: {why}",
        "{why} I would rate it {w}.",
        "My rating: {w}/5",
        "{W} out of five. {why}",
        "Rating - {W}",
    ]
    whys = ["it reads well but skips the outcome.", "the facts are right and the order is clear.",
            "the summary is hard to follow.", "one of the sentences contradicts the article.",
            "nothing important is missing."]  # fmt: skip
    out = []
    for i in range(35):
        r = rng.randint(1, 5)
        why = rng.choice(whys)
        text = forms[i % len(forms)].format(w=WORD[r], W=WORD[r].capitalize(), why=why)
        out.append(dict(text=text, scale=[1, 5], label=r, style="word_numbers"))
    return out


def llama(rng: random.Random) -> list[dict]:
    forms = [
        "The summary is a {r} out of 5 in terms of {lc}, as {content}. {weak}",
        "Sure! I would rate the summary a {r} out of 5 for {lc}. {strong} {weak}",
        "Based on the given criteria, I would give the summary a score of {r} out of 5 for {lc}."
        " {strong}",
        "  The summary is a {r} out of 5 in terms of {lc}. {strong} However, {content}.",
        "I would rate this summary as a {r} out of 5 in terms of {lc}. The summary {verb}.",
        "Sure, here's my evaluation:\n\n{c}: {r}/5\n\n{strong} {weak}",
    ]
    verbs = ["covers the main points but misses 2 details", "is clear and concise",
             "jumps between topics", "contains all the key facts"]  # fmt: skip
    out = []
    for i in range(42):
        r, c = rng.randint(1, 5), rng.choice(CRITERIA)
        text = forms[i % len(forms)].format(
            r=r, c=c, lc=c.lower(), content=rng.choice(CONTENT), strong=rng.choice(STRENGTHS),
            weak=rng.choice(WEAKNESSES), verb=rng.choice(verbs),
        )  # fmt: skip
        out.append(dict(text=text, scale=[1, 5], label=r, style="llama_out_of", criterion=c))
    return out


def markdown(rng: random.Random) -> list[dict]:
    forms = [
        "**{c}: {r}**\n\n{reason}",
        "**Score:** {r}\n\n**Explanation:** {reason}",
        "### Evaluation\n\n{reason}\n\n**Final Score: {r}**",
        "## {c}\n\n- Strengths: {strong}\n- Weaknesses: {weak}\n\n**Rating: {r}/5**",
        "**{c} (1-5): {r}**",
        "{reason}\n\n**{r}**",
        "| Criterion | Score |\n|---|---|\n| {c} | {r} |",
        "*Score*: __{r}__",
    ]
    out = []
    for i in range(40):
        r, c = rng.randint(1, 5), rng.choice(CRITERIA)
        text = forms[i % len(forms)].format(
            r=r, c=c, reason=_reason(rng, i % 3 == 0), strong=rng.choice(STRENGTHS),
            weak=rng.choice(WEAKNESSES),
        )  # fmt: skip
        out.append(dict(text=text, scale=[1, 5], label=r, style="markdown_bold", criterion=c))
    return out


def mt_bench(rng: random.Random) -> list[dict]:
    forms = [
        "The assistant's answer is accurate and addresses the user's question directly. {weak}"
        "\n\nRating: [[{r}]]",
        "Explanation: the response covers 3 of the 4 requested points and its code runs, but "
        "the edge case for an empty list is not handled.\n\nRating: [[{r}]]",
        "The answer contains a calculation error (it says 12 x 7 = 94). Otherwise it is "
        "well structured. Rating: [[{r}]]",
        "[[{r}]]",
        "Compared with a typical answer, this one is thorough. A rating of 10 would require "
        "citations, which are missing.\n\nRating: [[{r}]]",
    ]
    out = []
    for i in range(30):
        r = rng.randint(1, 9)
        text = forms[i % len(forms)].format(r=r, weak=rng.choice(WEAKNESSES))
        out.append(dict(text=text, scale=[1, 10], label=r, style="mt_bench_brackets"))
    return out


def prometheus(rng: random.Random) -> list[dict]:
    forms = [
        "Feedback: {reason} Based on the score rubric, the response fits the description of "
        "a score of {r}. [RESULT] {r}",
        "Feedback: The response is mostly accurate, although {content}. A score of 5 would "
        "need the complete timeline. [RESULT] {r}",
        "Feedback: {strong} {weak} So the overall score is {r}. [RESULT] {r}",
        "Feedback: The response misses the main point of the question. [RESULT] {r}",
    ]
    out = []
    for i in range(30):
        r = rng.randint(1, 4) if i % 4 == 1 else rng.randint(1, 5)
        text = forms[i % len(forms)].format(
            r=r, reason=_reason(rng, False), content=rng.choice(CONTENT),
            strong=rng.choice(STRENGTHS), weak=rng.choice(WEAKNESSES),
        )  # fmt: skip
        out.append(dict(text=text, scale=[1, 5], label=r, style="prometheus_result"))
    return out


def stars(rng: random.Random) -> list[dict]:
    forms = [
        "{W} stars. {content}.",
        "I'd give it {r} stars: {strong}",
        "{r}-star summary. {weak}",
        "Rating: {glyphs}",
        "{W} stars out of five. {strong}",
        "This is a solid {r}-star answer, though {content}.",
    ]
    out = []
    for i in range(30):
        r = rng.randint(2, 5)
        text = forms[i % len(forms)].format(
            r=r, W=WORD[r].capitalize(), glyphs="★" * r + "☆" * (5 - r),
            content=rng.choice(CONTENT), strong=rng.choice(STRENGTHS).lower(),
            weak=rng.choice(WEAKNESSES),
        )  # fmt: skip
        out.append(dict(text=text, scale=[1, 5], label=r, style="stars"))
    return out


def letters(rng: random.Random) -> list[dict]:
    options = {"A": 1, "B": 2, "C": 3, "D": 4, "E": 5}
    agree = {"Strongly disagree": 1, "Disagree": 2, "Neutral": 3, "Agree": 4, "Strongly agree": 5}
    forms = ["{L}", "Answer: {L}", "({L})", "The answer is {L}.", "{L}) {text}",
             "A careful reading shows the summary is accurate. Answer: {L}", "**{L}**",
             "I choose option {L} because {why}"]  # fmt: skip
    agree_forms = ["{P}", "{P}.", "My answer: {P}", "I {p} with the statement: {why}",
                   "Answer: {P}. {why}"]  # fmt: skip
    whys = ["the text is clear about it", "a reader would follow it easily",
            "it leaves out the main result"]  # fmt: skip
    out = []
    names = {1: "very poor", 2: "poor", 3: "fair", 4: "good", 5: "excellent"}
    for i in range(24):
        r = rng.randint(1, 5)
        letter = "ABCDE"[r - 1]
        text = forms[i % len(forms)].format(L=letter, text=names[r], why=rng.choice(whys))
        out.append(dict(text=text, scale=[1, 5], label=r, style="letters", options=options))
    for i in range(16):
        r = rng.randint(1, 5)
        phrase = next(k for k, v in agree.items() if v == r)
        text = agree_forms[i % len(agree_forms)].format(
            P=phrase, p=phrase.lower(), why=rng.choice(whys)
        )
        out.append(dict(text=text, scale=[1, 5], label=r, style="letters", options=agree))
    return out


def half_points(rng: random.Random) -> list[dict]:
    forms = ["Final score: {r}.", "{reason}\n\nScore: {r}", "{r}", "I'd rate it {r} out of 5.",
             "Rating: {r}/5", "**{c}: {r}**"]  # fmt: skip
    out = []
    for i in range(24):
        r = rng.choice([1.5, 2.5, 3.5, 4.5])
        text = forms[i % len(forms)].format(r=r, reason=_reason(rng, False), c="Fluency")
        out.append(dict(text=text, scale=[1, 5], label=r, style="half_points"))
    return out


def counterfactual(rng: random.Random) -> list[dict]:
    forms = [
        "The summary receives a score of {r} out of 5. The only reason for not giving it a "
        "perfect score of 5 is that {content}.",
        "I would give this a {r}. A score of 1 would mean the summary is incoherent, and that "
        "is clearly not the case here.",
        "It is not a 5, because {content}, but it is better than a 2. Score: {r}",
        "A perfect 5 would need the outcome of the trial. {strong} Final score: {r}",
        "Rating: {r}. It could have been a 5 if the ending were clearer.",
        "{weak} This keeps it from a top score of 5; I'd rate it {r} out of 5.",
        "On a scale where 1 means incoherent and 5 means perfectly coherent, this is a {r}.",
        "Rather than a 2, I give it a {r}: the errors are minor.",
    ]
    out = []
    for i in range(40):
        r = rng.randint(3, 4)
        text = forms[i % len(forms)].format(
            r=r, content=rng.choice(CONTENT), strong=rng.choice(STRENGTHS),
            weak=rng.choice(WEAKNESSES),
        )  # fmt: skip
        out.append(dict(text=text, scale=[1, 5], label=r, style="counterfactual"))
    return out


def breakdown(rng: random.Random) -> list[dict]:
    out = []
    for i in range(24):
        r = rng.randint(2, 5)
        parts = [rng.randint(1, 5) for _ in range(3)]
        items = (
            f"1. Accuracy of main events: {parts[0]}/5\n2. Clarity: {parts[1]}/5\n"
            f"3. Conciseness: {parts[2]}/5"
        )
        if i % 3 == 0:
            text = f"Final Score: {r}/5\n\nHere's a breakdown:\n{items}"
        elif i % 3 == 1:
            text = f"Here is my assessment:\n\n{items}\n\nOverall: {r}/5"
        else:
            text = f"- Coverage: {parts[0]}\n- Order: {parts[1]}\n\nOverall score: {r}"
        out.append(dict(text=text, scale=[1, 5], label=r, style="breakdown"))
    for _ in range(6):  # a breakdown without an overall rating gives none
        a, b = rng.sample([1, 2, 3, 4, 5], 2)
        text = f"1. Accuracy: {a}/5\n2. Clarity: {b}/5\n\nThe summary is uneven."
        out.append(dict(text=text, scale=[1, 5], label=None, style="breakdown"))
    return out


def quoted(rng: random.Random) -> list[dict]:
    out = []
    verdicts = ["Score: {r}", "I rate it {r}.", "{r}", "Consistency: {r}", "Rating: {r}/5"]
    for i in range(30):
        r = rng.randint(1, 5)
        cited = rng.sample(CONTENT, 2)
        text = f"Checking the facts: {cited[0]}; also, {cited[1]}.\n\n" + verdicts[
            i % len(verdicts)
        ].format(r=r)
        out.append(dict(text=text, scale=[1, 5], label=r, style="quoted_numbers"))
    for _ in range(10):  # the content's numbers and no rating at all
        cited = rng.sample(CONTENT, 2)
        text = f"Notes: {cited[0]}. Also {cited[1]}."
        out.append(dict(text=text, scale=[1, 5], label=None, style="quoted_numbers"))
    return out


def refusals(rng: random.Random) -> list[dict]:
    texts = [
        "I cannot rate this text.",
        "I'm sorry, but I can't evaluate this summary without the source article.",
        "As an AI language model, I am unable to provide a score for this content.",
        "N/A",
        "",
        "   ",
        "The summary is empty, so there is nothing to rate.",
        "I apologize, but the document was not provided.",
        "I'm unable to score this: the summary is in a language I was not asked to judge.",
        "No summary was provided.",
        "I must decline to rate this content.",
        "Not applicable.",
    ]
    return [dict(text=t, scale=[1, 5], label=None, style="refusal") for t in texts]


def cut_off(rng: random.Random) -> list[dict]:
    out = []
    heads = ["The summary", "To evaluate the coherence of the summary, I will first",
             "Step 1: Read the article carefully. The article describes",
             "Let me analyse the summary. It begins with the event on",
             "Evaluation:\n\nThe"]  # fmt: skip
    for head in heads:
        out.append(dict(text=head, scale=[1, 5], label=None, style="cut_off",
                        finish_reason="length"))  # fmt: skip
    for r in (2, 3, 4, 5):
        out.append(dict(text=f"{r}\n\nThe summary", scale=[1, 5], label=r, style="cut_off",
                        finish_reason="length"))  # fmt: skip
        out.append(dict(text=f"Score: {r}\nExplanation: The", scale=[1, 5], label=r,
                        style="cut_off", finish_reason="length"))  # fmt: skip
    return out


def no_rating(rng: random.Random) -> list[dict]:
    """Answers with no usable rating: ambiguous, off the scale, or none at all."""
    texts = [
        ("I'd give it a 3 or a 4.", None),
        ("Somewhere between 3 and 4.", None),
        ("Score: 3-4", None),
        ("8/10", None),
        ("Score: 8 out of 10", None),
        ("Rating: 7", None),
        ("0", None),
        ("The summary is coherent and fluent.", None),
        ("Coherence is good; fluency is excellent.", None),
        ("The summary covers 3/5 of the article, and 4/5 of its sentences are accurate.", None),
        ("It is one of the better summaries I have seen.", None),
        ("Good.", None),
    ]
    return [
        dict(text=t, scale=[1, 5], label=lab, style="ambiguous_or_off_scale") for t, lab in texts
    ]


def handwritten(rng: random.Random) -> list[dict]:
    """One-off answers, each written on its own, as judges ramble, hedge and format."""
    rows = [
        (
            "After reviewing the summary against the article, I find it coherent overall. The "
            "events are presented in order and the key outcome is stated.\n\nCoherence: 4",
            4,
        ),
        (
            "Evaluation Steps:\n1. Read the news article carefully and identify the main topic.\n"
            "2. Read the summary and compare it to the article.\n3. Assign a score.\n\n"
            "The summary follows the article's structure.\n\nScore: 4",
            4,
        ),
        ("The summary receives a 2. It lists 6 facts without connecting them.", 2),
        (
            "Coherence (1-5): 3\n\nThe summary starts well but the third sentence is out of place.",
            3,
        ),
        ("- Coherence: 2", 2),
        (
            "I would rate the coherence of this summary as 3 out of 5. It is readable but "
            "disjointed.",
            3,
        ),
        (
            "3\n\nExplanation: The summary covers the main event (the 2019 election) but misses "
            "the 2 follow-up protests.",
            3,
        ),
        (
            "The summary is very short (only 12 words) yet manages to convey the main point. "
            "I'll give it a 4.",
            4,
        ),
        (
            "Rating: 5\n\nThis summary is excellent: it is faithful, concise and covers all "
            "3 main events in the right order.",
            5,
        ),
        (
            "This summary contains multiple factual errors, such as claiming the fire started at "
            "9 pm when the article says 7 pm. Consistency score: 1",
            1,
        ),
        ("Overall, I'd say it's a 3 — decent, but not great.", 3),
        ("The summary earns a 4 for relevance.", 4),
        ("My assessment: 2/5. The summary spends most of its 60 words on a side story.", 2),
        ("It's a 5. Nothing to add.", 5),
        ("Five out of five! Perfect summary.", 5),
        ("I'd rate this a two because it barely mentions the main event.", 2),
        ("Score = 3", 3),
        ("SCORE: 4", 4),
        ("score:4", 4),
        ("Answer: 3", 3),
        ("The answer is 4.", 4),
        ("4 (good)", 4),
        ("Rating: 3 (fair). The summary is understandable but needs editing.", 3),
        ("I think a 3 is fair here.", 3),
        ("A 4 seems right: clear, with one awkward sentence.", 4),
        ("Given the omissions, a score of 2 is appropriate.", 2),
        ("Relevance: 5\nReason: every sentence is about the main story.", 5),
        (
            "The summary captures 4 of the 5 key points from the article, leaving out only the "
            "final quote. Score: 4",
            4,
        ),
        (
            "The article is about the 2016 Rio Olympics, where the athlete won 3 medals. The "
            "summary gets this right and is well written. I rate it 5.",
            5,
        ),
        ("In terms of fluency, the summary is a solid 3. There are 2 run-on sentences.", 3),
        (
            'Fluency: 2. Several sentences are missing verbs, e.g. "The minister 4 new hospitals."',
            2,
        ),
        ("I'd give it 4/5 for coherence.", 4),
        (
            "The summary would get a 5 if it mentioned the victims' names, but as it stands I "
            "give it a 4.",
            4,
        ),
        (
            "A score of 5 means the summary is perfectly coherent; this one has one awkward "
            "jump, so: 4.",
            4,
        ),
        ("On a scale of 1 to 5, I would give this summary a 2.", 2),
        ("Using the 1-5 scale, this is a 3.", 3),
        ("Score (1-5): 5", 5),
        ("[Score: 3]", 3),
        ("Score - 2", 2),
        ("2 - poorly organised, hard to follow.", 2),
        ("The text is fluent. 5", 5),
        ("The summary is fluent and grammatical, with only 1 typo.\n\n5", 5),
        ("Hmm. The summary is okay.\n\n3", 3),
        ("Coherence Score: 4/5\nConsistency Score: 3/5", None),
        ("The summary is somewhere between a 3 and a 4.", None),
        ("I'm torn between 2 and 3.", None),
        ("3? Maybe 4.", None),
        ("It depends on what the reader needs.", None),
        ("The summary mentions 3 people and 2 cars.", None),
        ("Score: TBD", None),
        ("Rating: ?", None),
        ("The summary is a perfect 5 in my opinion.", 5),
        ("Honestly, this one is a 1. It is about a different article.", 1),
        ("one", 1),
        ("FOUR", 4),
        ("Three stars.", 3),
        ("⭐⭐⭐⭐", 4),
        ("4 stars out of 5", 4),
        ("The summary is decent. 3/5 stars.", 3),
        (
            "The match took place on 21 May and ended 4-2 after extra time. The summary reports "
            "this correctly but omits the penalty. Score: 3",
            3,
        ),
        (
            "The summary states the company earned $2.5 billion in 2021, which matches the "
            "article.\n\nConsistency: 5",
            5,
        ),
        (
            "The event happened at 11:00 on Tuesday; the summary says noon. That is a factual "
            "error. I give it a 2.",
            2,
        ),
        (
            "Paragraph 2 of the article is ignored. Step 3 of the evaluation shows the summary "
            "misses the cause. Rating: 2",
            2,
        ),
        (
            '"Scored 3 goals in 5 games" is quoted verbatim. Otherwise the summary is fine. '
            "Score: 4",
            4,
        ),
        (
            'The summary quotes "Chapter 11 bankruptcy" and the "24 hours" deadline '
            "correctly.\n\nFinal Score: 5",
            5,
        ),
        ("Unlike a 1 or 2, this summary at least names the main actors. I'd score it 3.", 3),
        ("Not a 1, not a 5: a 3.", 3),
        ("This deserves more than a 2 but less than a 4, so 3.", 3),
        ("A perfect score would be 5. This summary misses the outcome, so it gets a 3.", 3),
        ("If the summary had included the date, it would be a 5. As is, 4.", 4),
        ("The final score is 3 out of 5.", 3),
        ("Final answer: 4", 4),
        ("Final verdict: 2", 2),
        ("Verdict: [[3]]", 3),
        ("Rating: [[2]]\n\nThe answer ignores the second part of the question.", 2),
        ("Feedback: The response is concise but misses the cost figure ($12,000). [RESULT] 3", 3),
        ("Feedback: Excellent. Every claim is supported.\n[RESULT] 5", 5),
        ("**Coherence**: 4", 4),
        ("**Rating**: **3**", 3),
        ("# Score\n4", 4),
        ("`4`", 4),
        ("> 4", 4),
        ("Score: **2** out of **5**", 2),
        (
            "1. The summary identifies the main topic.\n2. It misses the outcome.\n3. It is "
            "short.\n\nScore: 3",
            3,
        ),
        ("1) Coverage: good\n2) Order: poor\n\nOverall: 3", 3),
        ("The summary earns 4 points out of 5.", 4),
        (
            "I cannot give a fair rating without the article, but based on the summary alone "
            "it reads well: 4.",
            4,
        ),
        ("I don't think this deserves a 5, nor a 4. It's a 3.", 3),
        ("The summary is incoherent: sentences 2 and 3 contradict each other. Score: 1", 1),
        ("The summary is good (4), though the previous one was better.", 4),
        ("Rating: 4.0", 4),
        ("Final score: 3.50", 3.5),
        ("I'd say 4.5 out of 5.", 4.5),
        ("2.5", 2.5),
        ("Score: 4/5 (80%)", 4),
        ("This summary scores 80% on coherence.", None),
        ("Score: 10/10", None),
        ("6", None),
        ("Score: -1", None),
    ]
    out = []
    for text, label in rows:
        out.append(dict(text=text, scale=[1, 5], label=label, style="handwritten"))
    return out


def handwritten_more(rng: random.Random) -> list[dict]:
    """A second batch of one-off answers, on several scales and criteria."""
    rows = [
        # (text, scale, label, criterion)
        (
            "Let's evaluate step by step.\n\nThe summary mentions the merger, the $3 billion "
            "price and the 2024 closing date. All three are in the article. No invented facts."
            "\n\nConsistency: 5",
            [1, 5],
            5,
            "Consistency",
        ),
        (
            "The response addresses both parts of the question. The explanation of recursion is "
            "correct, and the example (factorial of 5 = 120) is right. Minor: no mention of "
            "stack depth.\n\nRating: [[8]]",
            [1, 10],
            8,
            None,
        ),
        ("I'd rate this response 7/10. It is helpful but verbose.", [1, 10], 7, None),
        ("Score: 9", [1, 10], 9, None),
        ("Helpfulness: 6 out of 10", [1, 10], 6, "Helpfulness"),
        ("The reply is polite but does not solve the user's problem. 3/10", [1, 10], 3, None),
        ("This is a ten. Flawless.", [1, 10], 10, None),
        ("Fit (1-3): 2", [1, 3], 2, "Fit"),
        ("The text suits the reader fairly well. Fit: 2", [1, 3], 2, "Fit"),
        ("3 - it is exactly what this reader needs.", [1, 3], 3, None),
        ("Fluency (1-3): 1. The summary has broken sentences.", [1, 3], 1, "Fluency"),
        ("The summary is fluent. I would give it a 3 on the 1-3 scale.", [1, 3], 3, "Fluency"),
        ("Fluency: 4", [1, 3], None, "Fluency"),
        (
            "Relevance score: 4/5. The summary sticks to the key points, although it mentions "
            "the 1,200 spectators, a minor detail.",
            [1, 5],
            4,
            "Relevance",
        ),
        (
            "The summary includes information about the weather (25 degrees on Sunday) that is "
            "irrelevant. Relevance: 3",
            [1, 5],
            3,
            "Relevance",
        ),
        ("Coherence: 3\nFluency: 2\nRelevance: 4\nConsistency: 5", [1, 5], 3, "Coherence"),
        ("Coherence: 3\nFluency: 2\nRelevance: 4\nConsistency: 5", [1, 5], 5, "Consistency"),
        ("Coherence: 3\nFluency: 2", [1, 5], None, None),
        (
            "Here is my evaluation of the summary's coherence:\n\nThe summary begins with the "
            "announcement, moves to the reaction, and ends with the next steps. This is a clear "
            "progression.\n\nScore: 5/5",
            [1, 5],
            5,
            "Coherence",
        ),
        ("The summary is coherent. Score 4", [1, 5], 4, None),
        (
            "I give this summary a 2 out of 5 for consistency. It says 30 people died, but the "
            "article says 13.",
            [1, 5],
            2,
            "Consistency",
        ),
        ("As a judge, my score is 3.", [1, 5], 3, None),
        (
            "Evaluation: The summary is accurate.\nScore: 5\n\nNote: a score of 1 is reserved "
            "for summaries that contradict the article.",
            [1, 5],
            5,
            None,
        ),
        ("The summary is neither great nor terrible. Middle of the scale: 3.", [1, 5], 3, None),
        ("Sure. Here is the score:\n\n4", [1, 5], 4, None),
        ("4\n4\n4", [1, 5], 4, None),
        (
            "Score: 4\n\n(The summary is clear, but the last 2 sentences could be merged.)",
            [1, 5],
            4,
            None,
        ),
        (
            "The article was published on 3 October 2023 and the summary was written 2 days "
            "later. It misses the main point. Score: 2",
            [1, 5],
            2,
            None,
        ),
        (
            'The summary: "3 killed, 5 injured in a crash on the M1 at 4 am." This is accurate '
            "and concise. I rate it 5.",
            [1, 5],
            5,
            None,
        ),
        (
            "Given that the article is 800 words and the summary is 3 sentences, the coverage "
            "is reasonable. Rating: 4",
            [1, 5],
            4,
            None,
        ),
        (
            "The team finished 2nd in the league with 81 points; the summary says 1st. That is a "
            "serious error.\n\n1",
            [1, 5],
            1,
            None,
        ),
        ("The summary is about 50% shorter than it should be. 3.", [1, 5], 3, None),
        ("Consistency: four out of five", [1, 5], 4, "Consistency"),
        ("I would score it as a Three.", [1, 5], 3, None),
        ("Final Score: Two", [1, 5], 2, None),
        ("My final answer is 5.", [1, 5], 5, None),
        ("Considering all the issues above, 2.", [1, 5], 2, None),
        (
            "I believe the summary deserves a 4 rather than a 5, since it repeats one fact.",
            [1, 5],
            4,
            None,
        ),
        ("It's not bad. I'd give it 3 stars out of 5.", [1, 5], 3, None),
        ("The translation reads naturally and keeps the meaning. Score: 4.5/5", [1, 5], 4.5, None),
        ("Score: 3.7", [1, 5], 3.7, None),
        ("0.5", [0, 1], 0.5, None),  # fractional = "keep": a half point as stated
        ("Score: 0", [0, 10], 0, None),
        ("The response is empty of content. Score: 0/10", [0, 10], 0, None),
        ("Rating: 11/10!", [1, 10], None, None),
        ("Answer: B", [1, 5], 2, None),
        ("B - the summary is poor.", [1, 5], 2, None),
        ("Option D best describes it.", [1, 5], 4, None),
        ("A. The summary is very poor.", [1, 5], 1, None),
        ("A good summary overall. Answer: E", [1, 5], 5, None),
        ("A summary like this is hard to judge.", [1, 5], None, None),
        ("I'd say C or D.", [1, 5], None, None),
        ("Strongly agree.", [1, 5], 5, None),
        ("I disagree: the text is unclear.", [1, 5], 2, None),
        ("Neutral - the text is neither clear nor unclear.", [1, 5], 3, None),
        ("I neither agree nor disagree.", [1, 5], None, None),
        ("I am sorry, I can't help with that.", [1, 5], None, None),
        (
            "The summary does not say anything about the topic. I cannot identify what the "
            "article is about from it.\n\nScore: 1",
            [1, 5],
            1,
            None,
        ),
        ("Score:", [1, 5], None, None),
        ("Rating: N/A - the summary is in French.", [1, 5], None, None),
    ]
    letters = {"A": 1, "B": 2, "C": 3, "D": 4, "E": 5}
    agree = {"Strongly disagree": 1, "Disagree": 2, "Neutral": 3, "Agree": 4, "Strongly agree": 5}
    out = []
    for text, scale, label, criterion in rows:
        row = dict(text=text, scale=scale, label=label, style="handwritten")
        if criterion:
            row["criterion"] = criterion
        if re.search(
            r"\b(?:Answer: [A-E]|[A-E] - |Option [A-E]|^A\. |C or D|A summary like)", text
        ):
            row["options"] = letters
        if re.search(r"(?i)agree|neutral", text):
            row["options"] = agree
        out.append(row)
    return out


def chat_models(rng: random.Random) -> list[dict]:
    """Long chat-model answers: preambles, restated instructions, caveats, sign-offs."""
    rows = [
        (
            "  Sure, I'd be happy to help! Based on the evaluation criteria, I would rate the "
            "summary as follows:\n\nCoherence: 3\n\nThe summary is generally well-structured, but "
            "there are a few areas where it could be improved. For example, the second sentence "
            "mentions the 2 suspects before introducing the crime.",
            3,
            "Coherence",
        ),
        (
            "  Sure! Here's my evaluation of the summary:\n\nRelevance: 4/5\n\nThe summary "
            "captures the main points of the article, including the 3-day strike and the "
            "union's demands. However, it does not mention the 5% pay offer.",
            4,
            "Relevance",
        ),
        (
            "  Based on the given criteria, I would give the summary a score of 2 out of 5 for "
            "consistency. The summary states that the fire started at 3 am, while the article "
            "says it started at 5 am. Additionally, the summary mentions 12 firefighters, but "
            "the article mentions 20.",
            2,
            "Consistency",
        ),
        (
            "  I would rate the fluency of this summary as 1 out of 3. The summary contains "
            "several grammatical errors and awkward phrasing.",
            1,
            "Fluency",
        ),
        (
            "  Thank you for the task! After carefully reading the article and the summary, I "
            "would give the summary a coherence score of 4. The summary is well-organized and "
            "easy to follow, but it could be improved by adding a transition between the second "
            "and third sentences.\n\nI hope this helps! Let me know if you have any other "
            "questions.",
            4,
            "Coherence",
        ),
        (
            "  The summary scores 5 on relevance. It includes only the most important "
            "information from the article.",
            5,
            "Relevance",
        ),
        (
            "  Score: 3\n\nExplanation:\nThe summary is somewhat coherent, but it lacks a clear "
            "structure. The first sentence talks about the 2018 election, the second about the "
            "economy, and the third about a celebrity wedding. A score of 5 would require a "
            "logical flow between these topics.",
            3,
            None,
        ),
        (
            "As an evaluator, I find the summary mostly consistent with the article. One detail "
            "is off: the article says 'nearly 300 people', while the summary says 'over 300 "
            "people'. I'd give it a 4.",
            4,
            None,
        ),
        ("Evaluation Form (scores ONLY):\n- Coherence: 4", 4, "Coherence"),
        ("Evaluation Form (scores ONLY):\n\n- Relevance (1-5): 2", 2, "Relevance"),
        ("- Fluency (1-3): 3", 3, "Fluency"),
        (
            "Coherence score (1-5): 2\n\nReasoning: The summary lists events out of order.",
            2,
            "Coherence",
        ),
        (
            "Step 1: The article is about a flood in 2021 that displaced 4,000 residents.\n"
            "Step 2: The summary mentions the flood and the displacement.\n"
            "Step 3: The summary omits the government response.\n"
            "Score: 3",
            3,
            None,
        ),
        (
            "Steps:\n1. Read the article.\n2. Read the summary.\n3. Compare.\n\nThe summary "
            "covers the key facts. 4",
            4,
            None,
        ),
        ("The summary: 4\nThe reasoning: it is concise and faithful.", 4, None),
        ("Answer: 5\nConfidence: 80%", 5, None),
        ("Score: 4\nConfidence: 3/5", 4, None),
        (
            "I'd give it a 3/5. If the summary mentioned the victims, I would give it a 4/5.",
            3,
            None,
        ),
        ("It's hard to say. Maybe a 3?", 3, None),
        ("Probably a 2.", 2, None),
        ("I'm not sure; 3 or maybe 4.", None, None),
        (
            "The summary is well written. However, it contains an error: it says the company "
            "was founded in 1985, but the article says 1958. Consistency: 2/5",
            2,
            "Consistency",
        ),
        (
            "This summary gets a 1 from me. It is about a different article entirely (the 2014 "
            "World Cup rather than the 2022 one).",
            1,
            None,
        ),
        (
            "Coherence: 4 - The summary is well structured.\nConsistency: 5 - No errors.\n"
            "Fluency: 3 - Some awkward phrasing.\nRelevance: 4 - Covers the main points.",
            4,
            "Coherence",
        ),
        (
            "Coherence: 4 - The summary is well structured.\nConsistency: 5 - No errors.\n"
            "Fluency: 3 - Some awkward phrasing.\nRelevance: 4 - Covers the main points.",
            3,
            "Fluency",
        ),
        (
            "Rating: 4 stars\n\nPros: concise, accurate.\nCons: the 2nd paragraph of the "
            "article is not covered.",
            4,
            None,
        ),
        ("I'd rate the response a 6 out of 10.", None, None),
        ("Overall: 3.5/5", 3.5, None),
        ("The summary deserves a high score. 5.", 5, None),
        ("The summary deserves a low score.", None, None),
        ("Final Score: [[4]]", 4, None),
        ("The summary is better than most I have seen: 4 out of 5.", 4, None),
        ("On the 1-5 scale: 4.", 4, None),
        (
            "My score for the summary is 3, because it lists 4 facts but misses the 2 that "
            "matter most.",
            3,
            None,
        ),
        ("The 3 sentences of the summary are clear. Rating: 5", 5, None),
        (
            "The article mentions 5 suspects; the summary mentions 4. Consistency score: 3",
            3,
            "Consistency",
        ),
        ("Verdict: the summary is acceptable.\nScore: 3", 3, None),
        ("A 2 would be too harsh and a 4 too generous. 3.", 3, None),
        ("I would not rate this higher than a 2.", None, None),
        ("Given that the summary mentions only 1 of the 3 main events, I give it a 2.", 2, None),
    ]
    out = []
    for text, label, criterion in rows:
        scale = [1, 3] if "(1-3)" in text or "out of 3" in text else [1, 5]
        if "out of 10" in text:
            scale = [1, 5]
        row = dict(text=text, scale=scale, label=label, style="chat_models")
        if criterion:
            row["criterion"] = criterion
        out.append(row)
    return out


# Written before the parser first read them, as the hand-written batches were. A row's
# ``reasoning`` is the message's reasoning field (reasoning_content), never read for a rating.
def thinking(rng: random.Random) -> list[dict]:
    """Thinking models: reasoning in tags, after a lone </think>, or in a field of its own."""
    rows: list[tuple[str, float | None, dict]] = [
        ("<think>\nLet me evaluate the coherence. The summary has 3 sentences. It's a 1 out of "
         "5 for grammar? No.\n</think>\n4", 4, {}),
        ("<think>\nThe structure is fine, the ending is abrupt... maybe 4.\n</think>\n\n5", 5, {}),
        ("<thinking>The summary mentions 2 of the 5 key facts. I'd say 2 or 3. Score: 2?"
         "</thinking>\nScore: 3", 3, {}),
        ("  <think>Rating: 5 seems too generous. 1 is too harsh.</think>\n\nRating: 3", 3, {}),
        ("Okay, the article mentions 14 injuries; the summary says 4. Score 1? Too harsh.\n"
         "</think>\n\n2", 2, {}),
        ("<think>\nThe summary is fluent. I think it deserves a 4, but let me check the facts: "
         "the article says 3 people", None, {"finish_reason": "length"}),
        ("<think>I would give it a 5. Wait, the second sentence", None, {}),
        ("4", 4, {"reasoning": "The summary scores 2 on fluency? No, it reads well. Final: 5? "
                               "It misses one fact, so 4."}),
        ("", None, {"reasoning": "The article has 12 paragraphs. Coherence: 3 or 4? Let me "
                                 "re-read the second", "finish_reason": "length"}),
        ("<think></think>\n3", 3, {}),
        ("<think>\n\n</think>\n\nCoherence: 2", 2, {"criterion": "Coherence"}),
        ("<think>\nStep 1: read. Step 2: compare. The summary omits 2 facts, so 3 or 4. I'll go "
         "with 4.\n</think>\n\nThe summary is coherent but omits two facts.\n\nScore: 4", 4, {}),
        ("<think>Final score: 5</think>", None, {}),
        ("I count 3 errors, which suggests a 2.</thinking>Final score: 3", 3, {}),
        ("<think>\nOverall 4/5? Fluency is perfect, 5/5.\n</think>\n**Rating: 5/5**", 5, {}),
        ("<think>Is it a 2? A 3? The 2019 figures are right.</think>\nFour.", 4, {}),
        ("<think>Maybe [[6]]? It gets the 2019 figures right.</think>\n[[8]]", 8,
         {"scale": [1, 10]}),
        ("<think>It's a 4.</think>\n3 or 4", None, {}),
        ("Score: 2\nThe summary misses the main event.", 2,
         {"reasoning": "Score: 5? No. The main event is missing."}),
        ("<think>Between 2 and 4. Let me settle on 2.</think>\n2", 2,
         {"finish_reason": "length"}),
        ("<think>\nThe answer must be a single number from 1 to 5. I'd say 5.\n</think>\n\n"
         "1", 1, {}),
        ("<think>\nScore: 3\n</think>\nI cannot rate this text.", None, {}),
    ]  # fmt: skip
    out = []
    for text, label, extra in rows:
        row = dict(text=text, scale=extra.pop("scale", [1, 5]), label=label, style="thinking")
        out.append({**row, **extra})
    # Numbers in the reasoning that disagree with the final rating, in every carrier.
    opens = ["<think>\n{r}\n</think>\n\n", "<thinking>{r}</thinking>\n", "{r}\n</think>\n",
             "  <think>{r}</think> ", "field"]  # fmt: skip
    answers = ["{n}", "Score: {n}", "{n}/5", "Rating: {n}\n\nThe summary is concise.", "**{n}**"]
    for i in range(30):
        n = rng.randint(1, 5)
        others = [k for k in range(1, 6) if k != n]
        a, b = rng.sample(others, 2)
        thought = rng.choice(
            [
                f"The article lists {a} victims. Is this a {b}? Final score: {a}/5? No.",
                f"Score: {a}. Hmm, {b} out of 5 seems closer. Rating: {b}",
                f"Step 1: {a} facts. Step 2: a {b}? Overall {a}.",
                f"I'd give it a {a}... or a {b}. [[{a}]]",
            ]
        )
        carrier = opens[i % len(opens)]
        answer = rng.choice(answers).format(n=n)
        if carrier == "field":
            out.append(dict(text=answer, scale=[1, 5], label=n, style="thinking",
                            reasoning=thought))  # fmt: skip
        else:
            text = carrier.format(r=thought) + answer
            out.append(dict(text=text, scale=[1, 5], label=n, style="thinking"))
    return out


def concluding(rng: random.Random) -> list[dict]:
    """Verdicts in running prose that conclude an answer, after other numbers or aspects."""
    aspects = (
        "Accuracy: The summary gets the facts right. Score: 4/5\n"
        "Completeness: It omits the officials' reaction. Score: 3/5\n"
        "Clarity: It is easy to read. Score: 5/5\n"
    )
    rows: list[tuple[str, float | None, str | None]] = [
        ("The summary covers the main points, scores 3 on detail, and gets the 2019 date wrong. "
         "Therefore, I would score this summary 5/5 for coherence.", 5, "Coherence"),
        ("The summary is logically ordered and each sentence builds on the last, thus earning a "
         "coherence score of 5.", 5, "Coherence"),
        ("The summary mentions 2 of the 4 main events and gets 1 date wrong. It is hard to "
         "follow. I would score it a 1 out of 5 for coherence.", 1, "Coherence"),
        (aspects + "\nTherefore, I would score the consistency of this summary as 4 out of 5.",
         4, "Consistency"),
        (aspects, None, "Consistency"),
        ("The summary is clear but invents a quote.\n\nFinal score: 8/10", None, "Consistency"),
        ("Fluency: Score: 3/5\nRelevance: Score: 4/5\n\nBased on these points, I would rate the "
         "summary 2 out of 5.", 2, None),
        ("Fluency: 4/5. Relevance: 2/5.\nThus, the summary deserves a 3.", 3, None),
        ("Coverage: Score: 4/5\nFocus: Score: 1/5\n\nIn light of the above, the summary's "
         "relevance is a 2 out of 5.", 2, "Relevance"),
        ("Grammar: Score: 2/5\nStyle: Score: 4/5\n\nTaking everything into account, I would "
         "give this summary a 3.", 3, None),
        ("Facts: Score: 3/5\nOrder: Score: 4/5\n\nTherefore, I would rate it 7 out of 10.",
         None, None),
        ("The summary gets the 3 main facts right. Therefore, I would score this summary 4/5. A "
         "5 would require the missing date.", 4, None),
        ("Therefore, the summary contains 2 factual errors, and I would score it 3/5.", 3, None),
        ("The summary makes 3 errors; thus, 3 points are lost.", None, None),
        ("Structure: Score: 2/5\nFlow: Score: 3/5\n\nHence, my coherence score for this summary "
         "is 2.", 2, "Coherence"),
        ("The summary omits 2 of the 3 key facts. Consequently, it earns a relevance rating of "
         "2/5.", 2, "Relevance"),
    ]  # fmt: skip
    out = []
    for text, label, criterion in rows:
        row = dict(text=text, scale=[1, 5], label=label, style="concluding")
        if criterion:
            row["criterion"] = criterion
        out.append(row)
    return out


def list_numbers(rng: random.Random) -> list[dict]:
    """List numbers and bare sequences: never the rating; two candidates are ambiguous."""
    rows: list[tuple[str, float | None, str | None]] = [
        ("1. Accuracy: 4/5", 4, None),
        ("1, 2, 3, 4, 5", None, None),
        ("1 2", None, None),
        ("1. Coherence: 4", 4, "Coherence"),
        ("1) Accuracy: 3/5", 3, None),
        ("1. Fluency - 2", 2, "Fluency"),
        ("1. Accuracy: The summary is accurate. 4/5", 4, None),
        ("1 2 3 4 5", None, None),
        ("4 5", None, None),
        ("1. The summary is accurate: 4/5", 4, None),
        ("3. The summary is poor.", 3, None),
        ("2, 3", None, None),
        ("1. Accuracy: 4/5\n2. Clarity: 2/5", None, None),
        ("Score: 4\n\n1. The summary is concise.\n2. It is accurate.", 4, None),
    ]  # fmt: skip
    out = []
    for text, label, criterion in rows:
        row = dict(text=text, scale=[1, 5], label=label, style="list_numbers")
        if criterion:
            row["criterion"] = criterion
        out.append(row)
    return out


# Written, with its labels, before the parser first read it. MT-Bench's single-answer grading:
# a paragraph or more of reasoning about an assistant's answer, full of numbers, quoted code and
# lists, then the verdict as an explicit mark, "Rating: [[N]]", in the variants judges write.
GRADINGS = [
    "The user asks for the area of a triangle with vertices at (0, 0), (-1, 1) and (3, 3). The "
    "reference answer is 3. The assistant applies the shoelace formula: 1/2 |0(1 - 3) + (-1)(3 - "
    "0) + 3(0 - 1)| = 1/2 |0 - 3 - 3| = 3. Every step is shown and the final value, 3 square "
    "units, matches the reference.",
    "The question asks how many integers satisfy |x + 5| < 10. The correct answer is 19 (from "
    "-14 to 4). The assistant says 20, counting both endpoints -15 and 5, which the strict "
    "inequality excludes. The method is right, but the final count is off by 1.",
    "The user asks for a function that returns the k-th smallest element of the union of two "
    "sorted lists, in better than linear time. The assistant's answer merges both lists, which "
    "takes O(m + n) time and O(m + n) space, so it misses the requirement. It does handle k = 1 "
    "and k = m + n correctly. Here is the core of its code:\n\n```python\ndef kth_smallest(a, b, "
    "k):\n    merged = sorted(a + b)\n    return merged[k - 1]\n```\n\nOn the example a = [1, 5, "
    "9], b = [2, 3, 10], k = 4 it returns 5, which is correct.",
    "The user asked for a 2-paragraph travel blog post about a trip to Hawaii, highlighting "
    "cultural experiences and must-see attractions. The assistant wrote 4 paragraphs instead of "
    "2, though each is vivid: it mentions the 1,000-year-old temple at Pu'ukohola, a luau with 3 "
    "courses and the 2.5-mile hike up Diamond Head. The tone is engaging, but the length ignores "
    "the instruction.",
    "The puzzle: David has 3 sisters, and each of them has 1 brother. How many brothers does "
    "David have? The correct answer is 0: David is the brother of his sisters. The assistant "
    "answers 1, confusing David's brothers with the sisters' brother. The explanation is fluent, "
    "but the answer is wrong, and that is the whole point of the question.",
    "The user asks to extract the highest and lowest closing prices for each month of 2022. The "
    "assistant returns a CSV with 12 rows, starting 2022-01,156.25,153.80. I checked 3 of the "
    "months against the table: January and February are right, but March lists 163.90 as the "
    "highest, while the table has 166.80 on 2022-03-21. One error in 12 rows.",
    "The question asks why the sky is blue, explained for a 10-year-old. The assistant explains "
    "Rayleigh scattering: shorter wavelengths (around 450 nm) scatter about 5.5 times more than "
    "red light (around 700 nm). The figure is close ((700/450)^4 is about 5.9), but words such "
    'as "wavelength" and "scattering" may be too hard for a child of 10.',
    "The user asks the assistant to act as Sheldon from The Big Bang Theory and say whether hand "
    "dryers are better than paper towels. The reply stays in character for 3 of its 4 "
    "paragraphs, cites a study that found jet dryers spread 1,300 times more virus particles, "
    "and ends with a catchphrase. The last paragraph drops the character to give a balanced "
    "summary, which breaks the role.",
    "The assistant's function for the longest common subsequence has an off-by-one error:\n\n"
    "```python\ndef lcs(x, y):\n    m, n = len(x), len(y)\n    dp = [[0] * (n + 1) for _ in "
    "range(m + 1)]\n    for i in range(1, m):\n        for j in range(1, n):\n            if "
    "x[i - 1] == y[j - 1]:\n                dp[i][j] = dp[i - 1][j - 1] + 1\n            "
    "else:\n                dp[i][j] = max(dp[i - 1][j], dp[i][j - 1])\n    return "
    'dp[m][n]\n```\n\nThe loops stop at m - 1 and n - 1, so lcs("abc", "abc") returns 2 '
    "instead of 3. The explanation around the code is clear.",
    "Strengths:\n1. The answer gives 3 concrete examples.\n2. It cites the 2019 study and its "
    "sample of 1,200 people.\n3. The conclusion follows from the evidence.\n\nWeaknesses:\n1. "
    "It rates the first source 4/5 for reliability without saying why.\n2. Step 2 of the "
    "argument is repeated.\n\nOverall the answer is helpful, with 2 small weaknesses.",
    "For helpfulness I would score it 8, for accuracy 6, and the code alone deserves a 7. The "
    "assistant's tests cover 4 of the 5 edge cases the question lists: the empty string, a "
    "single character, all duplicates and a 10,000-character input; it misses the Unicode case.",
    "The assistant answers the question about matrix multiplication with NumPy:\n\n```python\n"
    "import numpy as np\na = np.array([[1, 2], [3, 4]])\nb = np.array([[5, 6], [7, 8]])\n"
    "print(a @ b)  # [[19 22]\n              #  [43 50]]\nprint(a[[1]])  # [[3 4]]\n```\n\nThe "
    "product is right: 1*5 + 2*7 = 19 and 3*6 + 4*8 = 50. It also explains that `a * b` "
    "multiplies elementwise, giving [[5, 12], [21, 32]].",
    "The assistant's Python solution reads a setting with a fallback:\n\n```python\ndef "
    'retries(options):\n    return options.get("retries") or 3\n\ndef timeout(options):\n    '
    'return options.get("timeout") or 30\n```\n\nThe question asked for 5 retries by default, '
    "not 3, and a timeout of 10 seconds, not 30. Both defaults are wrong, though the code runs.",
    "The user asks for a 3-day itinerary for Kyoto. Day 1 covers Fushimi Inari at 7 am to avoid "
    "the crowds, day 2 Arashiyama, and day 3 Nara, 45 minutes away by train. The assistant "
    "budgets 2 hours for Kinkaku-ji, which is generous, and omits the 500-yen entry fee the user "
    "asked about.",
    "The question: what is the probability of rolling a total of at least 3 with two dice? The "
    "reference answer is 35/36. The assistant computes 1 - P(total = 2) = 1 - 1/36 = 35/36 and "
    "explains each step. It also notes that the 36 outcomes are equally likely.",
    "The answer is correct and concise: 17 is prime, and the assistant checks the divisors up "
    "to 4 (since 4^2 = 16 < 17).",
    "The user asks for a SQL query that finds the 5 customers with the highest total orders in "
    "2023. The assistant writes:\n\n```sql\nSELECT customer_id, SUM(amount) AS total\nFROM "
    "orders\nWHERE order_date >= '2023-01-01' AND order_date < '2024-01-01'\nGROUP BY "
    "customer_id\nORDER BY total DESC\nLIMIT 5;\n```\n\nThe query is correct; 2 of its 3 "
    "explanatory sentences repeat each other.",
    "The assistant was asked to rewrite a paragraph in 50 words or fewer. Its version has 63 "
    "words. It keeps the 3 main claims and the 1995 date, and it reads well, but it breaks the "
    "one hard constraint of the task.",
    "The user asks which is larger, 9.11 or 9.9. The assistant says 9.9 is larger, because 0.9 "
    "= 0.90 > 0.11, and explains why comparing 11 with 9 is the wrong way to read decimals.",
    "The answer to the physics question is wrong by a factor of 2. The kinetic energy of a 2 kg "
    "ball at 3 m/s is 1/2 * 2 * 3^2 = 9 J; the assistant writes 18 J, dropping the 1/2. The "
    "rest of the reasoning is sound:\n\n- it converts 10.8 km/h to 3 m/s correctly;\n- it "
    "states the formula;\n- it gives the unit.",
    "Score breakdown of the answer, as I read it:\n- Correctness: 6/10 (the recursion is right, "
    "the base case is not)\n- Clarity: 9/10\n- Completeness: 5/10\n\nThe base case returns 1 "
    "for n = 0 and 1 for n = 1, but the question defines f(0) = 0.",
    "The user asks for a regular expression that matches dates like 2024-02-29. The assistant "
    "gives `\\d{4}-\\d{2}-\\d{2}`, which also accepts 2023-13-45, and says so in one sentence; "
    'it suggests validating with `datetime.strptime(s, "%Y-%m-%d")` afterwards, which is the '
    "usual advice.",
    "The assistant's shell command is:\n\n```bash\nfind . -name '*.log' -mtime +7 -exec rm {} "
    "\\;\n```\n\nIt deletes logs older than 7 days, as asked. It would be safer with `-type f` "
    "and a dry run first (`-print` instead of `-exec rm`), which the answer mentions in step 2 "
    "of its 3 steps.",
]
MARKS = [
    "Rating: [[{n}]]",
    '"Rating: [[{n}]]".',
    'Therefore, I would rate it as follows: "Rating: [[{n}]]".',
    "**Rating: [[{n}]]**",
    "Rating: [[{n}]].",
    "**Rating:** [[{n}]]",
    "Rating: **[[{n}]]**",
    '"[[{n}]]"',
    'My final verdict is: "Rating: [[{n}]]"',
    "“Rating: [[{n}]]”.",
    "`Rating: [[{n}]]`",
    'Rating: "[[{n}]]".',
    "Considering all of the above, my rating is [[{n}]].",
    "Rating: [[{n}]]\n",
    "'Rating: [[{n}]]'.",
    "> Rating: [[{n}]]",
    "Rating: [[ {n} ]]",
    'Based on this, I rate the response "[[{n}]]".',
]
LEADS = ["", "", "Considering correctness, helpfulness and clarity, the answer is uneven.",
         "The answer has merit, but the errors above matter for this question.",
         "After weighing the 2 points above:"]  # fmt: skip


def verdict_after_reasoning(rng: random.Random) -> list[dict]:
    """MT-Bench gradings: long reasoning with numbers and code, then an explicit verdict mark."""
    out = []
    for i in range(72):
        hi = 5 if i % 3 == 2 else 10
        n = rng.randint(1, hi)
        paragraphs = rng.sample(GRADINGS, 1 + i % 3)
        lead = rng.choice(LEADS)
        mark = MARKS[i % len(MARKS)].format(n=n)
        text = "\n\n".join([*paragraphs, *([lead] if lead else []), mark])
        out.append(dict(text=text, scale=[1, hi], label=n, style="verdict_after_reasoning"))
    # The shapes of real judges' gradings, and answers whose end holds no rating.
    long = "\n\n".join(GRADINGS[:6])
    code = GRADINGS[8]
    rows: list[tuple[str, float | None, int, str | None]] = [
        (f'{GRADINGS[0]} Therefore, I would rate it as follows: "Rating: [[8]]".', 8, 10, None),
        (f'{GRADINGS[4]}\n\n"Rating: [[9]]".', 9, 10, None),
        (f"{long}\n\nRating: [[10]]", 10, 10, None),
        (f"{code}\n\nRating: [[1]]", 1, 10, None),
        (f'{GRADINGS[14]}\n\n"Rating: [[9]]".', 9, 10, None),
        (f"{long}\n\n{code}\n\n**Rating: [[2]]**.", 2, 10, None),
        (f'{GRADINGS[12]}\n\n"Rating: [[4]]".', 4, 5, None),
        (f"{GRADINGS[20]}\n\nRating: [[7]]", 7, 10, None),
        (f'{GRADINGS[10]}\n\n"Rating: [[6]]". I hope this evaluation helps.', 6, 10, None),
        (f"{GRADINGS[1]}\n\nRating: [[7.5]]", 7.5, 10, None),
        (f"{GRADINGS[15]}\n\nRating: [[five]].", 5, 5, None),
        (f"{GRADINGS[7]}\n\nRating: [[4/5]]", 4, 5, None),
        # No mark: the answer ends in code or prose, and the code's [1] is no rating.
        (f"{GRADINGS[2]}\n\n```python\nprint(kth_smallest([1, 5], [2], 1))\n```", None, 10,
         None),
        (f"{GRADINGS[4]}\n\nThe assistant's check:\n\n```python\n>>> sorted({{1}})\n[1]\n```",
         None, 10, None),
        (f"{GRADINGS[16]}\n\nA simpler version:\n\n```python\ndef first(xs):\n    return "
         "xs[:1] or [1]\n```", None, 10, None),
        (f"{GRADINGS[0]}\n\n```\nresult = [1]\n```", None, 5, None),
        (f"{GRADINGS[10]}\n\nThe answer is helpful overall.", None, 10, None),
        (f"{GRADINGS[3]}\n\nRating: [[rating]]", None, 10, None),
        # A mark off the scale is no rating, whatever the reasoning says.
        (f"{GRADINGS[9]}\n\nRating: [[8]]", None, 5, None),
        (f"{GRADINGS[5]}\n\nRating: [[11]]", None, 10, None),
        (f'{GRADINGS[14]}\n\n"Rating: [[0]]".', None, 10, None),
        (f"{GRADINGS[17]}\n\nRating: [[7/10]]", None, 5, None),
        (f"{GRADINGS[13]}\n\nRating: [[", None, 10, "length"),
    ]  # fmt: skip
    for text, label, hi, finish_reason in rows:
        row = dict(text=text, scale=[1, hi], label=label, style="verdict_after_reasoning")
        out.append({**row, **({"finish_reason": finish_reason} if finish_reason else {})})
    return out


BUILDERS = [reason_then_verdict, terse, word_numbers, llama, markdown, mt_bench, prometheus,
            stars, letters, half_points, counterfactual, breakdown, quoted, refusals, cut_off,
            no_rating, handwritten, handwritten_more, chat_models, thinking, concluding,
            list_numbers, verdict_after_reasoning]  # fmt: skip


def build() -> list[dict]:
    rng = random.Random(20261130)
    rows: list[dict] = []
    for builder in BUILDERS:
        rows += builder(rng)
    return rows


def main() -> None:
    rows = build()
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    print(f"wrote {len(rows)} answers to {OUT}")


if __name__ == "__main__":
    main()
