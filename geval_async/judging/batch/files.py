"""Batch files: JSONL input lines of judge requests, split at the provider's limits, and
the lines of output and error files read back.

An input line is ``{"custom_id", "method": "POST", "url", "body"}`` where ``custom_id`` is the
request's cache key and ``body`` the body an online run sends: chat completions' at
``/v1/chat/completions``, or the Responses API's at ``/v1/responses`` (configured, or learned by
an online run). Azure OpenAI wants its deployment as the model and no ``/v1``; the cache key
stays the one of the online request, so every form fills the same cache. An output line is
``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``; a request
that never ran (expired, cancelled) has no response and an ``error`` with its code.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ...errors import ConfigError
from ...options import JudgeApi, Provider
from ...study.config import JudgeConfig
from ...study.plan import JudgeRequest
from ..wire.capabilities import Capabilities

# OpenAI's and Azure OpenAI's limits of one batch input file.
MAX_LINES = 50_000
MAX_BYTES = 200 * 1024**2


def endpoint(judge: JudgeConfig, capabilities: Capabilities | None = None) -> str:
    """The batch endpoint (and every line's URL) in the judge provider's form, for the API
    the requests go to (``capabilities``'s, else the config's)."""
    api = judge.api if capabilities is None else capabilities.api
    path = "/responses" if api is JudgeApi.RESPONSES else "/chat/completions"
    return path if judge.provider == Provider.AZURE else f"/v1{path}"


def input_line(
    request: JudgeRequest,
    judge: JudgeConfig,
    capabilities: Capabilities | None = None,
    cache_key: str | None = None,
) -> bytes:
    """One line of an input file, newline included; its body spelt as the endpoint has shown
    it wants (``capabilities``: ``max_completion_tokens``, n = 1, the Responses API), as an
    online run sends it, with its criterion's ``prompt_cache_key`` (``cache_key``) as an
    online run's carries it."""
    if capabilities is None:
        capabilities = Capabilities(
            configured_responses=judge.api is JudgeApi.RESPONSES, store=judge.store
        )
    body = capabilities.wire(request.body, cache_key)
    if judge.provider == Provider.AZURE:
        body = {**body, "model": judge.deployment}
    url = endpoint(judge, capabilities)
    line = {"custom_id": request.key, "method": "POST", "url": url, "body": body}
    return orjson.dumps(line) + b"\n"


def split_lines(
    lines: Iterable[tuple[str, bytes]], *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES
) -> Iterator[tuple[int, str, bytes]]:
    """Number each (key, line) with the input file it goes into (0, 1, ...): files of at most
    ``max_lines`` lines and ``max_bytes``. Streams: nothing is held but the counts."""
    number = count = size = 0
    for key, line in lines:
        if len(line) > max_bytes:
            raise ConfigError(
                f"request {key} is {len(line)} bytes, more than a batch file may hold "
                f"({max_bytes}); shorten the record or judge it online"
            )
        if count and (count >= max_lines or size + len(line) > max_bytes):
            number, count, size = number + 1, 0, 0
        count += 1
        size += len(line)
        yield number, key, line


@dataclass(frozen=True)
class OutputLine:
    """One line of an output or error file."""

    custom_id: str
    status: int | None  # the response's HTTP status; None when the request never ran
    body: bytes  # the response body as JSON
    error: str | None  # the line's error code and message, when it has one


def read_output(lines: Iterable[bytes], source: str) -> Iterator[OutputLine]:
    """Parse the lines of an output or error file.

    Raises:
        ConfigError: a line is not an output line (naming the file and line).
    """
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise _bad(source, number, f"is not JSON ({exc})") from exc
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            raise _bad(source, number, "has no custom_id")
        response = line.get("response")
        error = _error_text(line.get("error"))
        if response is None:
            yield OutputLine(line["custom_id"], None, b"", error or "no response")
            continue
        status = response.get("status_code") if isinstance(response, dict) else None
        if not isinstance(status, int):
            raise _bad(source, number, "has a response without an integer status_code")
        yield OutputLine(line["custom_id"], status, orjson.dumps(response.get("body")), error)


def _error_text(error: Any) -> str | None:
    if not error:
        return None
    if isinstance(error, dict):
        return f"{error.get('code') or 'error'}: {error.get('message') or ''}".strip()
    return str(error)


def _bad(source: str, number: int, problem: str) -> ConfigError:
    return ConfigError(
        f"{source}: line {number} {problem}; an output file has one "
        '{"custom_id", "response": {"status_code", "body"}} object per line'
    )
