"""Asking the judge for the evaluation steps, once per criterion, before any item is sent.

A criterion given by definition with ``steps = "generate"`` needs its steps before a single
item of it can be rendered (they are part of every item's prompt, and so of every item's key).
:func:`generate_steps` sends the missing steps requests one after the other (a study has a
handful), with the run's retry rules (:func:`~geval_async.judging.wire.failures.decide`) and under
its ``--max-cost`` budget, and stores each answer in the cache like any other, so every later
run, shard and record reads the same steps (:mod:`geval_async.judging.store.stored_steps`).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING

from ...errors import RunStopped, TransportError
from ...options import EntryStatus, JudgeApi
from ...study.evaluation_steps import StepsRequest, answer_steps
from ...study.plan import Study
from ...study.pricing import Budget, SharedCap
from ..store.claims import Claims
from ..store.origin import ServerEntries
from ..store.stored import CachedResponse
from ..store.stored_steps import read_steps, require_steps
from ..wire.capabilities import Capabilities, load_capabilities, save_capabilities
from ..wire.failures import Action, FailureFact, History, decide
from .budget import record_spend, run_budget

if TYPE_CHECKING:
    from ..wire.transport import JudgeAnswer, Transport

__all__ = ["generate_steps"]

_CLAIM_POLL = 0.2  # how often a process waits for steps another one is asking for (s)


async def generate_steps(
    study: Study, entries: ServerEntries, api_key: str | None, *, cap: SharedCap | None = None
) -> tuple[Study, int]:
    """The study with every generated step in place, and how many steps requests were sent.

    Steps the cache holds are read, not asked again; steps another process is asking for
    (a shard started at the same moment) are waited for, not asked twice. A run by batch
    calls it too: the steps go online first, since every item's prompt holds them. ``cap``:
    a panel's ``--max-cost`` cap, shared with its other judges.

    Raises:
        RunStopped: a steps request was refused, ran out of retries, or would pass the
            ``--max-cost`` cap: no item of the criterion can be judged without its steps.
    """
    study, missing = read_steps(study, entries)
    if not missing:
        return study, 0
    from ..wire.transport import Transport

    config = study.config
    budget = run_budget(config, entries.cache.directory, shared=cap)
    judge = config.judge
    history = History(
        judge.url,
        judge.api_key_env,
        config.judge_entry,
        config.sampling_entry,
        retries=config.limits.retries,
    )
    # The steps go where the items go: the Responses API when the config or the endpoint's
    # learned facts say so (a switch learned here is kept for the items' requests).
    endpoint = load_capabilities(
        entries.cache.directory, judge.url, judge.model, api=judge.api, store=judge.store
    )
    sent = 0
    try:
        async with Transport(
            config.judge, api_key, concurrency=1, timeout=config.limits.timeout
        ) as transport:
            with Claims(entries.cache.directory, config.limits.timeout + 30.0) as claims:
                for request in missing:
                    if await _claimed(claims, entries, request.key):
                        try:
                            await _send(
                                transport,
                                request,
                                entries,
                                (history, claims, endpoint),
                                study,
                                budget,
                            )
                            sent += 1
                        finally:
                            claims.release(request.key)
    finally:
        record_spend(entries.cache.directory, config, budget)
        if endpoint.responses_only or endpoint.dropped:
            save_capabilities(entries.cache.directory, judge.url, judge.model, endpoint)
    return require_steps(study, entries), sent


async def _claimed(claims: Claims, entries: ServerEntries, key: str) -> bool:
    """Claim a steps request, or wait while another process (a shard starting at the same
    moment) asks for it: False once its answer is in the cache."""
    while not claims.claim(key):
        await asyncio.sleep(_CLAIM_POLL)
        if entries.get(key) is not None:
            return False
    # The holder may have stored the answer just before it let go of the claim.
    entry = entries.get(key)
    if entry is not None and entry.ok:
        claims.release(key)
        return False
    return True


async def _send(
    transport: Transport,
    request: StepsRequest,
    entries: ServerEntries,
    run: tuple[History, Claims, Capabilities],
    study: Study,
    budget: Budget | None,
) -> None:
    """Send one steps request (charged to the budget first) and store its answer."""
    cost = 0.0
    if budget is not None:
        completion = request.max_completion_tokens
        cost = budget.cost(request.est_tokens - completion, completion)
        if not budget.charge(cost):
            raise RunStopped(
                f"criterion {request.criterion!r}: the steps request is not sent: "
                + budget.reached()
            )
    answer, attempts = await _ask(transport, request, run, study)
    if any(choice.get("finish_reason") == "length" for choice in answer.choices):
        raise RunStopped(
            f"criterion {request.criterion!r}: the judge's evaluation steps were cut off at "
            f"steps_max_tokens = {request.max_completion_tokens}: raise it in the config"
        )
    if answer_steps(answer.body.decode("utf-8", "replace")) is None:
        raise RunStopped(
            f"criterion {request.criterion!r}: the judge answered the steps "
            "request with no text; run again to ask again"
        )
    _store(entries, request, answer, attempts)


async def _ask(
    transport: Transport,
    request: StepsRequest,
    run: tuple[History, Claims, Capabilities],
    study: Study,
) -> tuple[JudgeAnswer, int]:
    history, claims, endpoint = run
    limits = study.config.limits
    attempts = 0
    while True:
        attempts += 1
        if attempts > 1:
            claims.renew(request.key)  # the claim outlives each attempt, not every retry
        responses = endpoint.api is JudgeApi.RESPONSES
        body = endpoint.wire(request.body) if responses else request.body
        try:
            answer = await transport.complete(body, responses=responses)
        except TransportError as exc:
            fact = exc.fact if isinstance(exc.fact, FailureFact) else FailureFact()
            history.saw(fact)
            decision = decide(fact, history, n=1, attempt=attempts, responses=responses)
            if decision.action in (Action.RESPONSES_API, Action.DROP_PARAMETER):
                endpoint.learn(decision.action, fact.param)  # sent again at once, spelt anew
                continue
            if decision.action in (Action.STOP, Action.REFUSE, Action.GIVE_UP):
                raise RunStopped(
                    f"criterion {request.criterion!r}: the judge did not write its evaluation "
                    f"steps ({decision.message}); no item of it can be judged without them"
                ) from None
            cap = min(limits.max_backoff, limits.backoff * 2 ** (attempts - 1))
            wait = decision.wait if decision.wait is not None else random.uniform(cap / 2, cap)
            await asyncio.sleep(wait)
            continue
        history.answered = True
        return answer, attempts


def _store(
    entries: ServerEntries, request: StepsRequest, answer: JudgeAnswer, attempts: int
) -> None:
    usage = answer.parsed.get("usage")
    entry = CachedResponse(
        key=request.key,
        status=EntryStatus.OK,
        http_status=answer.status,
        body=answer.body.decode("utf-8", "replace"),
        time=time.time(),
        latency_ms=round(answer.latency_ms, 3),
        attempts=attempts,
        n=1,
        draw=0,
        model=request.model,
        record_id="",
        criterion=request.criterion,
        received=len(answer.choices),
        usage=usage if isinstance(usage, dict) else None,
        simulated=answer.simulated,
    )
    # Another shard may have stored them a moment ago: every reader then reads the first.
    entries.cache.put(entry, overwrite=request.key in entries.hidden)
