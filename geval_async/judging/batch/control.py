"""The control plane of batch jobs, through the ``openai`` package: submit, attach, poll,
collect, cancel.

:meth:`BatchControl.submit` puts every request the cache lacks (and no live batch holds) into
input files (:mod:`.files`), claims them for the batch, uploads each file and creates its batch,
writing each step to the ledger (:mod:`.ledger`) before the next. :meth:`~BatchControl.attach`
picks up what an interrupted process left: a batch created from an uploaded file is found
(``batches.list``) or created, a record never recorded as uploaded is dropped (and its file
deleted where the provider has it).
:meth:`~BatchControl.poll` asks for each live batch's status, :meth:`~BatchControl.collect`
streams an ended batch's output and error files into the cache (:mod:`.store`) and releases its
claims. The online hot path stays on aiohttp (:mod:`geval_async.judging.wire.transport`); this
module makes a handful of calls per batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from ...study.plan import JudgeRequest, Study
from ...study.pricing import Budget
from ...study.prompt_cache import prefix_share, prompt_cache_key
from ..run.budget import record_spend, request_cost
from ..store.cache import JudgeCache
from ..store.claims import Claims
from ..store.coverage import Coverage
from ..store.left import coverage, what_is_left
from ..store.origin import ServerEntries
from ..wire import probe
from ..wire.capabilities import load_capabilities, save_capabilities
from ..wire.quoted_key import without_key
from .files import MAX_BYTES, MAX_LINES, endpoint, input_line, read_output, split_lines
from .ledger import PREPARING, SUBMITTED, UPLOADED, BatchRecord, Ledger
from .provider import provider_call
from .queue import QUEUE_FULL, QueueLimit, QueueLimits
from .store import Stored, one_choice_chunks, requests_by_key, store_lines

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types import Batch

COMPLETION_WINDOW: Literal["24h"] = "24h"
# Lines stored per cache pass while an output file streams in.
_STORE_EVERY = 2_000
# A record another live process is still preparing is left alone for this long.
_PREPARING_GRACE = 3600.0


async def server_is_simulated(study: Study, api_key: str | None) -> bool | None:
    """Whether the judge is geval-async's simulated one: the probe an online run makes
    (:mod:`geval_async.judging.wire.probe`), so batch answers follow the same origin rule."""
    return await probe.server_is_simulated(study.config.judge)


class BatchControl:
    """Batch jobs of one study on one cache. ``await control.submit()`` and so on.

    ``simulated`` says whether the provider is the simulated judge (:func:`server_is_simulated`;
    None when unknown): the other server's entries then count as missing, as in an online run
    (:mod:`geval_async.judging.store.origin`), and are replaced by the batch's answers.
    """

    def __init__(
        self, study: Study, cache: JudgeCache, client: AsyncOpenAI, simulated: bool | None = None
    ) -> None:
        self.study, self.cache, self.client = study, cache, client
        self.entries = ServerEntries(cache, simulated)
        self.ledger = Ledger(cache.directory)
        self.judge = study.config.judge
        # The provider's errors in our words: a refused key's line names its entry, no key quoted.
        self.call = partial(provider_call, key_entry=study.config.api_key_entry, key=client.api_key)
        # What the endpoint accepts, as online runs and earlier batches learned it: the lines
        # are spelt as an online run would send them (max_completion_tokens, n = 1, the
        # Responses API).
        self.capabilities = load_capabilities(
            cache.directory,
            self.judge.url,
            self.judge.model,
            api=self.judge.api,
            store=self.judge.store,
        )
        # The prompt_cache_key of each criterion whose requests share a prefix a provider
        # caches, as an online run sends it (the Batch API's lines read the cache too).
        self.cache_keys = {
            criterion.name: prompt_cache_key(self.judge.model, criterion)
            if prefix_share(criterion).cacheable
            else None
            for criterion in study.planned_criteria
        }
        # The requests behind live batches' keys, found by one walk of the plan (see
        # _requests_for): without it, every ended batch walked the whole plan again.
        self._requests: dict[str, JudgeRequest] = {}
        self.queue_limits = QueueLimits(cache.directory)
        # What the last submit left for lack of room in the queue (see .queue).
        self.queue_full = False
        self.too_large = 0

    def ask(self, study: Study) -> None:
        """Ask ``study`` from now on: the next round of a study whose draws are spent by need
        (:mod:`geval_async.study.draws`), whose items ask the draws it allots."""
        self.study = study
        self._requests = {}

    @property
    def endpoint(self) -> str:
        """The batch endpoint of the lines submitted now: the Responses API's once an answer
        showed the model lives there (learned between two submits of one run)."""
        return endpoint(self.judge, self.capabilities)

    def coverage(self) -> dict[str, Coverage]:
        """Per criterion, the items answered, refused, missing and in live batch jobs, as the
        batch's server sees the cache."""
        return coverage(self.study, self.entries, self.ledger.live_keys())

    def queue(self) -> QueueLimit:
        """The judge model's enqueued-token limit as now known (:mod:`.queue`)."""
        configured = self.study.config.limits.batch_queue_tokens
        return self.queue_limits.limit(self.judge.model, configured)

    # --- submit --------------------------------------------------------------------------

    async def submit(
        self,
        claims: Claims,
        *,
        budget: Budget | None = None,
        max_lines: int = MAX_LINES,
        max_bytes: int = MAX_BYTES,
    ) -> tuple[list[BatchRecord], int]:
        """Submit every request the cache lacks and no live batch holds, as far as the
        queue has room (:meth:`queue`): the rest waits (:attr:`queue_full`), and a request
        larger than the whole limit is left for an online run (:attr:`too_large`).

        Returns the new batches and how many requests the budget held back.
        """
        held_back = 0
        taken = self.ledger.live_keys()
        queue = self.queue()
        limit, room = queue.tokens, queue.room(self.ledger.live())
        self.queue_full, self.too_large = False, 0
        tokens_of: dict[str, int] = {}  # the estimated tokens of the lines of unsent files
        one = self.capabilities.one_request_per_draw  # each line asks for one answer: charged so

        def lines() -> Any:
            nonlocal held_back, room
            for item in what_is_left(self.study, self.entries):
                for request in self._chunks(item.to_send):
                    if request.key in taken:
                        continue  # in a live batch, or an identical request of another item
                    tokens = request.est_tokens
                    if limit is not None and tokens > limit:
                        self.too_large += 1
                        continue
                    if room is not None and tokens > room:
                        self.queue_full = True
                        return  # the rest waits for room (in plan order)
                    cost = 0.0 if budget is None else request_cost(budget, request, one_choice=one)
                    if budget is not None and not budget.charge(cost):
                        held_back += 1
                        continue
                    taken.add(request.key)
                    if room is not None:
                        room -= tokens
                    tokens_of[request.key] = tokens
                    cache_key = self.cache_keys[request.item.criterion.name]
                    yield request.key, input_line(request, self.judge, self.capabilities, cache_key)

        records = []
        numbered = split_lines(lines(), max_lines=max_lines, max_bytes=max_bytes)
        try:
            # Each file is written to disk as the plan is walked (never held in memory), then
            # claimed, uploaded and submitted before the next one is written.
            for record, keys in self.ledger.write_inputs(numbered):
                file_tokens = {key: tokens_of.pop(key, 0) for key in keys}
                if await self._submit_file(claims, record, keys, file_tokens):
                    records.append(record)
        finally:
            # What the submit committed counts against the study budget, as an online run's.
            record_spend(self.cache.directory, self.study.config, budget)
        return records, held_back

    def _chunks(self, to_send: list[JudgeRequest]) -> list[JudgeRequest]:
        """An item's requests to submit: its next chunk, or, to an endpoint known to give one
        choice a request, every chunk it lacks (else one batch a draw: see .store)."""
        if not self.capabilities.one_request_per_draw:
            return to_send
        return [c for request in to_send for c in one_choice_chunks(request, self.study.config)]

    async def _submit_file(
        self, claims: Claims, record: BatchRecord, keys: list[str], tokens: dict[str, int]
    ) -> bool:
        claimed = claims.claim_for_batch(keys, record.name)
        if not claimed:
            self.ledger.drop(record)  # another process is asking for all of them
            return False
        if len(claimed) < len(keys):
            self.ledger.keep_input(record, set(claimed))
        record.requests = len(claimed)
        record.tokens = sum(tokens[key] for key in claimed)
        self.ledger.save_keys(record, claimed)
        self.ledger.save(record)
        async with self.call("uploading the batch input file"):
            with self.ledger.open_input(record) as handle:
                uploaded = await self.client.files.create(file=handle, purpose="batch")
        record.input_file_id, record.state = uploaded.id, UPLOADED
        self.ledger.save(record)
        await self._create(record)
        self.ledger.input_path(record).unlink(missing_ok=True)
        return True

    async def _create(self, record: BatchRecord) -> None:
        async with self.call("creating the batch"):
            batch = await self.client.batches.create(
                input_file_id=str(record.input_file_id),
                endpoint=self.endpoint,  # type: ignore[arg-type]
                completion_window=COMPLETION_WINDOW,
            )
        record.batch_id, record.state = batch.id, SUBMITTED
        _update(record, batch, self.client.api_key)
        self.ledger.save(record)

    # --- attach, poll ----------------------------------------------------------------------

    async def attach(self, claims: Claims) -> None:
        """Take over what an interrupted process left in the ledger."""
        for record in self.ledger.live():
            if record.state == SUBMITTED or record.in_hand(_PREPARING_GRACE):
                continue
            # One process takes over a record at a time.
            if not claims.claim(f"batch-record:{record.name}"):
                continue
            try:
                # Another process may have taken it over between the listing and the claim.
                current = self.ledger.get(record.name)
                if current is None or current.state == SUBMITTED:
                    continue
                record = current
                if record.state == PREPARING:
                    # Killed before the upload was recorded: the provider may hold the file
                    # all the same, unused and kept for good (the requests go into a new one).
                    await self._delete_uploads(record)
                    claims.release_batch(self.ledger.keys(record), record.name)
                    self.ledger.drop(record)
                elif record.state == UPLOADED:
                    batch = await self._created_from(str(record.input_file_id))
                    if batch is None:
                        await self._create(record)
                    else:
                        record.batch_id, record.state = batch.id, SUBMITTED
                        _update(record, batch, self.client.api_key)
                        self.ledger.save(record)
                    self.ledger.input_path(record).unlink(missing_ok=True)
            finally:
                claims.release(f"batch-record:{record.name}")

    async def _delete_uploads(self, record: BatchRecord) -> None:
        """Delete the files uploaded as ``record``'s input (by its name, the record's own)."""
        name, files = self.ledger.input_path(record).name, self.client.files.list(purpose="batch")
        async with self.call("deleting an unused batch input file"):
            for file_id in [f.id async for f in files if f.filename == name]:
                await self.client.files.delete(file_id)

    async def _created_from(self, input_file_id: str) -> Batch | None:
        """The batch the provider created from an input file, if any."""
        async with self.call("listing batches"):
            async for batch in self.client.batches.list(limit=100):
                if batch.input_file_id == input_file_id:
                    return batch
        return None

    async def poll(self) -> list[BatchRecord]:
        """Ask for the status of every live batch; returns their records."""
        records = [r for r in self.ledger.live() if r.state == SUBMITTED]
        asked = [r for r in records if not r.ended]
        await self._ask(asked, "asking for", self.client.batches.retrieve)
        return records

    # --- collect, cancel -----------------------------------------------------------------

    async def collect(self, record: BatchRecord, claims: Claims) -> Stored:
        """Store an ended batch's answers, release its claims, move it to the history."""
        keys = self.ledger.keys(record)
        if record.queue_refusal is not None:
            return self._requeue(record, keys, claims)
        requests = self._requests_for(keys)
        stored = Stored()
        for file_id in (record.output_file_id, record.error_file_id):
            if file_id is not None:
                stored.add(await self._store_file(file_id, requests))
        seen = stored.answered + stored.refused + stored.missing + stored.already
        if len(keys) > seen:
            # A failed (or cancelled) batch answers some lines or none: the rest stay missing.
            stored.missing += len(keys) - seen - len(stored.unknown)
            stored.reasons[f"batch {record.status}"] += len(keys) - seen - len(stored.unknown)
        claims.release_batch(keys, record.name)
        if stored.resend:  # the lines taught the endpoint's wants: remember them
            save_capabilities(
                self.cache.directory, self.judge.url, self.judge.model, self.capabilities
            )
        record.outcome = {
            "answered": stored.answered,
            "refused": stored.refused,
            "missing": stored.missing,
            "already": stored.already,
        }
        self.ledger.finish(record)
        return stored

    def _requeue(self, record: BatchRecord, keys: list[str], claims: Claims) -> Stored:
        """A batch refused for the queue limit ran nothing: learn the limit, release its
        requests for a later submit, move it to the history."""
        self.queue_limits.learn(self.judge.model, record, self.ledger.live())
        claims.release_batch(keys, record.name)
        record.outcome = {"requeued": len(keys)}
        self.ledger.finish(record)
        return Stored(requeued=len(keys))

    def _requests_for(self, keys: list[str]) -> dict[str, JudgeRequest]:
        """The requests of the plan behind ``keys`` (a key the plan does not name is left out).

        The first call walks the plan once for the keys of every live batch, so a run whose
        batches end one after another renders the plan once, not once a batch. A key stays
        the same request whatever is stored since: keys are content addresses.
        """
        unknown = set(keys).difference(self._requests)
        if unknown:
            wanted = unknown | self.ledger.live_keys().difference(self._requests)
            one_choice = self.capabilities.one_request_per_draw
            found = requests_by_key(self.study, self.entries, wanted, one_choice=one_choice)
            self._requests.update(found)
        found = self._requests
        return {key: found[key] for key in keys if key in found}

    async def _store_file(self, file_id: str, requests: dict[str, Any]) -> Stored:
        stored = Stored()
        source = f"batch file {file_id}"
        async with self.call(f"downloading {source}"):
            stream = self.client.files.with_streaming_response.content(file_id)
            async with stream as response:
                simulated = response.headers.get("x-geval-simulated") == "true"
                lines: list[bytes] = []
                async for text in response.iter_lines():
                    # A provider (or a proxy) may quote the key in a line: an answer's body,
                    # a refusal's message; the line is stored and its error printed.
                    lines.append(without_key(text, self.client.api_key).encode())
                    if len(lines) >= _STORE_EVERY:
                        stored.add(self._store(lines, requests, source, simulated))
                        lines = []
                stored.add(self._store(lines, requests, source, simulated))
        return stored

    def _store(
        self, lines: list[bytes], requests: dict[str, Any], source: str, simulated: bool
    ) -> Stored:
        parsed = read_output(lines, source)
        return store_lines(
            parsed,
            requests,
            self.cache,
            url=self.endpoint,
            simulated=simulated,
            capabilities=self.capabilities,
            judge=self.study.config.judge_entry,
            sampling=self.study.config.sampling_entry,
        )

    async def cancel(self) -> list[BatchRecord]:
        """Ask the provider to cancel every live batch; returns their records."""
        records = await self.poll()
        asked = [r for r in records if not r.ended and r.status != "cancelling"]
        await self._ask(asked, "cancelling", self.client.batches.cancel)
        return records

    async def _ask(
        self,
        records: list[BatchRecord],
        doing: str,
        call: Callable[[str], Awaitable[Batch]],
    ) -> None:
        """``call`` the provider for each batch of ``records`` (``doing``: what its error
        says was being done), each record updated from the answer and saved at once."""
        for record in records:
            async with self.call(f"{doing} batch {record.batch_id}"):
                batch = await call(str(record.batch_id))
            _update(record, batch, self.client.api_key)
            self.ledger.save(record)

    async def wait(
        self,
        claims: Claims,
        *,
        poll_seconds: float,
        on_progress: Callable[[list[BatchRecord]], None] | None = None,
    ) -> tuple[Stored, list[BatchRecord]]:
        """Poll until every live batch has ended, collecting each as it ends.

        Returns what was stored and the records collected.
        """
        total, collected = Stored(), []
        while True:
            records = await self.poll()
            if on_progress is not None:
                on_progress(records)
            for record in records:
                if record.ended:
                    total.add(await self.collect(record, claims))
                    collected.append(record)
            if all(record.ended for record in records):
                return total, collected
            await asyncio.sleep(poll_seconds)


def _update(record: BatchRecord, batch: Batch, key: str | None) -> None:
    """Copy what the provider says about a batch into its record (saved in the cache folder,
    printed), any quote of the API ``key`` taken out."""
    record.status = batch.status
    if batch.request_counts is not None:
        record.completed = batch.request_counts.completed
        record.failed = batch.request_counts.failed
    record.output_file_id = batch.output_file_id
    record.error_file_id = batch.error_file_id
    if batch.errors is not None and batch.errors.data:
        refusals = [e for e in batch.errors.data if e.code == QUEUE_FULL]
        if refusals and batch.status == "failed":
            record.queue_refusal = without_key(str(refusals[0].message or QUEUE_FULL), key)
        record.errors = [
            (f"line {e.line}: " if e.line is not None else "")
            + without_key(str(e.message or e.code), key)
            for e in batch.errors.data
        ]
