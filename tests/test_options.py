"""Option words are defined once: an unknown word fails where it enters, never falls through."""

from __future__ import annotations

import pytest
from conftest import StudyFiles, cached_answer, run_cli

import geval_async as ga
from geval_async.judging.store.cache import JudgeCache
from geval_async.options import EntryStatus, StatTest, words
from geval_async.study.config import load_config


def test_an_unknown_test_raises_instead_of_running_another(judged: StudyFiles) -> None:
    results = ga.load_results(judged.config)
    with pytest.raises(ga.ConfigError, match="the test must be one of welch, paired-t, wilcoxon"):
        results.comparisons("t-test")
    for test in StatTest:
        assert {c.test for c in results.comparisons(test.value)} == {test}
    # Two different tests give two different answers: the word decides which one runs.
    paired = results.comparisons("paired-t")[0]
    wilcoxon = results.comparisons("wilcoxon")[0]
    assert (paired.statistic, paired.p) != (wilcoxon.statistic, wilcoxon.p)


def test_the_test_flag_offers_the_same_words(study: StudyFiles) -> None:
    study.write_config("http://127.0.0.1:9/v1")
    result = run_cli("ttest", str(study.config), "--test", "t-test")
    assert result.returncode == 2
    assert "invalid choice: 't-test'" in result.stderr
    assert all(repr(word) in result.stderr for word in words(StatTest))


def test_a_config_with_an_unknown_test_names_the_words(study: StudyFiles) -> None:
    study.write_config("http://127.0.0.1:9/v1", stats={"test": "t-test"})
    with pytest.raises(ga.ConfigError, match=r"\[stats\] 'test' must be one of welch, paired-t"):
        load_config(study.config)


def test_cache_entries_keep_their_stored_status_words(study: StudyFiles) -> None:
    entry = cached_answer(
        "g1-x", "{}", 0.0, status=EntryStatus.REJECTED, http_status=400, time=0.0, received=0
    )
    # An entry written before the words became StrEnums reads back, and one written now
    # stores the same bytes.
    stored = entry.encode()
    assert b'"status":"rejected"' in stored
    with JudgeCache(study.cache) as cache:
        assert cache.put(entry)
        again = cache.get("g1-x")
    assert again is not None and again.status == "rejected" and not again.ok
    assert again.encode() == stored
