"""``run --dry-run``: what a run would send, counted by the run's own rules, sending nothing.

The run first asks which judge is at the endpoint (:mod:`.probe`, one GET that carries no key
and asks the judge nothing) and reads the cache as that server sees it (:mod:`.origin`); the
estimate does the same and counts with the run's rule of what is left (:mod:`.left`): against a
real endpoint the simulated judge's answers are to send, a refused item is not (unless
``--retry-failed``), an item a live batch job is asking for is not either. So the estimate's
requests are the requests the run then sends (more only when the server ignores ``n``). An
endpoint earlier runs learned refuses ``n`` > 1 (:mod:`.capabilities`) is counted as the run
sends to it: a request of n answers as n requests of one, each paying for the prompt.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from ...options import JudgeApi
from ...study.evaluation_steps import with_estimated_steps
from ...study.plan import Study
from ..store.cache import JudgeCache
from ..store.left import tally_left
from ..store.origin import ServerEntries
from ..store.stored_steps import read_steps
from ..wire.capabilities import load_capabilities
from ..wire.limits import check_request_fits
from ..wire.probe import server_is_simulated

__all__ = ["RunEstimate", "estimate_run"]


@dataclass
class RunEstimate:
    """What a run of the study would do, item by item, as its cache stands."""

    study: Study  # with the generated steps the cache holds in place
    simulated: bool | None  # the endpoint is the simulated judge (None: it could not tell)
    cached: int = 0
    refused: int = 0
    in_batch: int = 0
    requests: int = 0  # to send, the steps requests among them
    steps_requests: int = 0
    tokens: int = 0  # prompt estimate + completion budget
    completion_tokens: int = 0  # the budget: max_tokens x n per request, at most
    one_choice: bool = False  # the endpoint refuses n > 1 (learned): one answer a request
    api: JudgeApi = JudgeApi.CHAT  # the API the requests go to (configured or learned)

    @property
    def prompt_tokens(self) -> int:
        return self.tokens - self.completion_tokens


async def estimate_run(
    study: Study, *, retry_failed: bool = False, in_batch: Container[str] = frozenset()
) -> RunEstimate:
    """Count what a run would send (the cache is opened to read only; nothing is sent).

    Args:
        study: the prepared study.
        retry_failed: count refused items as to send, as ``run --retry-failed`` asks them.
        in_batch: the keys live batch jobs are asking for (the run leaves those to them).

    Raises:
        ConfigError: a request the tpm limit can never let through (the run stops on it too).
    """
    config = study.config
    simulated = await server_is_simulated(config.judge, config.limits.timeout)
    with JudgeCache(config.cache_path, create=False) as cache:
        entries = ServerEntries(cache, simulated)
        # Generated steps not in the cache yet: one request each, then every item anew.
        study, asked = read_steps(study, entries)
        judge = config.judge
        endpoint = load_capabilities(cache.directory, judge.url, judge.model, api=judge.api)
        one_choice = endpoint.one_request_per_draw
        estimate = RunEstimate(study, simulated, one_choice=one_choice, api=endpoint.api)
        for steps_request in asked:
            estimate.requests += 1
            estimate.steps_requests += 1
            estimate.tokens += steps_request.est_tokens
            estimate.completion_tokens += steps_request.max_completion_tokens
        # The run stops with this line on a request the tpm limit can never let through (it
        # checks every item, cached or not): the estimate says it too.
        tally = tally_left(
            with_estimated_steps(study),
            entries,
            retry_failed=retry_failed,
            in_batch=in_batch,
            tpm=config.limits.tpm,
            one_choice=one_choice,
        )
        if tally.over is not None:
            check_request_fits(tally.over, config.limits.tpm)
        for counts in tally.criteria.values():
            estimate.cached += counts.answered
            estimate.refused += counts.refused
            estimate.in_batch += counts.in_batch
        estimate.requests += tally.requests
        estimate.tokens += tally.tokens
        estimate.completion_tokens += tally.completion_tokens
    return estimate
