"""Batch jobs: the judge stage through a Batch API (OpenAI, Azure OpenAI, vLLM's run-batch).

:mod:`.files` writes the JSONL input files (one request per line, its cache key as
``custom_id``) and reads output files; :mod:`.ledger` keeps what was submitted in the cache
folder; :mod:`.store` stores output lines as the cache entries online answers make;
:mod:`.control` submits, attaches, polls, collects and cancels through the ``openai`` package
(:mod:`.provider` makes its client and translates its errors);
:mod:`.queue` keeps the tokens queued under the provider's enqueued-token limit,
:mod:`.session` opens what every batch step works with (cache, steps, client, claims) and
:mod:`.rounds` runs ``run --batch``: submit what fits, collect what ended, submit the next.
"""
