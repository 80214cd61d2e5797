"""``geval-async sim``'s arguments, added only when that command is chosen.

The command takes a flag per setting of the simulated judge (:class:`~geval_async.sim.SimSettings`).
Reading those settings imports the simulated judge and with it aiohttp.web, which no other
command needs: so the flags are added by a :class:`CommandParser` when ``sim`` is the command
being parsed (or asked for its ``--help``), and every other command starts without them.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["SETTING_HELP", "CommandParser", "add_sim_command", "sim_setting_names"]


class CommandParser(argparse.ArgumentParser):
    """A command's parser that can add some of its arguments only when the command is chosen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deferred: list[Callable[[argparse.ArgumentParser], None]] = []

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        # argparse parses a chosen command's arguments (and its --help) through this method.
        while self.deferred:
            self.deferred.pop(0)(self)
        return super().parse_known_args(*args, **kwargs)


# What each setting does, as `sim --help` says it (a share is a fraction of requests, 0-1).
SETTING_HELP = {
    "latency_ms": "median time to answer a request, in ms",
    "latency_sigma": "spread of the latency (sigma of a log-normal; 0: always latency-ms)",
    "rpm": "requests per minute it admits; more get a 429 (default: no limit)",
    "tpm": "tokens per minute it admits; more get a 429 (default: no limit)",
    "bucket_seconds": "the burst the limits allow: this many seconds of rpm/tpm at once",
    "error_500": "share of requests answered with HTTP 500",
    "error_503": "share of requests answered with HTTP 503",
    "reset": "share of requests whose connection is reset",
    "stall": "share of requests that hang for stall-seconds",
    "stall_seconds": "how long a stalled request hangs",
    "truncated": "share of answers cut off mid-JSON",
    "spurious_429": "share of requests refused with a 429 although under the limits",
    "retry_after_ms": "retry-after-ms of a spurious 429",
    "quota_after": "answer this many requests, then refuse with insufficient_quota",
    "invalid_answers": "share of sampled answers that hold no rating",
    "length_effect": "rating points the hidden score rises per 1,000 characters of the prompt",
    "collapse": "share of answers that give collapse-rating whatever the text (a collapsed scale)",
    "collapse_rating": "the rating a collapsed answer gives (at most the scale's top)",
    "certainty": "how sure the judge is of each rated item: even (the same noise for all) or "
    "varied (a third always one rating, a third mostly one, a third spread across the scale)",
    "ignore_n": "answer one choice whatever n asks for, as llama.cpp does",
    "max_n": "refuse (400) a request asking for more than this n, as llama-server does",
    "api_key": "the only API key it accepts (default: any, or none)",
    "context_window": "prompt tokens above which a request is refused (400)",
    "content_filter_marker": "a prompt holding this text is refused by the content filter",
    "seed": "seed of the ratings and of the latency and fault draws",
    "answer_styles": "how ratings are written: plain, judges, or style names joined by commas",
    "batch_seconds": "Batch API: seconds from a batch's creation to its end",
    "batch_failed_lines": "Batch API: share of lines answered with batch-failure-status",
    "batch_failure_status": "Batch API: the HTTP status of a failed line",
    "batch_expired_lines": "Batch API: share of lines left unanswered (the batch expires)",
    "batch_invalid": "Batch API: every batch fails validation with this message",
    "batch_queue_tokens": "Batch API: enqueued-token limit per model; a batch over it fails",
    "batch_polls": "Batch API: a batch ends after this many retrievals (overrides batch-seconds)",
    "batch_echo_key": "Batch API: quote the Authorization header in every output and error "
    "line and in a failed batch's errors",
    "profile": "the model's dialect: default, openai-reasoning, deepseek-reasoner, think-tags, "
    "anthropic-compat, openai-responses",
    "reasoning_field": "deepseek-reasoner: the message field of the reasoning",
    "think_cut_off": "think-tags: share of answers cut off inside their reasoning",
    "position_bias": "pairwise prompts: how much more than half of its verdicts the text shown "
    "first wins (0-0.5)",
    "pair_ties": "pairwise prompts: share of verdicts that are ties",
    "pair_strengths": "pairwise prompts: a JSON file of text -> strength (the judge's preference)",
    "rated_scores": "rated prompts: a JSON file of text -> hidden score; the text that ends "
    "last in a prompt sets its score",
    "prompt_cache": "model OpenAI's prompt cache: a start of 1,024+ tokens (128-token blocks) "
    "an answered request carried is reported as cached_tokens",
    "cache_retention_minutes": "prompt cache: minutes a prompt's start is kept unused",
    "responses_only": "model names (comma-separated) chat completions refuse with OpenAI's 404 "
    "'only supported in v1/responses'; POST /v1/responses serves them",
    "refuse_summary": "Responses API: refuse reasoning.summary (400), as OpenAI does to an "
    "organization it has not verified",
}


def add_sim_command(commands: Any, handler: Callable[[argparse.Namespace], int]) -> None:
    """Register ``sim`` on the CLI's subparsers (made with ``parser_class=CommandParser``)."""
    sim = commands.add_parser("sim", help="serve the simulated OpenAI-compatible judge")
    sim.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sim.add_argument("--port", type=int, default=8000, help="0 picks a free port (default 8000)")
    sim.deferred.append(_setting_arguments)
    sim.set_defaults(handler=handler)


def sim_setting_names() -> list[str]:
    """The simulated judge's settings, each a flag of ``sim`` (imports the simulated judge)."""
    from ..sim.settings import SimSettings

    return [f.name for f in dataclasses.fields(SimSettings)]


def _setting_arguments(sim: argparse.ArgumentParser) -> None:
    from ..sim.certainty import CERTAINTIES
    from ..sim.profiles import PROFILES, REASONING_FIELDS
    from ..sim.settings import SimSettings

    choices = {
        "profile": PROFILES,
        "reasoning_field": REASONING_FIELDS,
        "certainty": CERTAINTIES,
    }
    for f in dataclasses.fields(SimSettings):
        default = f.default
        flag = "--" + f.name.replace("_", "-")
        meaning = SETTING_HELP.get(f.name, "")
        if isinstance(default, bool):
            sim.add_argument(flag, action="store_true", help=meaning)
        else:
            kind: Callable[[str], Any] = type(default) if default is not None else _number
            shown = "" if default is None else f" (default {default})"
            sim.add_argument(
                flag, type=kind, default=default, choices=choices.get(f.name), help=meaning + shown
            )


def _number(text: str) -> float | int | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
