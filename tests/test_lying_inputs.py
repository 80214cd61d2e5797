"""Inputs that lie.

Each test hands the tool an input built to mislead it, a prefix that climbs out of the output
folder, a criterion named like another output, ids whose text a float would lose, a prompt
saved with a byte order mark, a cache path that is a file, and asserts what the user sees:
one line naming the file and the key, exit 2, nothing written; or the right ids, keys and
file names.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path, PureWindowsPath

import pytest
from conftest import StudyFiles, keys_by_digest, run_cli, run_study
from hypothesis import given, settings
from hypothesis import strategies as st

from geval_async.errors import ConfigError
from geval_async.sim import SimServer
from geval_async.study import criteria, prompts
from geval_async.study.file_names import file_name_text, is_file_name_part
from geval_async.study.prompts import load_template
from geval_async.study.reader import TableReader
from geval_async.study.records import load_records
from geval_async.study.sections import SECTION_KEYS, parse_output

OFFLINE = "http://127.0.0.1:9/v1"  # nothing listens: these commands must not need the judge


def _one_line_refusal(result: object, *needles: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr  # type: ignore[attr-defined]
    lines = result.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1, f"expected one line, got: {lines!r}"
    assert "Traceback" not in lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _rename_criterion(study: StudyFiles, old: str, new: str) -> None:
    text = study.config.read_text(encoding="utf-8")
    study.config.write_text(text.replace(f'name = "{old}"', f'name = "{new}"'), encoding="utf-8")


def _files(folder: Path) -> set[Path]:
    """The files under ``folder``, but sqlite's -wal/-shm/-journal files: an earlier test's
    cache, closed by the garbage collector during this one, removes its own."""
    if not folder.exists():
        return set()
    sqlite_side = ("-wal", "-shm", "-journal")
    return {p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(sqlite_side)}


# --- 23.4: a prefix that writes outside the output folder ------------------------------------


@pytest.mark.parametrize("prefix", ["../../x", "/tmp/geval-abs", "a/b", "..", "c:x", ""])
def test_a_prefix_that_leaves_the_output_folder_is_refused(
    study: StudyFiles, tmp_path: Path, prefix: str
) -> None:
    study.write_config(OFFLINE, output={"prefix": prefix})
    before = _files(tmp_path.parent)
    for command in ("run", "score"):
        result = run_cli(command, str(study.config))
        line = _one_line_refusal(result, str(study.config), "[output]", "'prefix'")
        assert repr(prefix) in line
    assert _files(tmp_path.parent) == before, "nothing may be written, here or above"
    assert not Path("/tmp/geval-abs_clar.csv").exists()


def test_a_plain_prefix_and_the_default_one_are_accepted(study: StudyFiles) -> None:
    from geval_async.study.config import load_config

    study.write_config(OFFLINE, output={"prefix": "ueq.v2-run_1"})
    assert load_config(study.config).output.prefix == "ueq.v2-run_1"
    text = study.config.read_text(encoding="utf-8").replace('prefix = "ueq.v2-run_1"\n', "")
    study.config.write_text(text, encoding="utf-8")
    assert load_config(study.config).output.prefix == "config"  # the config file's name


# --- 23.5: criterion names that collide with other outputs -----------------------------------


@pytest.mark.parametrize("name", ["long", "average", "composite", "ttest", "Long", "REPORT"])
def test_a_criterion_named_like_another_output_is_refused(study: StudyFiles, name: str) -> None:
    study.write_config(OFFLINE)
    _rename_criterion(study, "clar", name)
    result = run_cli("run", str(study.config), "--quiet")
    _one_line_refusal(result, str(study.config), repr(name), "'name'", "output")
    assert not study.cache.exists()


def test_criterion_names_that_differ_only_in_case_are_refused(study: StudyFiles) -> None:
    study.write_config(OFFLINE)
    _rename_criterion(study, "fit", "Clar")
    result = run_cli("run", str(study.config), "--quiet")
    _one_line_refusal(result, str(study.config), "'clar'", "'Clar'", "case")


def test_every_output_name_is_a_criterion_or_reserved(judged: StudyFiles) -> None:
    """The reserved names cover what the outputs are named: a new output kind that adds a
    name shows up here, before a criterion of that name can overwrite it."""
    report = run_cli("report", str(judged.config), "--plots", "--html")
    assert report.returncode == 0, report.stderr
    wrote = [line.removeprefix("wrote ") for line in report.stdout.splitlines()]
    wrote = [line for line in wrote if line.startswith(str(judged.output))]
    assert len(wrote) == len(set(wrote)), "a file was written twice"
    # A criterion's own files are in scores/, raw/ and plots/: a name in another folder
    # (stats/t_consistency.csv) cannot be overwritten by one.
    shared = [p for p in wrote if Path(p).parent.name in ("scores", "raw", "plots", "out")]
    names = {Path(p).name.removeprefix("t_").split(".")[0] for p in shared}
    others = {n.split("-")[0] for n in names - {"clar", "fit"}}
    assert others and others <= set(criteria.RESERVED_NAMES), others - set(criteria.RESERVED_NAMES)


# --- record ids as the text the file has -----------------------------------------------------

BIG_A, BIG_B = "123456789012345678901234", "123456789012345678901235"


def _jsonl(path: Path, *ids: str) -> Path:
    """Records whose id is written as given (a JSON number or string literal)."""
    path.write_text("".join(f'{{"id": {i}, "text": "t"}}\n' for i in ids), encoding="utf-8")
    return path


def test_ids_keep_the_text_of_their_numbers(tmp_path: Path) -> None:
    records = load_records(_jsonl(tmp_path / "r.jsonl", "1.0", "1e0", "1", BIG_A, BIG_B))
    assert [r.id for r in records] == ["1.0", "1e0", "1", BIG_A, BIG_B]


def test_ids_of_a_json_array_keep_their_text(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(f'[{{"id": 1e0}}, {{"id": 1.0}}, {{"id": {BIG_A}}}, {{"id": "u1"}}]')
    assert [r.id for r in load_records(path)] == ["1e0", "1.0", BIG_A, "u1"]


def test_ids_read_today_keep_their_text(tmp_path: Path) -> None:
    """Ids whose text is what was read before keep it (output rows, answers --record)."""
    ids = ["7", '"u01"', "-3", "2.5", "0", '"7.0"', "18446744073709551615"]
    records = load_records(_jsonl(tmp_path / "r.jsonl", *ids))
    assert [r.id for r in records] == ["7", "u01", "-3", "2.5", "0", "7.0", "18446744073709551615"]
    # The record's fields are as parsed: a prompt inserting the id is unchanged.
    assert records[0].fields["id"] == 7 and records[3].fields["id"] == 2.5


def test_a_duplicate_id_quotes_its_own_lines(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "r.jsonl", "1", BIG_A, "2", BIG_A)
    with pytest.raises(ConfigError) as error:
        load_records(path)
    assert str(error.value) == (
        f"{path}: line 4, record {BIG_A!r}: duplicate id (first at line 2); ids must be unique"
    )
    text_and_number = _jsonl(tmp_path / "s.jsonl", "5", '"5"')  # the same text: one id
    with pytest.raises(ConfigError, match="line 2, record '5': duplicate id .first at line 1"):
        load_records(text_and_number)


def test_a_study_of_long_integer_ids_runs(sim: SimServer, study: StudyFiles) -> None:
    rows = [json.loads(line) for line in study.records.read_text().splitlines()]
    study.records.write_text(
        "".join(
            json.dumps({**row, "id": 0}).replace('"id": 0', f'"id": {BIG_A[:-2]}{i:02d}') + "\n"
            for i, row in enumerate(rows)
        )
    )
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    score = run_cli("score", str(study.config))
    assert score.returncode == 0, score.stderr
    long_table = (study.output / "scores" / "t_long.csv").read_text()
    assert f"{BIG_A[:-2]}07," in long_table and "e+23" not in long_table


# --- a stray {{ or }} in a prompt ---------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["Rate {{ text }.", "Rate {{text-body}}.", "Rate it }} now {{text}}", "{{1x}}"]
)
def test_a_stray_brace_in_a_prompt_is_warned_of(tmp_path: Path, text: str) -> None:
    path = tmp_path / "p.txt"
    path.write_text(text + "\n{{text}}")
    warning = prompts.stray_braces(load_template(path))
    assert warning is not None and str(path) in warning and "stray" in warning
    assert "\n" not in warning


@pytest.mark.parametrize("text", ["Rate {{text}} and {{ reader }}.", "A {single} brace."])
def test_placeholders_and_single_braces_are_not_stray(tmp_path: Path, text: str) -> None:
    path = tmp_path / "p.txt"
    path.write_text(text)
    assert prompts.stray_braces(load_template(path)) is None


def test_a_stray_brace_is_warned_of_when_the_study_is_read(study: StudyFiles) -> None:
    study.write_config(OFFLINE)
    prompt = study.root / "prompts" / "clar.txt"
    prompt.write_text(prompt.read_text(encoding="utf-8") + "\nKeep {{ text } in mind.\n")
    result = run_cli("run", str(study.config), "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    warned = [line for line in result.stderr.splitlines() if "stray" in line]
    assert len(warned) == 1 and str(prompt) in warned[0], result.stderr
    assert run_cli("run", str(study.config), "--dry-run", "--strict").returncode == 2


# --- a cache path that is no cache folder -----------------------------------------------------


@pytest.mark.parametrize("command", ["status", "score", "report"])
def test_reading_a_cache_that_is_a_file_is_refused(
    study: StudyFiles, tmp_path: Path, command: str
) -> None:
    study.write_config(OFFLINE)
    a_file = tmp_path / "hostname"
    a_file.write_text("judge-box\n")
    result = run_cli(command, str(study.config), "--cache", str(a_file))
    _one_line_refusal(result, str(a_file), "a file, not a cache folder")
    assert not study.output.exists()


@pytest.mark.parametrize("command", ["status", "score", "answers"])
def test_reading_a_cache_folder_that_does_not_exist_is_refused(
    study: StudyFiles, command: str
) -> None:
    study.write_config(OFFLINE)
    result = run_cli(command, str(study.config))
    _one_line_refusal(result, str(study.cache), "no cache folder there")
    assert not study.cache.exists(), "reading must not create it"


# --- scale = [1, 100000000] -------------------------------------------------------------------


def test_a_huge_scale_names_the_file_and_the_criterion(study: StudyFiles) -> None:
    study.write_config(OFFLINE)
    text = study.config.read_text(encoding="utf-8")
    study.config.write_text(text.replace("scale = [1, 5]", "scale = [1, 100000000]"))
    result = run_cli("run", str(study.config), "--quiet")
    _one_line_refusal(result, str(study.config), "'clar'", "'scale'", "1000 points")


# --- a prompt with a byte order mark; report --model X ----------------------

# The keys of the fixture study's first requests, as main computed them before this change.
GOLDEN_KEYS = "1555601e2505"


def _keys_digest(study: StudyFiles) -> str:
    keys = sorted(keys_by_digest(study).values())
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:12]


def test_a_prompt_with_a_byte_order_mark_is_read_without_it(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url)
    assert _keys_digest(study) == GOLDEN_KEYS, "a prompt without a BOM keeps its keys"
    for name in ("clar.txt", "fit.txt"):
        prompt = study.root / "prompts" / name
        prompt.write_bytes(b"\xef\xbb\xbf" + prompt.read_bytes())
    assert _keys_digest(study) == GOLDEN_KEYS, "the BOM is not part of the prompt"
    assert run_study(study).returncode == 0
    answers = run_cli("answers", str(study.config), "--record", "u000-A", "--criterion", "clar")
    assert answers.returncode == 0, answers.stderr
    assert "\ufeff" not in answers.stdout and "You will be given" in answers.stdout


def test_scoring_with_another_model_writes_its_own_files(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    assert run_study(study).returncode == 0
    assert run_cli("score", str(study.config)).returncode == 0
    own = study.output / "scores" / "t_clar.csv"
    before = own.read_bytes()
    other = "org/judge:v1.5"
    assert run_study(study, "--model", other).returncode == 0
    score = run_cli("score", str(study.config), "--model", other)
    assert score.returncode == 0, score.stderr
    theirs = study.output / "scores" / "t-model-org-judge-v1.5_clar.csv"
    assert f"wrote {theirs}" in score.stdout
    assert own.read_bytes() == before, "the study's own table is not overwritten"
    assert {p.parent for p in _files(study.output)} <= {
        study.output / folder for folder in ("scores", "raw")
    }


# --- --dry-run of a request larger than the tpm limit ----------------------------------------


def test_the_dry_run_says_what_the_run_says_of_a_request_above_tpm(
    sim: SimServer, study: StudyFiles
) -> None:
    study.write_config(sim.base_url, limits={"tpm": 40})
    dry = run_study(study, "--dry-run")
    line = _one_line_refusal(dry, "more than the tpm limit (40)")
    assert "expected duration" not in dry.stdout
    run = run_study(study)
    assert _one_line_refusal(run, "more than the tpm limit (40)") == line
    assert sim.stats.received == 0


# --- properties: no prefix leaves the output folder; a number id is the text written ---------

_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(prefix=_names | st.sampled_from(["..", "../x", "/abs", "a\\b", "C:x", ".", "~", "x/.."]))
def test_no_accepted_prefix_names_a_file_outside_the_output_folder(prefix: str) -> None:
    out = Path("/study/out")
    table = TableReader("config.toml", "output", {"prefix": prefix}, SECTION_KEYS["output"])
    try:
        output = parse_output(table, lambda text: out / text, "config")
    except ConfigError as error:
        assert "'prefix'" in str(error) and "\n" not in str(error)
        return
    for folder in ("scores", "raw", "plots", "stats", "."):
        path = Path(os.path.normpath(out / folder / f"{output.prefix}_long.csv"))
        assert path.parent == Path(os.path.normpath(out / folder)), path
        assert PureWindowsPath(f"{output.prefix}_long.csv").name == f"{output.prefix}_long.csv"


@settings(max_examples=200, deadline=None)
@given(model=_names)
def test_a_model_name_in_a_file_name_is_a_plain_part(model: str) -> None:
    assert is_file_name_part(file_name_text(model))


@settings(max_examples=200, deadline=None)
@given(
    number=st.integers().map(str)
    | st.floats(allow_nan=False, allow_infinity=False).map(repr)
    | st.from_regex(r"-?[1-9][0-9]{0,30}(\.[0-9]{1,5})?([eE][+-]?[0-9]{1,2})?", fullmatch=True)
)
def test_a_number_id_is_the_text_written(number: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _jsonl(Path(folder) / "r.jsonl", number, '"other"')
        assert [r.id for r in load_records(path)] == [number, "other"]
