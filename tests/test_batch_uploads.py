"""A batch input file uploaded by a process killed before it recorded the upload.

The upload reached the provider, but the ledger still says the record was being prepared (the
kill landed while the upload's answer was on its way, or before it was written down). The
provider keeps such a file for good, unused; the next command must delete it and submit its
requests anew, exactly once.
"""

from __future__ import annotations

import subprocess
import sys

from conftest import POLL, StudyFiles, run_cli

from geval_async.sim import SimServer


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_an_upload_the_ledger_never_recorded_is_deleted_and_its_requests_sent_once(
    sim: SimServer, study: StudyFiles
) -> None:
    from openai import OpenAI

    from geval_async.judging.batch.files import input_line
    from geval_async.judging.batch.ledger import Ledger
    from geval_async.judging.store.cache import JudgeCache
    from geval_async.judging.store.claims import Claims
    from geval_async.judging.store.coverage import item_states
    from geval_async.study.config import load_config
    from geval_async.study.prepare import prepare_study

    study.write_config(sim.base_url)
    # What a submit killed between the upload and its record leaves: a record still being
    # prepared (by a process now dead), its requests claimed, and the file on the provider.
    plan = prepare_study(load_config(study.config))
    with JudgeCache(study.cache) as cache:
        requests = [r for s in item_states(plan, cache) for r in s.missing]
    ledger = Ledger(study.cache)
    record = ledger.new(len(requests))
    keys = [r.key for r in requests]
    with Claims(study.cache, 60) as claims:
        claims.claim_for_batch(keys, record.name)
    ledger.save_keys(record, keys)
    path = ledger.input_path(record)
    path.write_bytes(b"".join(input_line(r, plan.config.judge) for r in requests))
    provider = OpenAI(api_key="unused", base_url=sim.base_url)
    orphan = provider.files.create(file=path, purpose="batch")
    record.pid = _dead_pid()
    ledger.save(record)

    result = run_cli("run", str(study.config), "--batch", "--quiet", *POLL)
    assert result.returncode == 0, result.stderr
    # Every input file the provider holds is a batch's: the orphan is not kept for good.
    held = {f.id for f in provider.files.list(purpose="batch")}
    inputs = {b.input_file_id for b in provider.batches.list()}
    assert orphan.id not in held
    assert held == inputs
    assert sim.stats.batches == 1 and sim.stats.batch_lines == len(requests)
