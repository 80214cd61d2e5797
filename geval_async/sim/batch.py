"""The simulated judge's Batch API: ``/v1/files`` and ``/v1/batches``, as OpenAI serves them.

A client uploads a JSONL input file (``purpose = "batch"``), creates a batch on it, polls the
batch and downloads its output and error files (and lists and deletes files), exactly as
with OpenAI (and under ``/openai/...?api-version=`` as with Azure OpenAI). The input is
validated the way OpenAI does (one JSON request per line, unique ``custom_id``, the batch's
endpoint, at most 50,000 lines); a batch that fails validation ends ``failed`` with its
reason in ``errors``. After ``batch_seconds``
a batch is done: every line is answered by the very function that answers
online requests (:func:`~geval_async.sim.answers.completion`), so a study judged by batch
rates exactly as one judged online. Settings make a share of the lines fail
(``batch_failed_lines``, with ``batch_failure_status``), a share expire (``batch_expired_lines``:
the batch ends ``expired``) or the whole batch fail validation (``batch_invalid``);
``batch_echo_key`` quotes the Authorization header in every line and error it writes.
``batch_queue_tokens`` caps each model's queued input tokens
(:mod:`~geval_async.sim.batch_queue`); ``batch_polls`` ends a batch at its n-th retrieval.
:class:`~geval_async.sim.settings.SimStats` counts batches, their lines, the requests queued
(``batch_requests``), the queued tokens and the HTTP calls.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from typing import Any

from aiohttp import web

from .answers import canonical, completion
from .batch_objects import FINAL, Batch, BatchFile
from .batch_queue import input_tokens, over_limit, queued_tokens, request_digest
from .certainty import item_digest
from .limits import error, validate
from .profiles import OPENAI_REASONING, OPENAI_RESPONSES, refusal
from .responses import chat_refusal, chat_request, response_object
from .settings import SimSettings, SimStats

MAX_LINES = 50_000
MAX_BYTES = 200 * 1024**2
ENDPOINTS = ("/v1/chat/completions", "/chat/completions", "/v1/responses", "/responses")


def _share(seed: int, *parts: Any) -> float:
    """A uniform number in [0, 1) from a hash: which lines fail does not depend on timing."""
    digest = hashlib.sha256(canonical([seed, *parts]).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class BatchService:
    """The files and batches of one simulated judge, in memory."""

    def __init__(self, settings: SimSettings, stats: SimStats) -> None:
        self.settings, self.stats = settings, stats
        self.files: dict[str, BatchFile] = {}
        self.batches: dict[str, Batch] = {}
        self._ids = 0

    def routes(self) -> list[web.RouteDef]:
        routes = []
        for root in ("/v1", "/openai"):
            routes += [
                web.post(f"{root}/files", self.upload),
                web.get(f"{root}/files", self.file_listing),
                web.get(f"{root}/files/{{id}}", self.file),
                web.delete(f"{root}/files/{{id}}", self.delete_file),
                web.get(f"{root}/files/{{id}}/content", self.content),
                web.post(f"{root}/batches", self.create),
                web.get(f"{root}/batches", self.listing),
                web.get(f"{root}/batches/{{id}}", self.retrieve),
                web.post(f"{root}/batches/{{id}}/cancel", self.cancel),
            ]
        return routes

    def _new_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids:06d}sim"

    def _refused(self, request: web.Request) -> web.Response | None:
        """Count the call; refuse a wrong key or an Azure path without an api-version."""
        self.stats.batch_calls += 1
        if request.path.startswith("/openai/") and "api-version" not in request.query:
            return error(404, "Resource not found", "invalid_request_error", "404")
        key = self.settings.api_key
        if key is not None and key not in (
            request.headers.get("api-key"),
            (request.headers.get("Authorization") or "").removeprefix("Bearer "),
        ):
            message = "Incorrect API key provided. (sim)"
            return error(401, message, "invalid_request_error", "invalid_api_key")
        return None

    # --- files ---------------------------------------------------------------------------

    async def upload(self, request: web.Request) -> web.Response:
        if (refused := self._refused(request)) is not None:
            return refused
        form = await request.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, web.FileField) or purpose != "batch":
            message = "Expected a multipart form with 'file' and purpose 'batch'."
            return error(400, message, "invalid_request_error", None)
        content = upload.file.read()
        if len(content) > MAX_BYTES:
            return error(400, "File is larger than 200 MB.", "invalid_request_error", None)
        file = BatchFile(self._new_id("file-"), upload.filename, "batch", content)
        self.files[file.id] = file
        return web.json_response(file.view())

    async def file(self, request: web.Request) -> web.Response:
        if (refused := self._refused(request)) is not None:
            return refused
        file = self.files.get(request.match_info["id"])
        return _no_file() if file is None else web.json_response(file.view())

    async def file_listing(self, request: web.Request) -> web.Response:
        """Every file (of ``purpose``, when asked), in one page, as OpenAI lists them."""
        if (refused := self._refused(request)) is not None:
            return refused
        purpose = request.query.get("purpose")
        files = [f for f in self.files.values() if purpose in (None, f.purpose)]
        return web.json_response(
            {"object": "list", "data": [f.view() for f in files], "has_more": False}
        )

    async def delete_file(self, request: web.Request) -> web.Response:
        if (refused := self._refused(request)) is not None:
            return refused
        file = self.files.pop(request.match_info["id"], None)
        if file is None:
            return _no_file()
        return web.json_response({"id": file.id, "object": "file", "deleted": True})

    async def content(self, request: web.Request) -> web.Response:
        if (refused := self._refused(request)) is not None:
            return refused
        file = self.files.get(request.match_info["id"])
        if file is None:
            return _no_file()
        return web.Response(body=file.content, content_type="application/octet-stream")

    # --- batches -------------------------------------------------------------------------

    async def create(self, request: web.Request) -> web.Response:
        if (refused := self._refused(request)) is not None:
            return refused
        try:
            params = await request.json()
        except ValueError:
            params = None
        if not isinstance(params, dict) or params.get("endpoint") not in ENDPOINTS:
            message = f"Expected input_file_id and an endpoint in {ENDPOINTS}."
            return error(400, message, "invalid_request_error", None)
        file = self.files.get(str(params.get("input_file_id")))
        if file is None:
            return error(404, "No such File object.", "invalid_request_error", None)
        batch = Batch(
            self._new_id("batch_"),
            file.id,
            params["endpoint"],
            str(params.get("completion_window", "24h")),
            [],
        )
        if self.settings.batch_echo_key:
            batch.echo = f" (headers were Authorization: {request.headers.get('Authorization')})"
        self._validate(batch, file.content)
        if batch.problem is not None:
            batch.problem += batch.echo
        if batch.problem is None:
            self._enqueue(batch)
        self.batches[batch.id] = batch
        self.stats.batches += 1
        self.stats.batch_lines += len(batch.lines)
        return web.json_response(batch.view())

    def _enqueue(self, batch: Batch) -> None:
        """Queue a valid batch, or fail it when it would take the model over the limit."""
        batch.model, batch.tokens = input_tokens(batch.lines)
        limit = self.settings.batch_queue_tokens
        queued = self.refresh().get(batch.model, 0)
        if limit is not None and queued + batch.tokens > limit:
            batch.problem, batch.problem_code = over_limit(batch.model, limit)
            return
        for line in batch.lines:
            self.stats.batch_requests[request_digest(line["body"])] += 1
        self.batches[batch.id] = batch
        self.refresh()

    def refresh(self) -> dict[str, int]:
        """Count the queued tokens per model now (into the stats, with their peak)."""
        queued = queued_tokens(
            (b.model, b.tokens) for b in self.batches.values() if not self._released(b)
        )
        self.stats.batch_queued_tokens = queued
        peak = self.stats.batch_peak_queued_tokens
        for model, tokens in queued.items():
            peak[model] = max(peak.get(model, 0), tokens)
        return queued

    def _released(self, batch: Batch) -> bool:
        """Whether a batch no longer holds queue tokens: failed, done (or due), cancelled."""
        return (
            batch.problem is not None or batch.status in (*FINAL, "cancelling") or self._due(batch)
        )

    def _due(self, batch: Batch) -> bool:
        """Whether a batch's time is up: batch_polls retrievals, else batch_seconds elapsed."""
        if self.settings.batch_polls is not None:
            return batch.polls >= self.settings.batch_polls
        return time.monotonic() - batch.started >= self.settings.batch_seconds

    def _validate(self, batch: Batch, content: bytes) -> None:
        """Parse the input file; a bad line fails the whole batch, as OpenAI's validation."""
        seen: set[str] = set()
        for number, raw in enumerate(content.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                line = None
            problem = None
            if not isinstance(line, dict) or not isinstance(line.get("body"), dict):
                problem = "Each line must be a JSON object with a 'body' object."
            elif not isinstance(line.get("custom_id"), str) or line["custom_id"] in seen:
                problem = "Each line needs a custom_id that no other line has."
            elif line.get("method") != "POST" or line.get("url") != batch.endpoint:
                problem = f"Each line must POST to the batch's endpoint {batch.endpoint}."
            if problem is not None:
                batch.problem, batch.problem_line = problem, number
                return
            seen.add(line["custom_id"])
            batch.lines.append(line)
        if len(batch.lines) > MAX_LINES:
            batch.problem = f"A batch holds at most {MAX_LINES} requests."
        elif not batch.lines:
            batch.problem = "The input file has no requests."
        elif self.settings.batch_invalid:
            batch.problem = self.settings.batch_invalid

    async def retrieve(self, request: web.Request) -> web.Response:
        if (refused := self._refused(request)) is not None:
            return refused
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return error(404, "No such Batch object.", "invalid_request_error", None)
        batch.polls += 1
        self._advance(batch)
        self.refresh()
        return web.json_response(batch.view())

    async def listing(self, request: web.Request) -> web.Response:
        if (refused := self._refused(request)) is not None:
            return refused
        newest_first = sorted(self.batches.values(), key=lambda b: b.id, reverse=True)
        after = request.query.get("after")
        if after is not None:
            newest_first = [b for b in newest_first if b.id < after]
        limit = int(request.query.get("limit", "20"))
        page = newest_first[:limit]
        for batch in page:
            self._advance(batch)
        return web.json_response(
            {
                "object": "list",
                "data": [b.view() for b in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(newest_first) > limit,
            }
        )

    async def cancel(self, request: web.Request) -> web.Response:
        if (refused := self._refused(request)) is not None:
            return refused
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return error(404, "No such Batch object.", "invalid_request_error", None)
        self._advance(batch)
        if batch.status in FINAL:
            message = f"Cannot cancel a batch that is {batch.status}."
            return error(409, message, "invalid_request_error", None)
        seconds = self.settings.batch_seconds
        elapsed = time.monotonic() - batch.started
        batch.done_share = min(1.0, elapsed / seconds) if seconds > 0 else 1.0
        batch.status = "cancelling"
        return web.json_response(batch.view())

    # --- progress ------------------------------------------------------------------------

    def _advance(self, batch: Batch) -> None:
        """Move a batch on by the clock: validating -> in_progress -> completed (or else)."""
        if batch.status in FINAL:
            return
        if batch.problem is not None:
            batch.status = "failed"
            return
        if batch.status == "cancelling":
            self._finish(batch, "cancelled", answered=int(len(batch.lines) * batch.done_share))
            return
        if not self._due(batch):
            polls, seconds = self.settings.batch_polls, self.settings.batch_seconds
            elapsed = time.monotonic() - batch.started
            share = batch.polls / polls if polls else elapsed / seconds
            batch.status = "in_progress"
            batch.completed = int(len(batch.lines) * share)
            return
        expiring = self.settings.batch_expired_lines > 0
        self._finish(batch, "expired" if expiring else "completed", answered=len(batch.lines))

    def _finish(self, batch: Batch, status: str, *, answered: int) -> None:
        """Answer the lines, write the output and error files, and close the batch."""
        s = self.settings
        output, errors = [], []
        batch.completed = batch.failed = 0
        for number, line in enumerate(batch.lines):
            custom_id = line["custom_id"]
            expired = _share(s.seed, "expire", custom_id) < s.batch_expired_lines
            if number >= answered or expired:
                # Unanswered: in the error file with batch_expired (or _cancelled).
                code = "batch_cancelled" if status == "cancelled" else "batch_expired"
                message = f"This request was not executed before the batch ended ({code})."
                message += batch.echo
                errors.append(
                    {
                        "id": f"batch_req_{custom_id[-12:]}",
                        "custom_id": custom_id,
                        "response": None,
                        "error": {"code": code, "message": message},
                    }
                )
                continue
            status_code, body = self._answer(line["body"], batch.endpoint, custom_id)
            if batch.echo and isinstance(body, dict):
                body = _echoed(body, batch.echo)
            entry = {
                "id": f"batch_req_{custom_id[-12:]}",
                "custom_id": custom_id,
                "response": {
                    "status_code": status_code,
                    "request_id": f"req_{custom_id[-12:]}",
                    "body": body,
                },
                "error": None,
            }
            if status_code == 200:
                batch.completed += 1
                output.append(entry)
            else:
                batch.failed += 1
                errors.append(entry)
        batch.output_file_id = self._store(output, f"{batch.id}_output.jsonl")
        batch.error_file_id = self._store(errors, f"{batch.id}_error.jsonl")
        batch.status = status

    def _answer(self, body: dict[str, Any], endpoint: str, custom_id: str) -> tuple[int, Any]:
        s = self.settings
        asked: dict[str, Any] | None = None  # a Responses line, as it came (sim.responses)
        if endpoint.endswith("/responses"):
            chat, refused_line = chat_request(body, s)
            if chat is None:
                return refused_line  # type: ignore[no-any-return]
            asked, body = body, chat
        else:
            refused_chat = chat_refusal(body, s)
            if refused_chat is not None:
                return refused_chat
        problem = validate(body, s.context_window, s.content_filter_marker)
        if problem is not None:
            message, code = problem
            return 400, _error_body(message, "invalid_request_error", code)
        refused = None if asked is not None else refusal(body, s)
        if refused is not None:
            return refused
        if _share(s.seed, "fail", custom_id) < s.batch_failed_lines:
            status = s.batch_failure_status
            kind = "server_error" if status >= 500 else "invalid_request_error"
            return status, _error_body(f"The request failed (simulated {status}).", kind, None)
        model = str(body.get("model") or "sim-judge")
        answer_id = f"chatcmpl-sim-batch-{custom_id[-16:]}"
        settings = s
        if s.profile == OPENAI_RESPONSES:
            settings = dataclasses.replace(s, profile=OPENAI_REASONING)
        # A Responses line is one draw of identical requests: each line samples anew.
        repeat = int(hashlib.sha256(custom_id.encode()).hexdigest()[:8], 16) if asked else 0
        answer, judged = completion(body, settings, model, answer_id, repeat, bool(asked) or None)
        if judged.refusals:
            self.stats.faults["invalid_answer"] += judged.refusals
        self.stats.samples += len(answer["choices"])
        self.stats.item_draws[item_digest(body["messages"])] += len(answer["choices"])
        self.stats.cache_keys[str((asked or body).get("prompt_cache_key") or "")] += 1
        digest = request_digest(asked if asked is not None else body)
        self.stats.ratings.setdefault(digest, []).extend(judged.ratings)
        if judged.intended is not None:
            self.stats.intended[digest] = judged.intended
        self.stats.steps += judged.steps
        if judged.pair is not None:
            self.stats.verdicts.append((*judged.pair, judged.verdicts))
        if asked is not None:
            return 200, response_object(answer, asked, judged.thoughts)
        return 200, answer

    def _store(self, lines: list[dict[str, Any]], filename: str) -> str | None:
        if not lines:
            return None
        content = "".join(json.dumps(line) + "\n" for line in lines).encode()
        file = BatchFile(self._new_id("file-"), filename, "batch_output", content)
        self.files[file.id] = file
        return file.id


def _error_body(message: str, kind: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _echoed(body: dict[str, Any], echo: str) -> dict[str, Any]:
    """``body`` quoting the request's headers (a copy: a refusal's body may be shared)."""
    error = body.get("error")
    if isinstance(error, dict):
        return {**body, "error": {**error, "message": f"{error.get('message')}{echo}"}}
    return {**body, "system_fingerprint": echo.strip(" ()")}


def _no_file() -> web.Response:
    return error(404, "No such File object.", "invalid_request_error", None)
