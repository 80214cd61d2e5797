"""The Batch API's objects, files and batches, in the form OpenAI shows them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

FINAL = ("failed", "completed", "expired", "cancelled")


@dataclass
class BatchFile:
    """An uploaded file (a batch's input) or one the service wrote (its output, errors)."""

    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int = field(default_factory=lambda: int(time.time()))

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
        }


@dataclass
class Batch:
    """A batch: its lines, its progress and why it failed, shown by :meth:`view`."""

    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    lines: list[dict[str, Any]]
    started: float = field(default_factory=time.monotonic)
    created_at: int = field(default_factory=lambda: int(time.time()))
    status: str = "validating"
    problem: str | None = None  # why validation failed
    problem_line: int | None = None
    problem_code: str = "invalid_request"
    model: str = ""
    tokens: int = 0  # input tokens, as the enqueued-token limit counts them (sim.batch_queue)
    polls: int = 0  # retrievals so far (batch_polls)
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed: int = 0
    failed: int = 0
    done_share: float = 1.0  # the share of lines answered when cancelled
    echo: str = ""  # batch_echo_key: the Authorization header quoted in what the batch writes

    def view(self) -> dict[str, Any]:
        errors = None
        if self.problem is not None:
            item = {"code": self.problem_code, "message": self.problem, "param": None}
            errors = {"object": "list", "data": [{**item, "line": self.problem_line}]}
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": errors,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "request_counts": {
                "total": len(self.lines),
                "completed": self.completed,
                "failed": self.failed,
            },
            "metadata": None,
        }
