"""One request attempted until it is settled: wait, pay, send once, read what came back.

Each attempt waits for the shared cool-down and the RPM/TPM buckets, charges the budget,
sends the request spelt as the endpoint wants it (:mod:`~..wire.capabilities`), and reads the
answer or the failure. The transport raises one error per failed attempt carrying its typed
facts; :func:`~geval_async.judging.wire.failures.decide`, called once here with the run's
history, says what it means (pause every worker after a 429, back off and retry, resend under
the other token parameter, store a refusal, give up, or stop the run) and :func:`apply` does
it. A retry first looks in the cache and at the request's claim: another process may have
answered it meanwhile, or taken over a claim that lapsed.
"""

from __future__ import annotations

from typing import Any

from ...errors import TransportError
from ...options import ItemOutcome, JudgeApi
from ...study.plan import JudgeRequest
from ...study.responses_api import read_usage
from ..wire.failures import Action, Decision, decide
from ..wire.refused_settings import answer_fact, ignored_logprobs
from .budget import request_cost
from .state import RunState

__all__ = ["apply", "fetch"]

# Read from its class, an enum's member is a lookup each time: read once here.
_OK, _REJECTED, _STOPPED = ItemOutcome.OK, ItemOutcome.REJECTED, ItemOutcome.STOPPED


def _settings(body: dict[str, Any]) -> dict[str, Any]:
    """What a request body set besides its messages (what a failure's decision reads)."""
    return {name: value for name, value in body.items() if name not in ("messages", "input")}


async def fetch(run: RunState, request: JudgeRequest) -> tuple[ItemOutcome, int, bool] | None:
    """Send one request until it is answered, refused or out of retries: the outcome, the
    choices received, and whether this run paid for them (False: another process answered
    it while this run waited for a retry). None when, before a retry, the claim turned out
    to be another process's (it lapsed while this run waited, and was taken over)."""
    attempts = transient = limited = 0
    limits, counters, budget = run.limits, run.counters, run.budget
    while True:
        if run.writer.holding:
            # The disk is full: nothing more is asked (and paid) until the answers received
            # are stored.
            await run.writer.room()
        # A tokens-a-minute limit counts the request as sent: one answer's max_tokens where
        # the endpoint takes one a request, not the n draws the request stands for.
        one = run.endpoint.one_request_per_draw
        asked = request.sent_tokens(one)
        if not limits.clear(asked):
            await limits.acquire(asked)
        if run.stop.is_set():
            return _STOPPED, 0, False
        if attempts:
            # A retry comes a while after the claim: another process may have answered
            # the request meanwhile, or taken over a claim that lapsed.
            entry = run.cached(request)
            if entry is not None:
                return (_OK if entry.ok else _REJECTED), entry.received, False
            if not run.claims.renew(request.key):
                return None
        cost = 0.0
        if budget is not None:
            # Each request asks for one answer from an endpoint that refuses n > 1: charged so.
            cost = request_cost(budget, request, one_choice=one)
            if not budget.charge(cost):
                run.stop.set()  # the reason is written at the end, with the final estimate
                return _STOPPED, 0, False
        attempts += 1
        counters.requests_sent += 1
        counters.in_flight += 1
        if counters.in_flight > counters.peak_in_flight:
            counters.peak_in_flight = counters.in_flight
        # The logical request (its digest is the key) is spelt for the API at the wire.
        logical = request.body
        body = run.endpoint.wire(logical, run.cache_keys[request.item.criterion.config.name])
        responses = run.endpoint.api is JudgeApi.RESPONSES
        try:
            answer = await run.transport.complete(body, responses=responses)
        except TransportError as exc:
            sent = _settings(body)
            fact = exc.fact
            run.history.saw(fact)
            if fact.status == 429:
                limited += 1
            else:
                transient += 1
            attempt = limited if fact.status == 429 else transient
            decision = decide(
                fact,
                run.history,
                n=body.get("n", 1),
                attempt=attempt,
                sent=sent,
                responses=responses,
            )
            outcome = await apply(run, decision, request, exc, (attempts, attempt), cost)
            if outcome is not None:
                return outcome, 0, True
            continue
        finally:
            counters.in_flight -= 1
            limits.replied()
        run.history.answered = True
        limits.observe(answer.headers)
        parsed = answer.parsed
        run.endpoint.observe(logical, answer)
        tokens = read_usage(parsed.get("usage"))  # either API's usage
        counters.note_usage(tokens)
        if budget is not None:
            budget.settle(tokens)
        if run.logprobs and logical.get("logprobs") and run.endpoint.logprobs is False:
            # Ignored, not refused: every answer would come without them. Not stored (a
            # samples-mode run asks under other keys).
            run.halt(ignored_logprobs(_settings(body), run.history.sampling))
            return _STOPPED, 0, False
        # Only an answer of empty choices cut off by max_tokens can be spent on reasoning:
        # the usual one, every choice holding text, needs no look (transport.py counts them).
        spent = None if answer.texts else answer_fact(parsed)
        if spent is None:
            run.history.content_seen = True
        elif (decision := decide(spent, run.history, sent=_settings(body))).action is Action.STOP:
            # Billed, but not stored: with the same settings every answer would be empty
            # again, and a rerun with a larger max_tokens asks under other keys anyway.
            run.halt(decision.message)
            return _STOPPED, 0, False
        run.store_answer(request, answer, attempts)
        return _OK, len(parsed["choices"]), True


async def apply(
    run: RunState,
    decision: Decision,
    request: JudgeRequest,
    exc: TransportError,
    counts: tuple[int, int],
    cost: float,
) -> ItemOutcome | None:
    """Carry out a failure decision; the item's outcome, or None to send again.

    ``counts``: the request's attempts so far, and its failures of this kind in a row.
    """
    attempts, attempt = counts
    action = decision.action
    if not decision.billed and run.budget is not None:
        run.budget.refund(cost)
    if action is Action.STOP:
        if exc.fact.refuses_logprobs:
            run.endpoint.logprobs = False
        run.halt(decision.message)
        return ItemOutcome.STOPPED
    if action is Action.REFUSE:
        run.store_refusal(request, exc, attempts, decision.message)
        return ItemOutcome.REJECTED
    if action is Action.GIVE_UP:
        return run.fail(request, decision.message)
    run.counters.note_retry(decision.label if action is not Action.PAUSE else "429")
    if action is Action.ONE_CHOICE:
        # The server will not return several choices: from now on every item asks for
        # one, and the rest come as further draws (stored as draw 0's answer, as from a
        # server that ignores n).
        run.endpoint.learn(action)
    elif action is Action.RESPONSES_API:
        # Sent again at once on the Responses API (the key stays the same): nothing was
        # billed, and nothing is stored for the 404.
        if run.endpoint.learn(action):
            run.history.url = run.config.judge.responses_url
            run.note(
                f"{run.config.judge.model} is served on the Responses API only: this run "
                "and later ones send their requests there"
            )
    elif action is Action.DROP_PARAMETER:
        # Sent again at once without it (a 400: nothing billed, nothing stored).
        if run.endpoint.learn(action, exc.fact.param):
            run.note(
                f"{run.config.judge.model} refuses {exc.fact.param} ({exc.fact.message}): "
                "the requests go without it from now on"
            )
    elif action is Action.TOKEN_PARAMETER:
        # Sent again at once under the name the endpoint wants (the key stays the same).
        if run.endpoint.token_parameter == exc.fact.param:
            run.endpoint.switch_token_parameter()
            run.history.token_switches += 1
    elif action is Action.PAUSE:
        run.counters.rate_limited += 1
        run.limits.observe(exc.headers)
        wait = decision.wait if decision.wait is not None else run.delay(attempt)
        run.counters.note_wait(wait, decision.message)
        run.limits.refused(request.sent_tokens(run.endpoint.one_request_per_draw), wait)
    else:
        wait = decision.wait if decision.wait is not None else run.delay(attempt)
        run.counters.note_wait(wait, f"retrying after {decision.label}")
        await run.sleep_unless_stopped(wait)
    return None
