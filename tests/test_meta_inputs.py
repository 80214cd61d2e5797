"""Meta-evaluation inputs without friction: a config of records, human fields and judge files
alone; judge files keyed by several columns with columns of their own; ids read alike in every
format; the bootstrap flags; not covered apart from unparseable; thin levels; file digests.

Every expected correlation is computed independently (tests/test_meta.py's ``_expected``: the
data read with json, grouped by hand, scipy called directly), on SummEval's expert scores.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT, StudyFiles, needs_summeval, run_cli
from test_meta import DATA, HUMAN, _expected, _known_judge, _records, _write_csv

from geval_async.errors import ConfigError
from geval_async.meta import METHODS, meta_evaluate
from geval_async.sim import SimServer, SimSettings

pytestmark = needs_summeval
COLUMNS = {"coh": "Coherence score", "con": "cons", "flu": "fluency_1to5", "rel": "REL"}
LEVELS = ("summary", "system", "dataset")


def _files_only_config(
    folder: Path,
    judges: dict[str, dict[str, object]] | None = None,
    *,
    criteria: list[dict[str, object]] | None = None,
    human: dict[str, str] | None = None,
    **meta: object,
) -> Path:
    """A config with no [judge], no [[criteria]] (unless given) and no prompt files: the
    records, ``human`` (every criterion's, unless given), ``judges`` (name -> its
    [meta.judges.NAME] table) and ``meta`` (bootstrap = 200 unless given) in its [meta]."""
    human = human or {c: f"scores.{f}" for c, f in HUMAN.items()}
    judged = {"judges": judges} if judges else {}
    return StudyFiles.in_folder(folder, DATA, "files.toml").write_config(
        "",
        criteria=criteria or [],
        data={"id": "index", "group": "doc_id", "condition": "system_id"},
        output={"prefix": "f"},
        meta={"human": human, "bootstrap": 200, **meta, **judged},
        **dict.fromkeys(("judge", "sampling", "limits", "cache", "stats")),
    )


def _inline(value: str) -> object:
    """A TOML value written as text (an inline table, a number)."""
    return tomllib.loads(f"value = {value}")["value"]


def _keyed_judge(
    name: str, path: Path, keys: str = "", scores: str = ""
) -> dict[str, dict[str, object]]:
    """A judge file keyed by article and system (unless ``keys``), in ``COLUMNS`` (unless
    ``scores``): its [meta.judges.NAME] table."""
    keys = keys or '{ doc_id = "document", system_id = "model" }'
    scores = scores or "{ " + ", ".join(f'{c} = "{col}"' for c, col in COLUMNS.items()) + " }"
    return {name: {"path": str(path), "keys": _inline(keys), "scores": _inline(scores)}}


def _write_keyed(path: Path, scores: dict[int, dict[str, float | None]], *, skip=()) -> Path:
    """The judge's scores keyed by article and system in columns of the file's own, shuffled."""
    rows = [
        {
            "model": r["system_id"],
            "document": r["doc_id"],
            **{
                COLUMNS[c]: "" if scores[r["index"]][c] is None else scores[r["index"]][c]
                for c in HUMAN
            },
        }
        for r in _records()
        if r["index"] not in skip
    ]
    random.Random(3).shuffle(rows)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["model", "document", *COLUMNS.values()])
        writer.writeheader()
        writer.writerows(rows)
    return path


def _rows(meta_csv: Path) -> dict[tuple[str, str, str, str], dict[str, str]]:
    with meta_csv.open(encoding="utf-8") as handle:
        return {
            (r["judge"], r["criterion"], r["level"], r["method"]): r for r in csv.DictReader(handle)
        }


def test_judge_files_alone_keyed_by_article_and_system(tmp_path: Path) -> None:
    records = _records()
    judge = _known_judge(records)
    keyed = _write_keyed(tmp_path / "keyed.csv", judge)
    indexed = _write_csv(tmp_path / "indexed.csv", judge)  # the existing form, by --judge-file
    config = _files_only_config(tmp_path, _keyed_judge("keyed", keyed))

    result = run_cli("meta", str(config), "--judge-file", f"indexed={indexed}")
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stdout  # 100 documents, 16 systems
    rows = _rows(tmp_path / "out" / "meta" / "f_meta.csv")
    assert len(rows) == 2 * 4 * 3 * 3
    for criterion in HUMAN:
        expected = _expected(records, judge, criterion)
        for level in LEVELS:
            for method in METHODS:
                keyed_row = rows[("keyed", criterion, level, method)]
                indexed_row = rows[("indexed", criterion, level, method)]
                assert keyed_row == {**indexed_row, "judge": "keyed"}
                assert float(keyed_row["value"]) == pytest.approx(
                    expected[(level, method)], abs=1e-9
                )
                assert int(keyed_row["not_covered"]) == expected["missing"]

    # The same config does not pass for `run`: its checks are not weakened.
    run = run_cli("run", str(config))
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [f"error: {config}: [judge] 'model' is required"]


def test_criteria_named_only_need_no_prompt_file(tmp_path: Path) -> None:
    judge = _write_csv(tmp_path / "j.csv", _known_judge(_records()))
    named = [{"name": "coh"}, {"name": "rel"}]
    config = _files_only_config(tmp_path, {"j": {"path": str(judge)}}, criteria=named)
    with pytest.raises(ConfigError, match=r"'human' names 'con', which is not among"):
        meta_evaluate(config)
    human = {"coh": "scores.coherence", "rel": "scores.relevance"}
    config = _files_only_config(tmp_path, {"j": {"path": str(judge)}}, criteria=named, human=human)
    evaluation = meta_evaluate(config)
    assert {c.criterion for c in evaluation.correlations} == {"coh", "rel"}
    # A judge of its own is read from the cache only when asked for, and needs a [judge].
    with pytest.raises(ConfigError, match=r"no \[judge\] section"):
        meta_evaluate(config, use_cache=True)


def test_ids_are_read_alike_in_every_format(tmp_path: Path) -> None:
    """A CSV id "0.0" names record 0, as a JSON 0.0 does (and "0.0" in JSON, and 0)."""
    judge = _known_judge(_records())
    forms = {
        "csv_int": ("csv", lambda i: str(i)),
        "csv_float": ("csv", lambda i: f"{i}.0"),
        "json_float": ("jsonl", float),
        "json_text": ("jsonl", lambda i: f"{i}.0"),
    }
    files = {}
    for name, (suffix, form) in forms.items():
        rows = [{"index": form(i), **scores} for i, scores in judge.items()]
        path = tmp_path / f"{name}.{suffix}"
        if suffix == "csv":
            with path.open("w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=["index", *HUMAN])
                writer.writeheader()
                writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
        else:
            path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        files[name] = path
    evaluation = meta_evaluate(_files_only_config(tmp_path), files)
    frame = evaluation.frame
    values = {
        name: part.drop(columns="judge").reset_index(drop=True)
        for name, part in frame.groupby("judge")
    }
    assert set(values) == set(forms)
    for name in forms:
        assert values[name].equals(values["csv_int"]), name
    assert (
        frame["n"][frame["level"] == "dataset"]
        == 1600 - _expected(_records(), judge, "coh")["missing"]
    ).all()


def test_bootstrap_flags_match_the_file_and_pass_its_checks(tmp_path: Path) -> None:
    judge = _write_csv(tmp_path / "j.csv", _known_judge(_records()))
    judges: dict[str, dict[str, object]] = {"j": {"path": str(judge)}}
    flagged = _files_only_config(tmp_path, judges)  # bootstrap = 200, seed 0, 0.95
    result = run_cli(
        "meta", str(flagged), "--bootstrap", "300", "--seed", "5", "--confidence", "0.8"
    )
    assert result.returncode == 0, result.stderr
    assert "80% percentile bootstrap over documents (300 resamples, seed 5)" in result.stdout
    from_flags = _rows(tmp_path / "out" / "meta" / "f_meta.csv")
    document = json.loads((tmp_path / "out" / "meta" / "f_meta.json").read_text())
    assert (document["bootstrap"], document["seed"], document["confidence"]) == (300, 5, 0.8)

    other = tmp_path / "other"
    other.mkdir()
    in_file = _files_only_config(other, judges, bootstrap=300, seed=5, confidence=0.8)
    assert run_cli("meta", str(in_file)).returncode == 0
    assert _rows(other / "out" / "meta" / "f_meta.csv") == from_flags
    summary = from_flags[("j", "coh", "summary", "spearman")]
    assert float(summary["ci_low"]) < float(summary["value"]) < float(summary["ci_high"])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("bootstrap", "-1", "'bootstrap' must be 0 (no intervals) or more, not -1"),
        ("confidence", "1.5", "'confidence' must be between 0 and 1, not 1.5"),
    ],
)
def test_bad_bootstrap_flag_fails_like_the_file(
    tmp_path: Path, key: str, value: str, message: str
) -> None:
    judge = _write_csv(tmp_path / "j.csv", _known_judge(_records()))
    config = _files_only_config(tmp_path, {"j": {"path": str(judge)}})
    flag = run_cli("meta", str(config), f"--{key}", value)
    assert flag.returncode == 2
    assert flag.stderr.strip().splitlines() == [f"error: --{key} {value}: [meta] {message}"]
    given: dict[str, object] = {"bootstrap": None, key: _inline(value)}  # in place of 200
    _files_only_config(tmp_path, {"j": {"path": str(judge)}}, **given)
    in_file = run_cli("meta", str(config))
    assert in_file.returncode == 2
    assert in_file.stderr.strip().splitlines() == [f"error: {config}: [meta] {message}"]
    assert not (tmp_path / "out").exists(), "nothing written"


def test_python_overrides_are_checked_like_the_file(tmp_path: Path) -> None:
    judge = _write_csv(tmp_path / "j.csv", _known_judge(_records()))
    config = _files_only_config(tmp_path, {"j": {"path": str(judge)}})
    with pytest.raises(
        ConfigError, match=r"^bootstrap='5': \[meta\] 'bootstrap' must be a whole number, not '5'$"
    ):
        meta_evaluate(config, bootstrap="5")
    with pytest.raises(ConfigError, match=r"^seed=True: \[meta\] 'seed' must be a whole number"):
        meta_evaluate(config, seed=True)
    with pytest.raises(ConfigError, match=r"^overrides: unknown key 'bootstrp'"):
        meta_evaluate(config, bootstrp=5)
    evaluation = meta_evaluate(config, bootstrap=0)
    assert evaluation.config.meta.bootstrap == 0


def test_partial_judge_counts_not_covered_apart_from_unparseable(tmp_path: Path) -> None:
    records = _records()
    judge = _known_judge(records)
    # Covers the first 60 articles only; a few cells hold the judge's words, not a number.
    articles = list(dict.fromkeys(r["doc_id"] for r in records))
    skip = {r["index"] for r in records if r["doc_id"] in articles[60:]}
    words = {r["index"]: "Score: high" for r in records[: 60 * 16 : 97]}
    keyed = _write_keyed(tmp_path / "keyed.csv", judge, skip=skip)
    text = keyed.read_text()
    lines = text.splitlines()
    # Replace the coherence cell of the rows of `words` (matched by article and system).
    by_key = {(r["doc_id"], r["system_id"]): r["index"] for r in records}
    out = [lines[0]]
    for line in lines[1:]:
        cells = next(csv.reader([line]))
        if by_key[(cells[1], cells[0])] in words:
            cells[2] = words[by_key[(cells[1], cells[0])]]
        out.append(",".join(f'"{c}"' if " " in c else c for c in cells))
    keyed.write_text("\n".join(out) + "\n")

    config = _files_only_config(tmp_path, _keyed_judge("partial", keyed))
    result = run_cli("meta", str(config), "--criteria", "coh,con")
    assert result.returncode == 0, result.stderr
    empty = {i for i, s in judge.items() if s["coh"] is None and i not in skip}
    unparseable = {i for i in words if i not in empty}
    expected_not_covered = len(skip) + len(empty)
    rows = _rows(tmp_path / "out" / "meta" / "f_meta.csv")
    coh = rows[("partial", "coh", "dataset", "pearson")]
    assert int(coh["unparseable"]) == len(unparseable) > 0
    assert int(coh["not_covered"]) == expected_not_covered
    assert int(coh["missing"]) == expected_not_covered + len(unparseable)
    con = rows[("partial", "con", "dataset", "pearson")]
    assert (int(con["unparseable"]), int(con["not_covered"])) == (0, expected_not_covered)
    assert (
        f"partial coh: {expected_not_covered + len(unparseable)} of 1600 items have no judge "
        f"score and are left out: {expected_not_covered} not covered (no row, or an empty "
        f"cell), {len(unparseable)} unparseable (a cell that is not a number, e.g. row "
    ) in result.stdout
    assert "'Score: high')" in result.stdout
    # The correlations are those of the covered, parseable items alone.
    kept = {
        i: {c: (None if i in skip or i in unparseable else v) for c, v in s.items()}
        for i, s in judge.items()
    }
    expected = _expected(records, kept, "coh")
    for level in LEVELS:
        for method in METHODS:
            assert float(rows[("partial", "coh", level, method)]["value"]) == pytest.approx(
                expected[(level, method)], abs=1e-9
            )


def test_cache_judge_answers_without_a_rating_are_unparseable(tmp_path: Path) -> None:
    from test_meta import _write_config

    config = _write_config(tmp_path)
    with SimServer(SimSettings(invalid_answers=0.6)) as server:
        judged = run_cli(
            "run", str(config), "--base-url", server.base_url, "--limit", "48", "--quiet"
        )
        assert judged.returncode == 0, judged.stderr
    result = run_cli("meta", str(config), "--limit", "48", "--criteria", "coh")
    assert result.returncode == 0, result.stderr
    report = run_cli("report", str(config), "--limit", "48")
    assert report.returncode == 0, report.stderr
    # --limit is in the output names.
    with (tmp_path / "out" / "scores" / "t-limit-48_long.csv").open() as handle:
        statuses = [r["status"] for r in csv.DictReader(handle) if r["criterion"] == "coh"]
    no_rating = statuses.count("no valid rating")
    assert no_rating > 0
    rows = _rows(tmp_path / "out" / "meta" / "t_meta.csv")
    row = rows[("sim-judge (simulated)", "coh", "dataset", "pearson")]
    assert (int(row["unparseable"]), int(row["not_covered"])) == (no_rating, 0)
    assert f"{no_rating} unparseable (no valid rating in the answers)" in result.stdout


def test_levels_on_fewer_than_ten_units_warn(tmp_path: Path) -> None:
    records = _records()
    judge = _known_judge(records)
    # A second judge that rated six systems only.
    systems = sorted({r["system_id"] for r in records})[:6]
    skip = {r["index"] for r in records if r["system_id"] not in systems}
    six = _write_keyed(tmp_path / "six.csv", judge, skip=skip)
    full = _write_csv(tmp_path / "full.csv", judge)
    config = _files_only_config(tmp_path, _keyed_judge("six", six))
    result = run_cli("meta", str(config), "--judge-file", f"full={full}")
    assert result.returncode == 0, result.stderr
    warning = (
        "six: the system level of coh, con, flu, rel rests on 6 systems (fewer than 10): "
        "its correlations can swing widely"
    )
    warnings = [x for x in result.stdout.splitlines() if x.startswith("warning:")]
    assert warnings == [f"warning: {warning}"]
    document = json.loads((tmp_path / "out" / "meta" / "f_meta.json").read_text())
    assert document["warnings"] == [warning]

    # 48 records are three articles: every judge's summary level rests on 3 documents.
    result = run_cli("meta", str(config), "--judge-file", f"full={full}", "--limit", "48")
    assert result.returncode == 0, result.stderr
    assert (
        "warning: full: the summary level of coh, con, flu, rel rests on 3 documents "
        "(fewer than 10)"
    ) in result.stdout
    assert "warning: full: the system level" not in result.stdout


def test_each_judge_file_sha256_is_in_the_output(tmp_path: Path) -> None:
    judge = _known_judge(_records())
    keyed = _write_keyed(tmp_path / "keyed.csv", judge)
    indexed = _write_csv(tmp_path / "indexed.csv", judge)
    config = _files_only_config(tmp_path, _keyed_judge("keyed", keyed))
    result = run_cli("meta", str(config), "--judge-file", f"indexed={indexed}")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "out" / "meta" / "f_meta.json").read_text())
    for name, path in (("keyed", keyed), ("indexed", indexed)):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert document["judge_files"][name]["sha256"] == digest
        assert f"judge file {name}: {path} (sha256 {digest})" in result.stdout
    assert document["judge_files"]["keyed"]["keys"] == {"doc_id": "document", "system_id": "model"}
    assert document["judge_files"]["indexed"]["keys"] == {"index": "index"}
    assert document["judge_files"]["keyed"]["scores"] == COLUMNS


@pytest.mark.parametrize(
    ("keys", "scores", "edit", "message"),
    [
        ('{ doc_id = "document" }', "", None, "the keys (doc_id) do not tell records '0' and"),
        ('{ doc_id = "document", system_id = "sys" }', "", None, "no column 'sys' (the key"),
        ("", '{ coh = "coherence" }', None, "no column 'coherence' (the scores of coh)"),
        ("", '{ cohesion = "cons" }', None, "'scores' names 'cohesion', which is not a criterion"),
        ("", "", ("M11,", "M99,"), "no record of the study has doc_id = "),
        ("", '{ coh = "model" }', None, "column 'model' (coh) holds no number"),
    ],
)
def test_bad_mapping_is_one_line_and_exit_2(
    tmp_path: Path, keys: str, scores: str, edit: tuple[str, str] | None, message: str
) -> None:
    keyed = _write_keyed(tmp_path / "keyed.csv", _known_judge(_records()))
    if edit:
        keyed.write_text(keyed.read_text().replace(*edit, 1))
    config = _files_only_config(tmp_path, _keyed_judge("j", keyed, keys, scores))
    result = run_cli("meta", str(config))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('path = "j.csv"\ncolumns = {}', r"\[meta.judges.j\] unknown key 'columns'"),
        ('keys = { index = "index" }', r"\[meta.judges.j\] 'path' is required"),
        ('path = "j.csv"\nkeys = { index = 3 }', r"'keys' maps names to the file's column names"),
    ],
)
def test_judge_table_is_checked(tmp_path: Path, table: str, message: str) -> None:
    config = _files_only_config(tmp_path, {"j": tomllib.loads(table)})
    with pytest.raises(ConfigError, match=message):
        meta_evaluate(config)


def test_a_judge_named_twice_is_refused(tmp_path: Path) -> None:
    judge = _write_csv(tmp_path / "j.csv", _known_judge(_records()))
    config = _files_only_config(tmp_path, {"j": {"path": str(judge)}})
    result = run_cli("meta", str(config), "--judge-file", f"j={judge}")
    assert result.returncode == 2
    assert "two judges are named 'j'" in result.stderr


def test_example_judge_files_config_matches_the_docs(tmp_path: Path) -> None:
    """examples/summeval/judge_files.toml on make_judge_file.py's file, as documented."""
    example = ROOT / "examples" / "summeval"
    made = subprocess.run(
        [
            sys.executable,
            str(example / "make_judge_file.py"),
            "--output",
            str(tmp_path / "noisy_judge.csv"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    config = tmp_path / "judge_files.toml"
    config.write_text(
        (example / "judge_files.toml")
        .read_text()
        .replace("../../../shared/data/summeval/summeval.jsonl", str(DATA))
    )
    result = run_cli("meta", str(config))
    assert result.returncode == 0, result.stderr
    docs = (ROOT / "docs" / "meta-evaluation.md").read_text()
    table = [
        x for x in result.stdout.splitlines() if x.startswith(("noisy", "note", "judge  criterion"))
    ]
    assert len(table) > 12
    for line in table:
        assert line in docs, line


def test_prompts_are_needed_only_when_the_cache_judge_is_read(tmp_path: Path) -> None:
    from test_meta import _write_config

    config = _write_config(tmp_path)
    config.write_text(config.read_text().replace("_detailed.txt", "_missing.txt"))
    judge = _write_csv(tmp_path / "j.csv", _known_judge(_records()))
    with pytest.raises(ConfigError, match=r"\[criteria #1 'coh'\] prompt file .* not found"):
        meta_evaluate(config, {"j": judge})
    evaluation = meta_evaluate(config, {"j": judge}, use_cache=False, criteria="coh,rel")
    assert {(c.judge, c.criterion) for c in evaluation.correlations} == {("j", "coh"), ("j", "rel")}
    result = run_cli("run", str(config), "--dry-run")
    assert result.returncode == 2 and "prompt file" in result.stderr


def test_a_judge_flag_on_judge_files_alone_is_refused_not_ignored(tmp_path: Path) -> None:
    judge = _known_judge(_records())
    full = _write_csv(tmp_path / "full.csv", judge)
    config = _files_only_config(tmp_path, _keyed_judge("full", full))
    result = run_cli("meta", str(config), "--model", "gpt-4o")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--model gpt-4o: only chooses the answers of the config's own judge" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists(), "nothing written"
