"""The simulated judge's answers: pure functions of the request.

Every prompt has a hidden "true score" on the scale named in the prompt (drawn from a hash of
the prompt, or given to the text judged by a ``rated_scores`` file); each choice is that score
plus deterministic noise, written the ways real judges write ratings; with ``logprobs``
the first token carries a distribution over the ratings centred on the true score.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .certainty import EVEN, LOGPROB_WIDTH, NOISE_SD, item_certainty, rating_centre
from .limits import message_text, prompt_tokens
from .pairs import pair_choice, pair_texts, text_digest, verdict_tokens
from .profiles import (
    ANTHROPIC_COMPAT,
    DEEPSEEK_REASONER,
    OPENAI_REASONING,
    OPENAI_RESPONSES,
    fresh_samples,
    ignores_logprobs,
    reasoning_text,
    shape,
    thinking_tokens,
)
from .settings import SimSettings
from .steps import asks_for_steps, write_steps

MODEL = "sim-judge"
FINGERPRINT = "geval-async-simulated"
INVALID_ANSWER = "I cannot rate this text."
STYLES = ("{r}", " {r}", "{r}.", "Score: {r}", "{r}/{top}", "Final score: {r}.", "Rating: {r}")
# The ways judge families write a rating (SimSettings.answer_styles), each a list of forms;
# every form states the rating {r} once, among other numbers that are not the rating.
JUDGE_STYLES: dict[str, tuple[str, ...]] = {
    "plain": STYLES,
    "words": ("{W}.", "I'd give it a {w}.", "It is hard to follow, scoring a {w} out of {wtop}."),
    "stars": ("{W} stars. The car was found on April 1.", "{r}-star text: clear, 2 slips."),
    "out_of": (
        "The text is a {r} out of {top} in terms of quality, as it covers 3 of the main points.",
    ),
    "markdown": ("**Score: {r}**\n\nThe text is mostly clear.", "**Rating:** {r}/{top}"),
    "brackets": ("The answer is accurate but omits 2 details.\n\nRating: [[{r}]]",),
    "prometheus": ("Feedback: The response is clear and covers 4 facts. [RESULT] {r}",),
    "counterfactual": (
        "The text receives a score of {r} out of {top}. The only reason for not giving it a "
        "perfect score of {top} is one slip about the 2019 figures.",
    ),
    "breakdown": (
        "Final Score: {r}/{top}\n\nHere's a breakdown:\n1. Accuracy of main events: "
        "{top}/{top}\n2. Clarity: 1/{top}",
    ),
    "quoted": (
        'The text says "15 penalties in Euro 2016" and "$4 million" on 12 June. Score: {r}',
    ),
    "letters": ("Answer: {L}", "{L}", "The answer is {L}."),
    "half": ("Final score: {h}.",),
}
# "judges": every style a number-reading parser should read as the plain rating.
JUDGES = tuple(k for k in JUDGE_STYLES if k not in ("letters", "half"))
_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
# Matches "(1-5)", "1-3", "1 to 5", "scale of 1 to 10"; the rating line comes last in a prompt.
SCALE = re.compile(r"(?<![\d.])1\s*(?:-|–|to)\s*(\d{1,3})\b")


# -- judging: pure functions of the request ------------------------------------------------


YES_NO_STYLES = ("{w}", " {w}", "{w}.", "Answer: {w}", "{w}, it does.")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _units(*parts: Any) -> list[float]:
    """Four uniform numbers in [0, 1) drawn from a sha256 of ``parts``."""
    digest = hashlib.sha256(canonical(parts).encode()).digest()
    return [(int.from_bytes(digest[i : i + 8], "big") >> 11) / 2**53 for i in range(0, 32, 8)]


YES_NO = re.compile(r"\byes\s*(?:or|/)\s*no\b", re.IGNORECASE)


def asks_yes_no(text: str) -> bool:
    """Whether the prompt's closing lines ask for a yes/no answer (a rubric question)."""
    return bool(YES_NO.search(text[-400:]))


def _yes_no(token: str) -> str:
    """Rating 2 -> "Yes", 1 -> "No", keeping the token's surrounding whitespace."""
    core = token.strip()
    if core in ("1", "2"):
        return token.replace(core, "Yes" if core == "2" else "No")
    return token


def _letter(token: str) -> str:
    """Rating 1 -> "A", 2 -> "B", ... (answer_styles = "letters"), keeping the whitespace."""
    core = token.strip()
    if core.isdigit() and 1 <= int(core) <= 26:
        return token.replace(core, chr(64 + int(core)))
    return token


def rating_scale(text: str) -> int:
    """The top of the rating scale the prompt asks for (the last "1-N" in it), default 5."""
    tops = [int(m) for m in SCALE.findall(text) if 2 <= int(m) <= 100]
    return tops[-1] if tops else 5


def true_score(messages: list[dict[str, Any]], top: int, seed: int) -> float:
    """The hidden score of a prompt, uniform over [1, top)."""
    return 1 + _units(seed, "item", canonical(messages))[0] * (top - 1)


@functools.cache
def _rated_file(path: str) -> dict[str, float]:
    return rated_table(path)


def rated_table(path: str) -> dict[str, float]:
    """A ``rated_scores`` file read: text (stripped) -> hidden score.

    Raises:
        ValueError: the file cannot be read, or is not a JSON object of text -> number.
    """
    try:
        table = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read it as JSON ({exc})") from None
    if not isinstance(table, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in table.values()
    ):
        raise ValueError("it must be a JSON object of text -> score")
    return {text.strip(): float(value) for text, value in table.items() if text.strip()}


def rated_score(prompt: str, path: str, top: int) -> float | None:
    """The hidden score the ``rated_scores`` file gives a prompt (kept on its 1..``top``
    scale), None when the prompt holds none of its texts.

    A prompt shows the text judged after its context (G-Eval's article, then the summary), and
    the context may itself hold another text of the file (an extractive summary is sentences of
    the article): the text that ends last in the prompt is the one judged, the longest of those
    that end there.
    """
    found: tuple[int, int, float] | None = None
    for text, value in _rated_file(path).items():
        start = prompt.rfind(text)
        if start >= 0:
            place = (start + len(text), len(text), value)
            found = place if found is None or place[:2] > found[:2] else found
    return None if found is None else min(float(top), max(1.0, found[2]))


def with_length(t: float, characters: int, top: int, settings: SimSettings) -> float:
    """The hidden score ``t`` raised by the judge's reaction to length (``length_effect``
    points per 1,000 characters of the prompt), kept on the scale."""
    if not settings.length_effect:
        return t
    return min(float(top), max(1.0, t + settings.length_effect * characters / 1000))


def collapsed(messages: list[dict[str, Any]], settings: SimSettings, *draw: Any) -> bool:
    """Whether this prompt (or this draw of it) answers the collapsed rating."""
    return bool(settings.collapse) and (
        _units(settings.seed, "collapse", canonical(messages), *draw)[0] < settings.collapse
    )


def _token(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def first_token_probs(
    t: float, top: int, invalid: bool, width: float = LOGPROB_WIDTH[EVEN]
) -> list[tuple[str, float]]:
    """The first-token distribution: ratings centred on ``t`` (``width`` wide, as a Gaussian's
    standard deviation) plus tokenizer variants.

    Bare ratings never get all the mass (a spaced " 4", a newline, "The", "Score" take
    some, and some stays unlisted), as with real models.
    """
    weights = [math.exp(-((r - t) ** 2) / (2 * width**2)) for r in range(1, top + 1)]
    total = sum(weights)
    probs = [(str(r), 0.88 * w / total) for r, w in enumerate(weights, 1)]
    probs += [(f" {r}", 0.06 * w / total) for r, w in enumerate(weights, 1)]
    probs += [("\n", 0.025), ("The", 0.015), ("Score", 0.01)]
    if invalid:  # the model starts a refusal instead
        probs = [("I", 0.9)] + [(tok, p * 0.09) for tok, p in probs]
    return sorted(probs, key=lambda tp: (-tp[1], tp[0]))


def _logprob_choice(
    t: float,
    width: float,
    top: int,
    invalid: bool,
    k: int,
    max_tokens: int | None,
    prefix: list[str],
) -> tuple[str, dict[str, Any], bool]:
    """Greedy tokens with logprobs; ``prefix`` (reasoning, think-tags) comes before the rating."""
    probs = first_token_probs(t, top, invalid, width)
    # Greedy, as judges asking for logprobs sample once at temperature 0.
    best, p_best = probs[0]
    first = _token(best, math.log(p_best))
    first["top_logprobs"] = [_token(tok, math.log(p)) for tok, p in probs[:k]]
    tokens = [{**_token(word, -0.01), "top_logprobs": [_token(word, -0.01)][:k]} for word in prefix]
    tokens.append(first)
    if invalid:
        for word in (" cannot", " rate", " this", " text", "."):
            tokens.append({**_token(word, -0.05), "top_logprobs": [_token(word, -0.05)][:k]})
    cut = max_tokens is not None and len(tokens) > max_tokens
    tokens = tokens[:max_tokens] if cut else tokens
    text = "".join(token["token"] for token in tokens)
    return text, {"content": tokens, "refusal": None}, cut


def answer_forms(styles: str) -> tuple[str, ...]:
    """The answer forms of ``styles``: "plain", "judges", or names joined by commas."""
    names: list[str] = []
    for name in (s.strip() for s in styles.split(",") if s.strip()):
        names += JUDGES if name == "judges" else [name]
    forms: list[str] = []
    for name in names:
        if name not in JUDGE_STYLES:
            raise ValueError(
                f"unknown answer style {name!r}; known: judges, {', '.join(JUDGE_STYLES)}"
            )
        forms += JUDGE_STYLES[name]
    return tuple(forms) or STYLES


def _fill(form: str, rating: int, top: int) -> str:
    word = _WORDS[rating] if rating < len(_WORDS) else str(rating)
    half = rating - 0.5 if rating > 1 else rating
    return form.format(
        r=rating,
        top=top,
        w=word,
        W=word.capitalize(),
        wtop=_WORDS[top] if top < len(_WORDS) else str(top),
        L=chr(64 + rating),
        h=f"{half:g}",
    )


@dataclass
class Judged:
    """The choices answering a request and what they took."""

    choices: list[dict[str, Any]]
    completion_tokens: int
    reasoning_tokens: int
    refusals: int  # choices that hold no rating (invalid_answers)
    ratings: list[int | None]  # the rating each choice gives (None: none, or steps)
    steps: bool  # the request asked for evaluation steps (sim.steps)
    # A pairwise prompt (sim.pairs): the digests of the texts shown first and second, and
    # each choice's verdict ("A", "B", "tie"; None: none).
    pair: tuple[str, str] | None = None
    verdicts: list[str | None] = field(default_factory=list)
    # The prompt's characters and the hidden score meant for it (None: evaluation steps).
    intended: tuple[int, float] | None = None
    # Each choice's hidden reasoning, as its summary would tell it ("" where none was spent).
    thoughts: list[str] = field(default_factory=list)


def ratings(body: dict[str, Any], settings: SimSettings, repeat: int = 0) -> list[int | None]:
    """The rating each choice of the answer to ``body`` (as sent) gives: what tests compare
    a study's scores with. ``repeat`` as for :func:`judge`."""
    return judge(body, settings, repeat).ratings


def judge(
    body: dict[str, Any], settings: SimSettings, repeat: int, fresh: bool | None = None
) -> Judged:
    """The choices for a validated request, their tokens and ratings.

    Args:
        body: the parsed request.
        settings: the server settings (seed, invalid_answers, ignore_n, profile).
        repeat: how often this exact body was answered before; mixed into the draws only
            where a real server samples anew on every call (``ignore_n``, the
            ``anthropic-compat`` profile, which ignores the seed).
        fresh: whether every call samples anew (None: as the profile does; the Responses
            API, one request a draw, always does).
    """
    messages = body["messages"]
    prompt = "\n".join(message_text(m) for m in messages)
    yes_no = asks_yes_no(prompt)
    # A yes/no question is a two-point scale: 2 = "Yes", 1 = "No".
    top = 2 if yes_no else rating_scale(prompt)
    known = rated_score(prompt, settings.rated_scores, top) if settings.rated_scores else None
    hidden = true_score(messages, top, settings.seed) if known is None else known
    t = with_length(hidden, len(prompt), top, settings)
    writes_steps = asks_for_steps(prompt)
    fixed = min(settings.collapse_rating, top)
    texts = None if writes_steps else pair_texts(prompt)
    # How sure the judge is of a rated item; yes/no questions and pairs are drawn evenly.
    rated = not (writes_steps or yes_no or texts is not None)
    kind = item_certainty(messages, settings) if rated else EVEN
    centre = rating_centre(kind, t, top)
    # Choice i of a request with seed s is the sample of seed s + i: geval-async sends seed +
    # draw index, so an item's k-th sample is the same however its samples were chunked.
    seed = None if settings.profile == ANTHROPIC_COMPAT else body.get("seed")
    offset = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
    kept = {k: v for k, v in body.items() if k != "n" and (k != "seed" or offset is None)}
    if settings.profile == ANTHROPIC_COMPAT:
        kept.pop("seed", None)
    kept.pop("prompt_cache_key", None)  # routing only: it cannot change an answer
    draw_key = canonical(kept)
    n = 1 if settings.ignore_n else body.get("n") or 1
    fresh = fresh_samples(settings) if fresh is None else fresh
    with_logprobs = bool(body.get("logprobs")) and not ignores_logprobs(settings)
    judged = Judged([], 0, 0, 0, [], writes_steps)
    if texts is not None:
        judged.pair = (text_digest(texts[0]), text_digest(texts[1]))
    if not writes_steps:
        judged.intended = (len(prompt), t)
    for i in range(n):
        u1, u2, u3, u4 = _units(settings.seed, draw_key, (offset or 0) + i, repeat if fresh else 0)
        invalid = u3 < settings.invalid_answers and not writes_steps
        judged.refusals += invalid
        if texts is not None:
            judged.choices.append(_pair_answer(judged, texts, body, settings, draw_key, i, offset))
            judged.ratings.append(None)
            continue
        if with_logprobs and not writes_steps:
            max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
            k = body.get("top_logprobs") or 0
            middle, width = centre, LOGPROB_WIDTH[kind]
            if collapsed(messages, settings):
                middle, width = fixed, LOGPROB_WIDTH[EVEN]
            greedy = first_token_probs(middle, top, False, width)[0][0].strip()  # the rating
            prefix = thinking_tokens(settings, int(greedy), top, yes_no, [u1, u2, u3, u4])
            text, logprobs, cut = _logprob_choice(
                middle, width, top, invalid, k, max_tokens, prefix
            )
            rename = _yes_no if yes_no else _letter if settings.answer_styles == "letters" else None
            rating_token = logprobs["content"][len(prefix) : len(prefix) + 1]  # none: cut before
            if rename is not None:
                for token in rating_token:
                    token["token"] = rename(token["token"])
                    for alternative in token["top_logprobs"]:
                        alternative["token"] = rename(alternative["token"])
                text = "".join(token["token"] for token in logprobs["content"])
            first = rating_token[0]["token"].strip() if rating_token else ""
            judged.ratings.append(None if invalid else _rating_of(first, yes_no))
            judged.completion_tokens += len(logprobs["content"])
            judged.thoughts.append("")
            message = {"role": "assistant", "content": text, "refusal": None}
        else:
            noise = math.sqrt(-2 * math.log(1 - u1)) * math.cos(2 * math.pi * u2)
            rating = min(top, max(1, math.floor(centre + noise * NOISE_SD[kind] + 0.5)))
            draw = repeat if fresh else 0
            if collapsed(messages, settings, (offset or 0) + i, draw):
                rating = fixed
            extra = _units(settings.seed, draw_key, (offset or 0) + i, "profile", draw)
            if writes_steps:
                full = write_steps(prompt, rating_scale(prompt), [u1, u2, u3, u4])
            elif yes_no:
                word = "Yes" if rating == 2 else "No"
                full = INVALID_ANSWER if invalid else YES_NO_STYLES[int(u4 * len(YES_NO_STYLES))]
                full = full.format(w=word)
            else:
                forms = answer_forms(settings.answer_styles)
                full = INVALID_ANSWER if invalid else forms[int(u4 * len(forms))]
                full = _fill(full, rating, top)
            given = None if invalid or writes_steps else rating
            thought = reasoning_text(given, top, yes_no, extra)
            shaped = shape(full, thought, body, settings, extra)
            # Cut off inside its reasoning, the choice never wrote the rating it leaned to.
            judged.ratings.append(given if shaped.answered else None)
            message, cut, logprobs = shaped.message, shaped.cut, None
            judged.completion_tokens += shaped.completion_tokens
            judged.reasoning_tokens += shaped.reasoning_tokens
            judged.thoughts.append(thought if shaped.reasoning_tokens else "")
        judged.choices.append(
            {
                "index": i,
                "message": message,
                "logprobs": logprobs,
                "finish_reason": "length" if cut else "stop",
            }
        )
    return judged


def _pair_answer(
    judged: Judged,
    texts: tuple[str, str],
    body: dict[str, Any],
    settings: SimSettings,
    draw_key: str,
    i: int,
    offset: int | None,
) -> dict[str, Any]:
    """One choice of a pairwise prompt (sim.pairs): its verdict recorded in ``judged``."""
    units = _units(settings.seed, draw_key, (offset or 0) + i, 0)
    extra = _units(settings.seed, draw_key, (offset or 0) + i, "pair")
    invalid = units[2] < settings.invalid_answers
    verdict, text, core, p_first, ties = pair_choice(texts, units, extra, settings, _units, invalid)
    logprobs = None
    if bool(body.get("logprobs")) and not ignores_logprobs(settings) and not invalid:
        letter, tokens = verdict_tokens(p_first, ties, body.get("top_logprobs") or 0)
        verdict = "tie" if letter == "C" else letter
        text, logprobs = "".join(t["token"] for t in tokens), {"content": tokens, "refusal": None}
        core = text
    budget = body.get("max_completion_tokens", body.get("max_tokens"))
    shown = text if budget is None else text[: 4 * budget]
    cut = len(shown) < len(text)
    # Cut off by max_tokens before its verdict was written out, the answer gives none.
    judged.verdicts.append(verdict if core in shown else None)
    judged.completion_tokens += max(1, math.ceil(len(shown) / 4))
    return {
        "index": i,
        "message": {"role": "assistant", "content": shown},
        "logprobs": logprobs,
        "finish_reason": "length" if cut else "stop",
    }


def _rating_of(token: str, yes_no: bool) -> int | None:
    if yes_no:
        return {"Yes": 2, "No": 1}.get(token)
    if len(token) == 1 and token.isalpha():
        return ord(token.upper()) - 64
    return int(token) if token.isdigit() else None


def completion(
    body: dict[str, Any],
    settings: SimSettings,
    model: str,
    answer_id: str,
    repeat: int = 0,
    fresh: bool | None = None,
    cached: int | None = None,
) -> tuple[dict[str, Any], Judged]:
    """The chat-completion object answering a validated request, and how it was judged.

    The online endpoint and the Batch API both answer with it, so a batch answers exactly as
    online requests do. ``cached``: the prompt tokens read from the prompt cache (None: the
    cache is not modelled).
    """
    judged = judge(body, settings, repeat, fresh)
    prompt = prompt_tokens(body["messages"])
    used = judged.completion_tokens
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": used,
        "total_tokens": prompt + used,
    }
    if cached is not None or settings.profile in (
        OPENAI_REASONING,
        DEEPSEEK_REASONER,
        OPENAI_RESPONSES,
    ):
        usage["prompt_tokens_details"] = {"cached_tokens": cached or 0, "audio_tokens": 0}
        usage["completion_tokens_details"] = {
            "reasoning_tokens": judged.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
    answer = {
        "id": answer_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": FINGERPRINT,
        "choices": judged.choices,
        "usage": usage,
    }
    return answer, judged
