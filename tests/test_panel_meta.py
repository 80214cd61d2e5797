"""Meta-evaluation of a panel: ``meta`` on a ``[[judges]]`` config reports
each judge's and the panel's correlations with the human scores side by side.

Three simulated judges (different models, each on its own port, one with its own low rpm and
one that refuses some records) judge a small study with human scores into one cache, each
through the one-judge path. Every expected figure is computed here apart from the code under
test: each judge's rows are the one-judge ``meta`` of that judge, and the panel's record
scores are pooled by hand (statistics.mean, numpy's median of the weight-repeated scores) from
the judges' long tables and correlated with scipy directly.
"""

from __future__ import annotations

import csv
import json
import random
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import PROMPT_A, PROMPT_B, run_cli
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

import geval_async as ga
from geval_async.judging.store.cache import JudgeCache
from geval_async.meta import meta_evaluate
from geval_async.options import PanelPool
from geval_async.scoring.panel.pooled import pool_items, pooled_score
from geval_async.scoring.reading.distributions import RatingDistribution
from geval_async.scoring.scores.scores import MISSING, SCORED, ItemScore
from geval_async.sim import SimServer, SimSettings
from geval_async.study.config import apply_overrides, load_config
from geval_async.study.settings import PanelConfig

JUDGES = ("a", "b", "c")
CRITERIA = ("clar", "fit")
REFUSE = "[[C-REFUSES]]"  # judge c's server refuses a request holding it (a content filter)
REFUSED = {"d1-s2", "d4-s0", "d6-s3"}


def write_study(folder: Path, urls: dict[str, str], panel: str = "") -> Path:
    (folder / "prompts").mkdir(exist_ok=True)
    (folder / "prompts" / "clar.txt").write_text(PROMPT_A, encoding="utf-8")
    (folder / "prompts" / "fit.txt").write_text(PROMPT_B, encoding="utf-8")
    rng = random.Random(7)
    rows = []
    for doc in range(8):
        for system in range(4):
            record = f"d{doc}-s{system}"
            rows.append(
                {
                    "id": record,
                    "doc": f"d{doc}",
                    "system": f"s{system}",
                    "reader": f"reader {doc}",
                    "text": f"Text {doc}/{system}" + (f" {REFUSE}" if record in REFUSED else ""),
                    "human": {"clar": rng.randint(1, 5), "fit": rng.randint(1, 3)},
                }
            )
    (folder / "records.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    judges = "\n".join(
        f'[[judges]]\nname = "{name}"\nmodel = "sim-{name}"\nbase_url = "{urls[name]}"\n'
        + ("[judges.limits]\nrpm = 600\n" if name == "b" else "")
        for name in JUDGES
    )
    config = folder / "panel.toml"
    config.write_text(
        '[data]\npath = "records.jsonl"\nid = "id"\ngroup = "doc"\ncondition = "system"\n\n'
        '[sampling]\nmode = "samples"\nn = 3\ntemperature = 1.0\nmax_tokens = 5\n\n'
        "[limits]\nconcurrency = 4\nretries = 2\ntimeout = 10\n\n"
        f"{judges}\n{panel}\n"
        '[cache]\npath = "cache"\n\n[output]\npath = "out"\nprefix = "p"\n\n'
        '[[criteria]]\nname = "clar"\nprompt = "prompts/clar.txt"\nscale = [1, 5]\n'
        'fields = ["text"]\n\n'
        '[[criteria]]\nname = "fit"\nprompt = "prompts/fit.txt"\nscale = [1, 3]\n'
        'fields = ["reader", "text"]\n\n'
        '[meta]\nhuman = { clar = "human.clar", fit = "human.fit" }\nbootstrap = 50\n',
        encoding="utf-8",
    )
    return config


@pytest.fixture
async def panel_study(tmp_path: Path) -> Path:
    """The study judged by each of the three judges, one at a time, into one cache."""
    refusing = SimSettings(content_filter_marker=REFUSE)
    with SimServer() as a, SimServer() as b, SimServer(refusing) as c:
        urls = {"a": a.base_url, "b": b.base_url, "c": c.base_url}
        path = write_study(tmp_path, urls)
        config = load_config(path)
        for name in JUDGES:
            await ga.judge(config.for_judge(name), rpm=1e6, tpm=1e9)
    return path


def _human(folder: Path) -> dict[tuple[str, str], float]:
    rows = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
    return {(r["id"], c): float(r["human"][c]) for r in rows for c in CRITERIA}


def _judge_scores(path: Path) -> dict[str, dict[tuple[str, str], float]]:
    """Each judge's scored record scores, from its own one-judge results."""
    config = load_config(path)
    out = {}
    for name in JUDGES:
        long = ga.load_results(config.for_judge(name)).long
        scored = long[long["status"] == "scored"]
        out[name] = {
            (str(r.record_id), str(r.criterion)): float(r.score) for r in scored.itertuples()
        }
    return out


def _dataset_spearman(human: dict, pooled: dict, criterion: str) -> float:
    keys = [k for k in pooled if k[1] == criterion]
    return float(sps.spearmanr([human[k] for k in keys], [pooled[k] for k in keys]).statistic)


def _rows(csv_path: Path) -> list[dict[str, str]]:
    with csv_path.open() as handle:
        return list(csv.DictReader(handle))


def test_meta_on_a_panel_shows_every_judge_and_the_panel_side_by_side(panel_study: Path) -> None:
    result = run_cli("meta", str(panel_study))
    assert result.returncode == 0, result.stderr
    # One table with a judge column: the three judges, then the panel.
    table = [line.split()[0] for line in result.stdout.splitlines()[2:] if line[:1] in "abcp"]
    assert list(dict.fromkeys(t for t in table if t in (*JUDGES, "panel"))) == [*JUDGES, "panel"]
    assert "panel vs the best single judge (summary-level Spearman):" in result.stdout
    for criterion in CRITERIA:
        assert f"panel {criterion}: 3 records pooled from fewer than all 3 judges" in result.stdout
    assert "simulated judge's ratings are synthetic" in result.stdout

    rows = _rows(panel_study.parent / "out" / "meta" / "p_meta.csv")
    assert list(dict.fromkeys(r["judge"] for r in rows)) == [*JUDGES, "panel"]
    # Judge c could not score the refused records: not covered, left out, never a 0.
    assert {r["not_covered"] for r in rows if r["judge"] == "c"} == {"3"}
    assert {r["not_covered"] for r in rows if r["judge"] in ("a", "b", "panel")} == {"0"}

    # Each judge's rows are the one-judge meta of that judge.
    config = load_config(panel_study)
    for name in JUDGES:
        alone = meta_evaluate(config.for_judge(name)).frame.drop(columns="judge")
        mine = pd.DataFrame([r for r in rows if r["judge"] == name]).drop(columns="judge")
        assert len(mine) == len(alone) == 2 * 3 * 3
        for column in ("value", "ci_low", "ci_high"):
            expected = alone[column].to_numpy(dtype=float)
            got = pd.to_numeric(mine[column]).to_numpy(dtype=float)
            assert np.allclose(got, expected, atol=1e-12, equal_nan=True), (name, column)

    # The panel: the mean of the judges' record scores, by hand, correlated with scipy.
    human, scores = _human(panel_study.parent), _judge_scores(panel_study)
    keys = {k for judge in scores.values() for k in judge}
    pooled = {
        k: round(statistics.mean(scores[j][k] for j in JUDGES if k in scores[j]), 12)
        for k in sorted(keys)
    }
    assert len(pooled) == 32 * 2, "every record pooled: the refused ones from a and b"
    panel = {
        (r["criterion"], r["level"], r["method"]): float(r["value"])
        for r in rows
        if r["judge"] == "panel"
    }
    for criterion in CRITERIA:
        expected = _dataset_spearman(human, pooled, criterion)
        assert panel[(criterion, "dataset", "spearman")] == pytest.approx(expected, abs=1e-9)
        means: dict[str, list[tuple[float, float]]] = {}
        for (record, c), value in pooled.items():
            if c == criterion:
                means.setdefault(record.split("-")[1], []).append((human[(record, c)], value))
        h = [statistics.mean(p[0] for p in pairs) for pairs in means.values()]
        j = [statistics.mean(p[1] for p in pairs) for pairs in means.values()]
        assert panel[(criterion, "system", "pearson")] == pytest.approx(
            float(sps.pearsonr(h, j).statistic), abs=1e-9
        )

    document = json.loads((panel_study.parent / "out" / "meta" / "p_meta.json").read_text())
    assert document["panel"]["pool"] == "mean"
    assert document["panel"]["weights"] == {"a": 1.0, "b": 1.0, "c": 1.0}
    assert document["simulated"] == list(JUDGES)


def test_a_weighted_median_panel_pools_by_its_rule(panel_study: Path) -> None:
    config = load_config(panel_study)
    config = replace(config, panel=PanelConfig(pool=PanelPool.MEDIAN, weights={"a": 2, "c": 0}))
    evaluation = meta_evaluate(config)
    human, scores = _human(panel_study.parent), _judge_scores(panel_study)
    pooled = {}
    for k in {k for judge in scores.values() for k in judge}:
        weighted = [(scores[j][k], w) for j, w in (("a", 2), ("b", 1)) if k in scores[j]]
        repeated = [v for v, w in weighted for _ in range(w)]
        pooled[k] = round(float(np.median(repeated)), 12)
    found = {
        (c.criterion, c.level, c.method): c.value
        for c in evaluation.correlations
        if c.judge == "panel"
    }
    for criterion in CRITERIA:
        expected = _dataset_spearman(human, pooled, criterion)
        assert found[(criterion, "dataset", "spearman")] == pytest.approx(expected, abs=1e-9)
    # c weighs 0: its refusals leave no record short of the judges that count.
    assert not [n for n in evaluation.notes if "pooled from fewer" in n]


def test_meta_reads_a_panels_overrides_for_every_judge(panel_study: Path) -> None:
    config = load_config(panel_study)
    by_keyword = meta_evaluate(config, n=1).frame
    # the rule of apply_overrides (and of every command): n = 1 for every judge
    pd.testing.assert_frame_equal(by_keyword, meta_evaluate(apply_overrides(config, n=1)).frame)
    assert not by_keyword["value"].equals(meta_evaluate(config).frame["value"])
    with pytest.raises(ga.ConfigError, match=r"^model= on a panel config .*judge=NAME"):
        meta_evaluate(config, model="other")


def test_meta_judge_name_evaluates_that_judge_alone(panel_study: Path) -> None:
    result = run_cli("meta", str(panel_study), "--judge", "c")
    assert result.returncode == 0, result.stderr
    # One judge's table: no other judge, no panel, no panel-vs-best lines.
    judges = {line.split()[0] for line in result.stdout.splitlines()[2:] if line[:4] == "sim-"}
    assert judges == {"sim-c"}
    assert "panel" not in result.stdout
    written = panel_study.parent / "out" / "meta" / "p-judge-c_meta.csv"  # beside the panel's
    assert f"wrote {written}" in result.stdout
    rows = pd.DataFrame(_rows(written))
    alone = meta_evaluate(load_config(panel_study).for_judge("c")).frame
    pd.testing.assert_frame_equal(meta_evaluate(load_config(panel_study), judge="c").frame, alone)
    assert len(rows) == len(alone) == 2 * 3 * 3
    assert np.allclose(pd.to_numeric(rows["value"]), alone["value"], equal_nan=True)
    assert set(rows["not_covered"]) == {"3"}  # c's refused records, left out, never a 0

    for extra, line in [
        (("--judge", "zz"), "no judge named 'zz' (the config's judges: a, b, c)"),
        (("--judge", "c", "--no-cache"), "--judge c: only chooses a panel judge's answers"),
    ]:
        refused = run_cli("meta", str(panel_study), *extra)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and line in refused.stderr


def test_meta_on_a_panel_with_an_empty_cache_is_one_line(tmp_path: Path) -> None:
    urls = {name: f"http://127.0.0.1:9/{name}/v1" for name in JUDGES}
    path = write_study(tmp_path, urls)
    missing = run_cli("meta", str(path))  # no cache folder yet: the readers' one line
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'cache'}: no cache folder there: check --cache (or [cache] path), "
        f"or run `geval-async run {path}` first to fill it"
    ]
    with JudgeCache(tmp_path / "cache"):
        pass  # a cache folder, empty
    result = run_cli("meta", str(path))
    assert result.returncode == 2
    assert "holds no scores of any judge of the panel" in result.stderr
    assert f"geval-async run {path}" in result.stderr
    assert not (tmp_path / "out" / "meta").exists(), "nothing half-written"


# --- the panel's pooling (pool_items, which meta reads too): pure, by independent arithmetic --

scores_st = st.lists(
    st.lists(
        st.one_of(st.none(), st.integers(1, 5).map(float), st.floats(1, 5)),
        min_size=3,
        max_size=3,
    ),
    min_size=1,
    max_size=12,
)
weights_st = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3))
NAMES = ["x", "y", "z"]


def _pooled(rows: list[list[float | None]], panel: PanelConfig) -> list[tuple[float | None, int]]:
    """Each row's pooled score and how many judges it was pooled from (a judge's None: it
    could not score the record)."""

    def item(record: int, value: float | None) -> ItemScore:
        distribution = None if value is None else RatingDistribution({value: 1.0}, 1, 0, 1.0)
        status = MISSING if value is None else SCORED
        return ItemScore(f"r{record}", None, None, "clar", status, distribution)

    members = {
        name: [item(record, row[column]) for record, row in enumerate(rows)]
        for column, name in enumerate(NAMES)
    }
    return [(s.pooled, len(s.judges_scored)) for s in pool_items(members, panel)]


@given(scores_st, weights_st)
def test_weighted_mean_is_the_sum_of_weights_times_scores_over_the_weights(
    rows: list[list[float | None]], weights: tuple[int, int, int]
) -> None:
    panel = PanelConfig(pool=PanelPool.MEAN, weights=dict(zip(NAMES, weights, strict=True)))
    for row, (pooled, count) in zip(rows, _pooled(rows, panel), strict=True):
        present = [(v, w) for v, w in zip(row, weights, strict=True) if v is not None and w > 0]
        assert count == len(present)
        if not present:
            assert pooled is None, "no judge that counts: no score, never 0"
        else:
            expected = sum(v * w for v, w in present) / sum(w for _, w in present)
            assert pooled == pytest.approx(expected, rel=1e-11)


@given(scores_st, weights_st)
def test_weighted_median_is_the_median_of_the_weight_repeated_scores(
    rows: list[list[float | None]], weights: tuple[int, int, int]
) -> None:
    panel = PanelConfig(pool=PanelPool.MEDIAN, weights=dict(zip(NAMES, weights, strict=True)))
    for row, (pooled, _) in zip(rows, _pooled(rows, panel), strict=True):
        repeated = [v for v, w in zip(row, weights, strict=True) if v is not None for _ in range(w)]
        if not repeated:
            assert pooled is None
        else:
            assert pooled == pytest.approx(float(np.median(repeated)), rel=1e-12)


def test_unweighted_median_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    median = PanelPool.MEDIAN
    assert pooled_score(np.array([4.0, 1.0, 3.0, 2.0]), np.ones(4), median) == 2.5
    assert pooled_score(np.array([1.0, 5.0]), np.array([0.3, 0.7]), median) == 5.0


def test_the_readmes_panel_config_reads_as_three_judges_with_their_own_limits(
    tmp_path: Path,
) -> None:
    from conftest import ROOT

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## A panel of judges") :]
    block = section[section.index("```toml\n") + 8 : section.index("```\n", 8)]
    (tmp_path / "records.jsonl").write_text('{"id": "a", "text": "x"}\n', encoding="utf-8")
    (tmp_path / "clar.txt").write_text(PROMPT_A, encoding="utf-8")
    (tmp_path / "config.toml").write_text(
        '[data]\npath = "records.jsonl"\n'
        + block
        + '\n[[criteria]]\nname = "clar"\nprompt = "clar.txt"\nscale = [1, 5]\nfields = ["text"]\n',
        encoding="utf-8",
    )
    config = load_config(tmp_path / "config.toml")
    assert config.judge_names == ("gpt", "claude", "local")
    claude = config.for_judge("claude")
    assert (claude.sampling.n, claude.limits.rpm) == (5, 50)
    assert config.for_judge("local").judge.is_local
    assert config.panel.pool == PanelPool.MEAN
