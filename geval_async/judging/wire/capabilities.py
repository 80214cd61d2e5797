"""What an endpoint accepts, learned from its answers and remembered beside the cache.

Per base URL and model: which name it wants the completion budget under (``max_tokens`` or
``max_completion_tokens``), whether it refuses ``n`` > 1 and the most choices it has returned
in one answer, whether it gives logprobs, whether it returns reasoning, whether the model is
served on the Responses API only (chat completions answered 404 "only supported in
v1/responses": every later request of this run and of later runs goes there), and which
optional parameters it refuses (a reasoning summary, ``prompt_cache_key``). Nothing is guessed from
a model's name (names change with every snapshot): a fact is written when an answer shows it,
and a fact that stops being true is corrected by the next answer that says otherwise (a stale
token parameter costs one failed request, then the run resends under the other name).

The facts shape only the wire: :meth:`Capabilities.wire` spells the body the plan built (whose
digest is the cache key) the way the endpoint wants it (on the Responses API, as
:func:`~geval_async.study.responses_api.responses_body` spells it, one request a draw), so a
wire spelling never changes a key.
They live in ``endpoints.json`` in the cache folder, outside the answer store, and hold no API
key (the URL and model only).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from ...errors import CacheError
from ...options import JudgeApi
from ...study.responses_api import responses_body
from ..store.folder import RESUME
from .failures import Action
from .refused_settings import TOKEN_PARAMETERS, reasoning_tokens

if TYPE_CHECKING:
    from ...study.config import JudgeConfig
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
    # Chat completions answered that the model lives on the Responses API only.
    responses_only: bool = False
    # The optional parameters the endpoint refused (a reasoning summary): sent without them.
    dropped: list[str] = field(default_factory=list)
    # [judge] api = "responses": the config's choice, not a learned fact (never saved).
    configured_responses: bool = field(default=False, repr=False)
    # [judge] store: whether the Responses API may keep the answers (the config's).
    store: bool = field(default=False, repr=False)

    @property
    def api(self) -> JudgeApi:
        """The API the requests go to: the Responses API when the config or the endpoint
        says so."""
        if self.responses_only or self.configured_responses:
            return JudgeApi.RESPONSES
        return JudgeApi.CHAT

    @property
    def one_request_per_draw(self) -> bool:
        """Whether each request asks for one answer (n refused, or the Responses API, which
        takes no n): the plan's further draws then come as requests of their own."""
        return self.one_choice or self.api is JudgeApi.RESPONSES

    def wire(self, body: dict[str, Any], cache_key: str | None = None) -> dict[str, Any]:
        """``body`` as this endpoint wants it sent: ``body`` itself when it is already (the
        usual endpoint), else a copy spelt anew. ``cache_key``: the ``prompt_cache_key`` of
        the request's criterion (:func:`~geval_async.study.prompt_cache.prompt_cache_key`),
        added unless the endpoint refused it: a wire setting, as the token parameter's name,
        never part of the request's key."""
        if cache_key is not None and "prompt_cache_key" in self.dropped:
            cache_key = None
        if self.api is JudgeApi.RESPONSES:
            sent = responses_body(body, store=self.store, dropped=self.dropped)
            if cache_key is not None:
                sent["prompt_cache_key"] = cache_key
            return sent
        if self.token_parameter == "max_tokens" and not self.one_choice and cache_key is None:
            return body
        sent = dict(body)
        if cache_key is not None:
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
        ``RESPONSES_API``: the model lives there. ``DROP_PARAMETER``: it refused the optional
        parameter ``refused_name``, sent no more.
        """
        if action is Action.ONE_CHOICE:
            self.one_choice = True
            return True
        if action is Action.RESPONSES_API:
            learned = not self.responses_only
            self.responses_only = True
            return learned
        if action is Action.DROP_PARAMETER and refused_name and refused_name not in self.dropped:
            self.dropped.append(refused_name)
            return True
        if action is Action.TOKEN_PARAMETER and self.token_parameter == refused_name:
            self.switch_token_parameter()
            return True
        return False

    def observe(self, sent: Mapping[str, Any], answer: JudgeAnswer) -> None:
        """Learn from a 200 answer to ``sent``."""
        choices = answer.parsed["choices"]  # a list of dicts, each with a message (transport.py)
        if len(choices) > self.max_n:
            self.max_n = len(choices)
        if sent.get("logprobs") or sent.get("include"):
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
        logprobs"; "gpt-5-codex at api.openai.com: Responses API only (learned: chat
        completions refuse it), one request a draw"."""
        parts = [self.token_parameter]
        if self.api is JudgeApi.RESPONSES:
            learned = " only (learned: chat completions refuse it)" if self.responses_only else ""
            parts = [f"Responses API{learned}", "one request a draw"]
            parts += [f"no {name}" for name in self.dropped]
        elif self.one_choice:
            parts.append("n = 1 only")
        elif self.max_n:
            parts.append(f"n up to {self.max_n}")
        if self.api is JudgeApi.CHAT:
            parts += [f"no {name}" for name in self.dropped]
        if self.logprobs is not None:
            parts.append("logprobs" if self.logprobs else "no logprobs")
        if self.reasoning:
            parts.append("returns reasoning")
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


def load_capabilities(
    cache_dir: Path,
    url: str,
    model: str,
    *,
    api: JudgeApi = JudgeApi.CHAT,
    store: bool = False,
) -> Capabilities:
    """What the endpoint showed in earlier runs (all unknown when nothing was learned), with
    the config's ``[judge] api`` and ``store``."""
    known = _read(cache_dir).get(_key(url, model))
    caps = _facts(known) if isinstance(known, dict) else Capabilities()
    caps.configured_responses = api is JudgeApi.RESPONSES
    caps.store = store
    return caps


def _facts(known: Mapping[str, Any]) -> Capabilities:
    caps = Capabilities(**{k: v for k, v in known.items() if k in _LEARNED})
    if caps.token_parameter not in TOKEN_PARAMETERS:
        caps.token_parameter = "max_tokens"
    return caps


def save_capabilities(cache_dir: Path, url: str, model: str, caps: Capabilities) -> None:
    """Remember ``caps`` for the endpoint (the file is replaced whole: never half-written)."""
    table = _read(cache_dir)
    table[_key(url, model)] = {k: v for k, v in asdict(caps).items() if k in _LEARNED}
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


def endpoint_summaries(cache_dir: Path, judges: Iterable[JudgeConfig] = ()) -> list[str]:
    """A line per endpoint remembered in the cache folder, for ``status``; ``judges``: the
    config's, whose ``[judge] api`` the lines show too."""
    configured = {_key(j.url, j.model) for j in judges if j.api is JudgeApi.RESPONSES}
    lines = []
    for key, known in sorted(_read(cache_dir).items()):
        model, _, url = key.partition(" ")
        if isinstance(known, dict):
            caps = _facts(known)
            caps.configured_responses = key in configured
            lines.append(caps.summary(url, model))
    return lines


# The facts an endpoint's answers taught, as endpoints.json keeps them (not the config's).
_LEARNED = frozenset(f.name for f in fields(Capabilities)) - {"configured_responses", "store"}
