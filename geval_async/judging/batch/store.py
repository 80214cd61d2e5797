"""Batch answers into the cache: each output line stored as the entry an online answer makes.

A line's ``custom_id`` is a cache key of the study's plan; the line's status and body are read
by the same function that reads an online response (:func:`~geval_async.judging.wire.transport.
read_response`) and stored by the same functions (:mod:`geval_async.judging.run.entries`), so
``score``, ``report``, ``meta``, a rerun and ``status`` cannot tell the two apart; an entry
records ``simulated`` like an online one, and another server's entry gives way to the line's
answer (:mod:`geval_async.judging.store.origin`). A refusal no retry fixes is stored as a refusal;
a transient failure and a request that never ran (expired, cancelled) are not stored: the item
stays missing, for another batch or an online run. A line refused for a setting every request
carries is decided as online too (:mod:`geval_async.judging.wire.refused_settings`): the budget's
name, n = 1 or the Responses API is learned into the endpoint's capabilities and the line sent
again in the next batch; any other such setting stops the run with the online run's line, and
nothing is stored for it.
The lines of one pass are written in one transaction, as the online writer does
(:mod:`geval_async.judging.run.writer`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field

from ...errors import TransportError
from ...study.config import EvalConfig
from ...study.plan import JudgeRequest, Study, chunk_request
from ..run.entries import answer_entry, refusal_entry
from ..store.cache import CachedResponse, JudgeCache
from ..store.coverage import item_states
from ..store.origin import EntrySource
from ..wire.capabilities import Capabilities
from ..wire.failures import Action, Decision, History, decide
from ..wire.refused_settings import TOKEN_PARAMETERS, study_sampling
from .files import OutputLine

_SIMULATED = {"x-geval-simulated": "true"}


@dataclass
class Stored:
    """What storing an output file did, line by line."""

    answered: int = 0
    refused: int = 0
    missing: int = 0  # transient failures and requests that never ran: not stored
    already: int = 0  # the cache held an answer already
    requeued: int = 0  # in a batch refused for the queue limit: in line for the next submit
    # Refused for the budget's name or n > 1, now learned: sent again in the next batch.
    resend: int = 0
    stopped: str | None = None  # a setting every request gets wrong: the line that stops the run
    unknown: list[str] = field(default_factory=list)  # custom_ids of no request of the study
    reasons: Counter[str] = field(default_factory=Counter)  # why lines were left missing

    def add(self, other: Stored) -> None:
        self.answered += other.answered
        self.refused += other.refused
        self.missing += other.missing
        self.already += other.already
        self.requeued += other.requeued
        self.resend += other.resend
        self.stopped = self.stopped or other.stopped
        self.unknown += other.unknown
        self.reasons.update(other.reasons)


def study_requests(
    study: Study, cache: EntrySource, *, one_choice: bool = False
) -> Iterator[JudgeRequest]:
    """Every request of the plan the cache can name: each item's chunks in draw order, up to
    and including the first one the cache lacks (with ``one_choice``, and every one after it:
    :func:`one_choice_chunks`)."""
    for state in item_states(study, cache):
        yield from state.requests
        if one_choice and state.missing:
            yield from one_choice_chunks(state.missing[-1], study.config)[1:]


def one_choice_chunks(request: JudgeRequest, config: EvalConfig) -> list[JudgeRequest]:
    """The chunk ``request`` and every chunk of its item after it, for an endpoint that gives
    one choice a request (n = 1, :class:`~..capabilities.Capabilities`): each answer holds one
    choice, so the next chunk starts one draw later, and one batch can ask for them all (an
    online run sends them one after another)."""
    total = request.draw + request.n
    return [
        request,
        *(chunk_request(request, start, config) for start in range(request.draw + 1, total)),
    ]


def requests_by_key(
    study: Study, cache: EntrySource, wanted: Collection[str], *, one_choice: bool = False
) -> dict[str, JudgeRequest]:
    """The requests of the study whose cache keys are in ``wanted`` (``one_choice``: as
    :func:`study_requests`).

    A request holds no rendered messages (they are made when asked for), so 50,000 requests
    take a few MB.
    """
    requests = study_requests(study, cache, one_choice=one_choice)
    return {r.key: r for r in requests if r.key in wanted}


def store_lines(
    lines: Iterable[OutputLine],
    requests: dict[str, JudgeRequest],
    cache: JudgeCache,
    *,
    url: str,
    simulated: bool = False,
    capabilities: Capabilities | None = None,
    judge: str = "[judge]",
    sampling: Callable[[str], str] = study_sampling,
) -> Stored:
    """Store each line under its ``custom_id``; lines of unknown ids are counted, not stored.

    Args:
        lines: parsed output (or error) file lines.
        requests: the study's requests by cache key (:func:`requests_by_key`).
        cache: an open, writable cache.
        url: the endpoint named in error messages.
        simulated: the lines came from geval-async's simulated judge.
        capabilities: what the endpoint accepts, as the lines were sent with it; a refusal
            that teaches it something (the budget's name, n = 1) updates it.
        judge: the table that sets the judge, as a refusal's line names it
            (:attr:`~geval_async.study.settings.EvalConfig.judge_entry`).
        sampling: the table that sets a sampling key, likewise
            (:meth:`~geval_async.study.settings.EvalConfig.sampling_entry`).
    """
    from ..wire.transport import read_response

    stored = Stored()
    headers = _SIMULATED if simulated else {}
    ready: dict[str, tuple[CachedResponse, str]] = {}
    history = History(url, "the API key variable", judge, sampling)
    for line in lines:
        request = requests.get(line.custom_id)
        if request is None:
            stored.unknown.append(line.custom_id)
            continue
        if line.status is None:
            stored.missing += 1
            stored.reasons[(line.error or "no response").split(":")[0]] += 1
            continue
        try:
            answer = read_response(line.status, line.body, headers)
        except TransportError as exc:
            # The online run's rule: what is refused for good is stored as refused; what a
            # retry or another setting could fix stays missing, for the next submit or run.
            decision = _decide(exc, request, history, capabilities)
            if decision.action is Action.REFUSE:
                ready[request.key] = refusal_entry(request, exc, 1, decision.message), "refused"
            elif decision.action in (
                Action.TOKEN_PARAMETER,
                Action.ONE_CHOICE,
                Action.RESPONSES_API,
                Action.DROP_PARAMETER,
            ):
                stored.missing += 1
                stored.resend += 1
                stored.reasons[decision.label] += 1
            elif decision.action is Action.STOP:
                stored.missing += 1
                stored.stopped = stored.stopped or decision.message
                stored.reasons[decision.label] += 1
            else:
                stored.missing += 1
                stored.reasons[f"HTTP {exc.status}" if exc.status else str(exc)] += 1
        else:
            ready[request.key] = answer_entry(request, answer, attempts=1), "answered"
    puts: list[tuple[CachedResponse, bool]] = []
    counted: list[str] = []
    for key, (entry, outcome) in ready.items():
        existing = cache.get(key)
        # The other server's entry gives way, as in an online run (see ..origin).
        other = existing is not None and existing.simulated != entry.simulated
        if existing is not None and existing.ok and not other:
            stored.already += 1
            continue
        # A stored refusal gives way to an answer (as --retry-failed would).
        puts.append((entry, existing is not None and (outcome == "answered" or other)))
        counted.append(outcome)
    # Heads read whole by an earlier walk (a submit's) would go stale: the next walk reads anew.
    cache.forget_heads()
    for outcome, put in zip(counted, cache.put_many(puts), strict=True):
        if put:
            setattr(stored, outcome, getattr(stored, outcome) + 1)
        else:
            stored.already += 1  # another process stored it first
    return stored


def _decide(
    exc: TransportError, request: JudgeRequest, history: History, capabilities: Capabilities | None
) -> Decision:
    """The online run's decision on a refused line; what it teaches about the endpoint goes
    into ``capabilities``.

    The line's body is the logical one under the budget's name the refusal names (or the one
    the endpoint is known to want): a batch submitted before a fact was learned holds lines
    sent the old way, so the capabilities of now do not say how a line was sent.
    """
    known = capabilities or Capabilities()
    named = exc.fact.param if exc.fact.param in TOKEN_PARAMETERS else known.token_parameter
    sent = {name: value for name, value in request.body.items() if name != "messages"}
    if named != "max_tokens" and "max_tokens" in sent:
        sent[named] = sent.pop("max_tokens")
    decision = decide(exc.fact, history, n=sent.get("n", 1), sent=sent)
    if capabilities is not None:
        dropped = decision.action is Action.DROP_PARAMETER
        capabilities.learn(decision.action, exc.fact.param if dropped else named)
    return decision
