"""What an endpoint accepts, learned from its answers and remembered beside the cache.

Per base URL and model: which name it wants the completion budget under (``max_tokens`` or
``max_completion_tokens``), whether it refuses ``n`` > 1 and the most choices it has returned
in one answer, whether it gives logprobs, whether it returns reasoning. Nothing is guessed from
a model's name (names change with every snapshot): a fact is written when an answer shows it,
and a fact that stops being true is corrected by the next answer that says otherwise (a stale
token parameter costs one failed request, then the run resends under the other name).

The facts shape only the wire: :meth:`Capabilities.wire` spells the body the plan built (whose
digest is the cache key) the way the endpoint wants it, so a wire spelling never changes a key.
They live in ``endpoints.json`` in the cache folder, outside the answer store, and hold no API
key (the URL and model only).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from ...errors import CacheError
from ..store.folder import RESUME
from .failures import Action
from .refused_settings import TOKEN_PARAMETERS, reasoning_tokens

if TYPE_CHECKING:
    from .transport import JudgeAnswer

__all__ = ["ENDPOINTS", "Capabilities", "load_capabilities", "save_capabilities"]

ENDPOINTS = "endpoints.json"


@dataclass
class Capabilities:
    """What one endpoint (base URL and model) has shown it accepts."""

    token_parameter: str = "max_tokens"
    one_choice: bool = False  # it refused n > 1: every request asks for one choice
    max_n: int = 0  # the most choices one answer has held (0: not seen)
    logprobs: bool | None = None  # None: not asked yet
    reasoning: bool | None = None
    # False: it refused ``prompt_cache_key`` (unsupported_parameter), which is then left out.
    prompt_cache_key: bool | None = None

    def wire(self, body: dict[str, Any], cache_key: str | None = None) -> dict[str, Any]:
        """``body`` as this endpoint wants it sent: ``body`` itself when it is already (the
        usual endpoint), else a copy spelt anew. ``cache_key``: the ``prompt_cache_key`` of
        the request's criterion (:func:`~geval_async.study.prompt_cache.prompt_cache_key`),
        added unless the endpoint refused it; a wire setting, as the token parameter's name,
        that is never part of the request's key."""
        send_key = cache_key is not None and self.prompt_cache_key is not False
        if self.token_parameter == "max_tokens" and not self.one_choice and not send_key:
            return body
        sent = dict(body)
        if send_key:
            sent["prompt_cache_key"] = cache_key
        if self.token_parameter != "max_tokens" and "max_tokens" in sent:
            sent[self.token_parameter] = sent.pop("max_tokens")
        if self.one_choice and sent.get("n", 1) > 1:
            sent["n"] = 1
        return sent

    def switch_token_parameter(self) -> None:
        """The endpoint refused the name sent: use the other one from now on."""
        self.token_parameter = TOKEN_PARAMETERS[1 - TOKEN_PARAMETERS.index(self.token_parameter)]

    def learn(self, action: Action, refused_name: str | None = None) -> bool:
        """Learn what the decision on a refused request teaches, online or by batch alike;
        whether it taught anything.

        ``ONE_CHOICE``: the endpoint refuses n > 1, so every request from now on asks for one
        choice (the rest come as further draws). ``TOKEN_PARAMETER``: it refused the budget
        under ``refused_name``; when that is the name it was thought to want, the other one.
        ``DROP_SETTING``: it refused ``prompt_cache_key`` (``refused_name``), which is left out
        from now on.
        """
        if action is Action.ONE_CHOICE:
            self.one_choice = True
            return True
        if action is Action.TOKEN_PARAMETER and self.token_parameter == refused_name:
            self.switch_token_parameter()
            return True
        if action is Action.DROP_SETTING and refused_name == "prompt_cache_key":
            self.prompt_cache_key = False
            return True
        return False

    def observe(self, sent: Mapping[str, Any], answer: JudgeAnswer) -> None:
        """Learn from a 200 answer to ``sent``."""
        choices = answer.parsed["choices"]  # a list of dicts, each with a message (transport.py)
        if len(choices) > self.max_n:
            self.max_n = len(choices)
        if sent.get("logprobs"):
            self.logprobs = any(isinstance(c.get("logprobs"), dict) for c in choices)
        if self.reasoning:
            return  # shown once is enough: nothing below could take it back
        # The messages were looked into for the reasoning keys as the answer was checked
        # (transport.py's one pass over its choices): searching the raw body for them was 4.4
        # us of the loop's CPU a 2 kB answer, a pass of its own here about 1.
        if answer.reasoned or reasoning_tokens(answer.parsed) > 0:
            self.reasoning = True
        elif self.reasoning is None:
            self.reasoning = False

    def summary(self, url: str, model: str) -> str:
        """One line: "gpt-5-mini at api.openai.com: max_completion_tokens, n up to 8, no
        logprobs"."""
        parts = [self.token_parameter]
        if self.one_choice:
            parts.append("n = 1 only")
        elif self.max_n:
            parts.append(f"n up to {self.max_n}")
        if self.logprobs is not None:
            parts.append("logprobs" if self.logprobs else "no logprobs")
        if self.reasoning:
            parts.append("returns reasoning")
        if self.prompt_cache_key is False:
            parts.append("no prompt_cache_key")
        return f"{model} at {urlsplit(url).netloc or url}: {', '.join(parts)}"


def _key(url: str, model: str) -> str:
    return f"{model} {url}"


def _read(cache_dir: Path) -> dict[str, Any]:
    try:
        table = orjson.loads((Path(cache_dir) / ENDPOINTS).read_bytes())
    except FileNotFoundError:
        return {}
    except orjson.JSONDecodeError:
        return {}  # a file cut by a crash: the facts are learned again
    except OSError as exc:
        raise CacheError(f"{cache_dir}: cannot read {ENDPOINTS} ({exc.strerror})") from exc
    return table if isinstance(table, dict) else {}


def load_capabilities(cache_dir: Path, url: str, model: str) -> Capabilities:
    """What the endpoint showed in earlier runs (all unknown when nothing was learned)."""
    known = _read(cache_dir).get(_key(url, model))
    if not isinstance(known, dict):
        return Capabilities()
    names = {f.name for f in fields(Capabilities)}
    caps = Capabilities(**{k: v for k, v in known.items() if k in names})
    if caps.token_parameter not in TOKEN_PARAMETERS:
        caps.token_parameter = "max_tokens"
    return caps


def save_capabilities(cache_dir: Path, url: str, model: str, caps: Capabilities) -> None:
    """Remember ``caps`` for the endpoint (the file is replaced whole: never half-written)."""
    table = _read(cache_dir)
    table[_key(url, model)] = asdict(caps)
    # Created as spend.jsonl is (0o666 less the umask): colleagues sharing the cache read it.
    temporary = Path(cache_dir) / f".endpoints-{os.getpid()}-{uuid.uuid4().hex}"
    try:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(handle, "wb") as out:
            out.write(orjson.dumps(table, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        os.replace(temporary, Path(cache_dir) / ENDPOINTS)
    except OSError as exc:
        with contextlib.suppress(OSError):  # nothing half-written left behind (a full disk)
            temporary.unlink()
        raise CacheError(
            f"{cache_dir}: cannot write {ENDPOINTS} ({exc.strerror}); {RESUME}"
        ) from exc


def endpoint_summaries(cache_dir: Path) -> list[str]:
    """A line per endpoint remembered in the cache folder, for ``status``."""
    lines = []
    for key, known in sorted(_read(cache_dir).items()):
        model, _, url = key.partition(" ")
        if isinstance(known, dict):
            names = {f.name for f in fields(Capabilities)}
            caps = Capabilities(**{k: v for k, v in known.items() if k in names})
            lines.append(caps.summary(url, model))
    return lines
