"""What the simulated judge does (:class:`SimSettings`) and what it saw (:class:`SimStats`)."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SimSettings:
    """What the simulated judge does; attributes may be changed while it runs."""

    latency_ms: float = 0.0
    latency_sigma: float = 0.0
    rpm: int | None = None
    tpm: int | None = None
    bucket_seconds: float = 60.0
    error_500: float = 0.0
    error_503: float = 0.0
    reset: float = 0.0
    stall: float = 0.0
    stall_seconds: float = 3600.0
    truncated: float = 0.0
    spurious_429: float = 0.0
    retry_after_ms: int = 200
    quota_after: int | None = None
    invalid_answers: float = 0.0
    # A judge that reacts to length: the hidden score of a prompt rises by this many rating
    # points per 1,000 characters of the prompt (kept on the scale), so a report's length
    # check can be held against what was put in (SimStats.intended records it).
    length_effect: float = 0.0
    # A collapsed scale: the share of choices that answer collapse_rating (at most the
    # scale's top) whatever the text; in logprobs mode, the share of prompts centred on it.
    collapse: float = 0.0
    collapse_rating: int = 4
    # How sure the judge is of each rated item (sim.certainty): "even", the same noise for
    # every item; "varied", some items always one rating, some mostly one with a neighbour,
    # some spread across the scale, so that draws spent by need can be measured.
    certainty: str = "even"
    ignore_n: bool = False
    max_n: int | None = None  # llama-server-style: n above this -> 400 "Field 'n': ..."
    api_key: str | None = None
    context_window: int = 128_000
    content_filter_marker: str = "[[FILTER]]"
    seed: int = 0
    # How ratings are written: "plain" ("4", "Score: 4", "4/5"), "judges" (words, stars,
    # "N out of M", markdown, [[N]], [RESULT] N, counterfactuals, breakdowns, quoted numbers),
    # or style names joined by commas ("letters", "half" for half points, ...).
    answer_styles: str = "plain"
    # The Batch API (/v1/files, /v1/batches): seconds from create to done; the share of lines
    # answered with batch_failure_status; the share left unanswered when the window closes
    # (the batch then ends "expired"); a message that makes every batch fail validation.
    batch_seconds: float = 0.0
    batch_failed_lines: float = 0.0
    batch_failure_status: int = 500
    batch_expired_lines: float = 0.0
    batch_invalid: str | None = None
    # The Batch API's enqueued-token limit per model (None: no limit): a batch whose input
    # would take the model's queued tokens over it fails with token_limit_exceeded.
    batch_queue_tokens: int | None = None
    # A batch ends after this many retrievals (GET /v1/batches/ID), whatever batch_seconds
    # says: a clock-free way for tests to hold batches in the queue and then finish them.
    batch_polls: int | None = None
    # The Batch API quotes the Authorization header a batch was created with in every line it
    # writes (an answer's system_fingerprint, a failed or expired line's error message) and in
    # a failed batch's errors, as a debugging proxy does: the client must take the key out.
    batch_echo_key: bool = False
    # The dialect of the model behind the endpoint (sim.profiles.PROFILES): "default" (an
    # OpenAI chat model), "openai-reasoning", "deepseek-reasoner", "think-tags",
    # "anthropic-compat".
    profile: str = "default"
    # deepseek-reasoner: the message field holding the reasoning ("reasoning_content" as
    # DeepSeek and vLLM's reasoning parser send it, "reasoning" as newer vLLM and OpenRouter).
    reasoning_field: str = "reasoning_content"
    # think-tags: the share of answers cut off inside their reasoning (no closing tag).
    think_cut_off: float = 0.0
    # Pairwise prompts (sim.pairs): how much more often than half of its verdicts the text
    # shown first wins (0 to 0.5), the share of verdicts that are ties, and a JSON file of
    # text -> strength (Bradley-Terry log-strength) that sets the judge's preference.
    position_bias: float = 0.0
    pair_ties: float = 0.0
    pair_strengths: str = ""
    # Rated prompts: a JSON file of text -> hidden score on the prompt's scale, so that the
    # judge rates a text as a study wants it to (people's rating plus a known bias and noise,
    # say); a prompt holding none of the texts keeps the score drawn from it (sim.answers).
    rated_scores: str = ""
    # OpenAI's prompt cache (sim.prompt_cache): a prompt's start of 1,024 tokens or more, in
    # 128-token blocks, kept once answered, reported as cached_tokens; unused this many
    # minutes, it is gone.
    prompt_cache: bool = False
    cache_retention_minutes: float = 5.0
    # Model names (comma-separated) that chat completions refuse with OpenAI's 404 "only
    # supported in v1/responses": they are served on POST /v1/responses alone.
    responses_only: str | None = None
    # The Responses API refuses reasoning.summary, as OpenAI does to an organization it has not
    # verified (400, param "reasoning.summary").
    refuse_summary: bool = False


@dataclass
class SimStats:
    """What the simulated judge received and answered.

    ``by_status`` counts resets under 0 and requests whose client went away under -1.
    ``answered`` counts complete 200 answers (not truncated ones) by sha256 of the raw body;
    ``samples`` counts the choices those answers held.
    ``events`` holds (arrival, response time, status) per request, on ``time.monotonic()``,
    with the same 0 / -1 statuses as ``by_status``.
    ``timeline()`` sums them up on that clock for a benchmark in another process.
    """

    received: int = 0
    by_status: collections.Counter[int] = field(default_factory=collections.Counter)
    in_flight: int = 0
    peak_in_flight: int = 0
    answered: collections.Counter[str] = field(default_factory=collections.Counter)
    arrivals: list[tuple[float, str]] = field(default_factory=list)
    events: list[tuple[float, float, int]] = field(default_factory=list)
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    rate_limited: int = 0
    samples: int = 0
    batches: int = 0  # batches created
    batch_lines: int = 0  # request lines in the input files of created batches
    batch_calls: int = 0  # HTTP calls to /v1/files and /v1/batches
    # sha256 of each request body in the input of a batch that entered the queue (not one
    # that failed validation or the queue limit): a count above 1 is a request sent twice.
    batch_requests: collections.Counter[str] = field(default_factory=collections.Counter)
    # Input tokens of the queued (validating or in_progress) batches per model, as of the
    # last Batch API call, and the most there ever were.
    batch_queued_tokens: dict[str, int] = field(default_factory=dict)
    batch_peak_queued_tokens: dict[str, int] = field(default_factory=dict)
    # The rating each choice of a 200 answer gave (None: no rating), by sha256 of the raw
    # body as ``answered`` counts it; appended to on every answer, so a repeated body adds.
    ratings: dict[str, list[int | None]] = field(default_factory=dict)
    steps: int = 0  # answers that wrote evaluation steps (sim.steps) rather than a rating
    # Pairwise prompts: per answer, the digests of the texts shown first and second
    # (sim.pairs.text_digest) and the verdict of each choice ("A", "B", "tie"; None: none).
    verdicts: list[tuple[str, str, list[str | None]]] = field(default_factory=list)
    # Prompt tokens of the online answers, of them the ones read from the prompt cache, and
    # the prompt_cache_key values the requests carried ("" for none).
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_hits: int = 0  # answers with cached tokens
    cache_keys: collections.Counter[str] = field(default_factory=collections.Counter)
    # Per answer, by sha256 of the raw body as ``answered`` counts it: the characters of its
    # prompt and the hidden score it meant to give (after length_effect), so a test can work
    # out the rank correlation of score and length that was put in.
    intended: dict[str, tuple[int, float]] = field(default_factory=dict)
    # The draws (choices) answered per item, by sim.certainty.item_digest of the messages:
    # what a study that spends its draws by need asked of each item, over all its rounds.
    item_draws: collections.Counter[str] = field(default_factory=collections.Counter)

    def reset(self) -> None:
        """Zero every counter in place (the server keeps its reference)."""
        self.received = self.rate_limited = self.samples = 0
        self.batches = self.batch_lines = self.batch_calls = self.steps = 0
        self.prompt_tokens = self.cached_tokens = self.cache_hits = 0
        self.batch_peak_queued_tokens = dict(self.batch_queued_tokens)  # queued batches stay
        self.peak_in_flight = self.in_flight  # requests still running count on
        counters = (
            self.by_status,
            self.answered,
            self.faults,
            self.batch_requests,
            self.item_draws,
            self.cache_keys,
        )
        for counter in counters:
            counter.clear()
        self.ratings.clear()
        self.verdicts.clear()
        self.intended.clear()
        self.arrivals.clear()
        self.events.clear()

    def timeline(self) -> dict[str, float | None]:
        """The run on the server's clock (``time.monotonic()``, None before any request).

        ``first_arrival``; ``last_admitted``, the last arrival not refused with a 429 (the
        limiter's pace ends there); ``last_answered``, when the last 200 was sent. From the
        last admitted arrival to the last answer is the server's latency tail, which no
        client pacing at the limit can remove.
        """
        admitted = [arrived for arrived, _, status in self.events if status != 429]
        answered = [sent for _, sent, status in self.events if status == 200]
        return {
            "first_arrival": self.arrivals[0][0] if self.arrivals else None,
            "last_admitted": max(admitted, default=None),
            "last_answered": max(answered, default=None),
        }

    def as_dict(self, ratings: bool = False) -> dict[str, Any]:
        """A JSON-able summary; counter keys are strings so it survives a JSON round trip.

        ``ratings`` adds the ratings given (``GET /sim/stats?ratings=1``): left out by default,
        as a million-request benchmark would fetch them in every poll.
        """
        summary = {
            "received": self.received,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "answered": dict(self.answered),
            "faults": dict(self.faults),
            "rate_limited": self.rate_limited,
            "samples": self.samples,
            "batches": self.batches,
            "batch_lines": self.batch_lines,
            "batch_calls": self.batch_calls,
            "batch_requests": dict(self.batch_requests),
            "batch_queued_tokens": dict(self.batch_queued_tokens),
            "batch_peak_queued_tokens": dict(self.batch_peak_queued_tokens),
            "steps": self.steps,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_hits": self.cache_hits,
            "cache_keys": dict(self.cache_keys),
            "timeline": self.timeline(),
        }
        if ratings:
            summary["ratings"] = dict(self.ratings)
            summary["verdicts"] = [list(v) for v in self.verdicts]
            summary["intended"] = {k: list(v) for k, v in self.intended.items()}
            summary["item_draws"] = dict(self.item_draws)
        return summary
