"""A new user's first hour: the mistakes they make, each met by one line and exit code 2.

Every test drives ``python -m geval_async`` in a subprocess, as a user types it, with its own
study folder (``study`` in conftest.py) and, where a judge is needed, the simulated one.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from aiohttp import web
from conftest import LoopbackApp, StudyFiles, run_cli, run_study

import geval_async as ga
from geval_async.sim import SimServer


def _one_error_line(stderr: str) -> str:
    """The single line a bad input prints (no traceback, no second line)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.mark.parametrize("url", ["127.0.0.1:8080/v1", "localhost:8080/v1", "ftp://host/v1"])
def test_a_base_url_without_http_is_named_before_anything_is_sent(
    study: StudyFiles, url: str
) -> None:
    # Without the scheme every request used to fail as a "connection reset", retried until
    # the retries ran out, and the run ended minutes later with exit code 1.
    study.write_config(url)
    result = run_study(study)
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert str(study.config.name) in line and "'base_url'" in line and repr(url) in line
    assert "http://" in line  # what to write instead
    assert not study.cache.exists()  # nothing half-written


def test_a_base_url_flag_without_http_names_the_flag(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    result = run_study(study, "--base-url", "127.0.0.1:8080/v1")
    assert result.returncode == 2, result.stderr
    assert _one_error_line(result.stderr).startswith("error: --base-url 127.0.0.1:8080/v1: ")
    assert sim.stats.received == 0 and not study.cache.exists()


def test_openai_base_url_without_http_names_the_variable(study: StudyFiles) -> None:
    study.write_config("http://127.0.0.1:9/v1", judge={"base_url": None})
    result = run_cli("status", str(study.config), env={"OPENAI_BASE_URL": "localhost:1234/v1"})
    assert result.returncode == 2, result.stderr
    assert "$OPENAI_BASE_URL" in _one_error_line(result.stderr)


def test_answers_with_an_empty_cache_says_so(sim: SimServer, study: StudyFiles) -> None:
    # "0 of 0 answers are invalid", exit 0, read as a clean bill of health.
    study.write_config(sim.base_url)
    result = run_cli("answers", str(study.config))
    assert result.returncode == 2, result.stdout + result.stderr
    line = _one_error_line(result.stderr)
    assert str(study.cache) in line and "geval-async run" in line
    assert not study.output.exists()


def test_sim_on_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("sim", "--port", str(port), timeout=30)
    assert result.returncode == 2, result.stderr
    error = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in result.stderr and len(error) == 1, result.stderr
    assert f"--port {port}" in error[0] and "--port 0" in error[0]


def test_sim_with_an_unknown_answer_style_is_one_line() -> None:
    result = run_cli("sim", "--port", "0", "--answer-styles", "judgez", timeout=30)
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert "--answer-styles judgez" in line and "judges" in line  # the known styles


def test_sim_with_rated_scores_it_cannot_read_is_one_line(tmp_path: Path) -> None:
    listed = tmp_path / "rated.json"
    listed.write_text('["a summary", 4]', encoding="utf-8")
    for path, why in ((tmp_path / "missing.json", "cannot read it"), (listed, "JSON object")):
        result = run_cli("sim", "--port", "0", "--rated-scores", str(path), timeout=30)
        assert result.returncode == 2, result.stderr
        line = _one_error_line(result.stderr)
        assert f"--rated-scores {path}" in line and why in line


def test_sim_help_says_what_every_flag_does() -> None:
    result = run_cli("sim", "--help")
    assert result.returncode == 0
    continued = r"(?:\n {24}.*)*"
    flags = re.findall(rf"^  (--[a-z0-9-]+)(.*{continued})", result.stdout, re.M)
    assert len(flags) > 20
    for flag, text in flags:
        words = [w for w in re.sub(r"\(default [^)]*\)", "", text).split() if not w.isupper()]
        assert len(words) >= 3, f"{flag} says nothing of what it does: {text!r}"


def test_the_cache_command_summary_names_its_subcommands() -> None:
    top = " ".join(run_cli("--help").stdout.split())
    summary = top.split(" cache ", 1)[1].split(" meta ", 1)[0]
    sub = run_cli("cache", "--help").stdout
    names = re.findall(r"^    ([a-z]+) ", sub, re.M)
    assert names and all(name in summary for name in names), (summary, names)


def test_ttest_without_two_conditions_says_which_to_name(judged: StudyFiles) -> None:
    # It printed nothing but the judge's line, wrote nothing and exited 0.
    judged.write_config(judged.judge_url, stats={"conditions": None})
    result = run_cli("ttest", str(judged.config), "--limit", "4")
    assert result.returncode == 2, result.stdout + result.stderr
    line = _one_error_line(result.stderr)
    assert "[stats] conditions" in line and "'condition': A, B" in line
    assert not (judged.output / "stats").exists()


def test_answers_for_a_condition_no_record_has_says_so(judged: StudyFiles) -> None:
    # "0 of 24 answers are invalid" for a misspelt condition read as "all clean".
    result = run_cli("answers", str(judged.config), "--limit", "4", "--condition", "a")
    assert result.returncode == 2, result.stdout + result.stderr
    assert _one_error_line(result.stderr) == (
        "error: --condition a: no record has it (the records' conditions: A, B)"
    )


def test_a_config_saved_with_a_byte_order_mark_is_read(sim: SimServer, study: StudyFiles) -> None:
    # Windows editors write one; TOML alone said "Invalid statement (at line 1, column 1)".
    study.write_config(sim.base_url)
    study.config.write_bytes(b"\xef\xbb\xbf" + study.config.read_bytes())
    result = run_cli("run", str(study.config), "--dry-run")  # reads it all, sends nothing
    assert result.returncode == 0, result.stderr
    assert f"items: {2 * study.n_records}" in result.stdout


def test_a_config_not_in_utf8_says_how_to_save_it(sim: SimServer, study: StudyFiles) -> None:
    study.write_config(sim.base_url)
    study.config.write_bytes("# café\n".encode("latin-1") + study.config.read_bytes())
    result = run_cli("status", str(study.config))
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert str(study.config) in line and line.endswith("save the config file as UTF-8")


def test_a_records_file_saved_with_a_byte_order_mark_is_read(
    sim: SimServer, study: StudyFiles
) -> None:
    # It was refused: "UTF-8 byte order mark (BOM) is not supported".
    study.write_config(sim.base_url)
    study.records.write_bytes(b"\xef\xbb\xbf" + study.records.read_bytes())
    result = run_cli("run", str(study.config), "--dry-run")  # reads it all, sends nothing
    assert result.returncode == 0, result.stderr
    assert f"items: {2 * study.n_records}" in result.stdout


def test_a_records_file_not_in_utf8_says_how_to_save_it(sim: SimServer, study: StudyFiles) -> None:
    # It said "str is not valid UTF-8: surrogates not allowed".
    study.write_config(sim.base_url)
    lines = study.records.read_text().splitlines()
    lines[1] = lines[1].replace("}", ', "note": "café"}', 1)
    study.records.write_bytes("\n".join(lines).encode("latin-1"))
    result = run_cli("status", str(study.config))
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert str(study.records) in line and "line 2" in line and "save it as UTF-8" in line


async def test_judge_in_python_without_a_key_names_the_config(study: StudyFiles) -> None:
    # The CLI named the config; ga.judge said only which variable to set.
    study.write_config("https://judge.example/v1")
    with pytest.raises(ga.ConfigError) as raised:
        await ga.judge(study.config)
    assert str(raised.value) == (
        "no API key: set the environment variable OPENAI_API_KEY "
        f"(named by [judge] api_key_env in {study.config})"
    )
    assert not study.cache.exists()


HTML_PAGE = """<!DOCTYPE HTML>
<html lang="en">
    <head><title>Error response</title></head>
    <body>
        <h1>Error response</h1>
        <p>Error code: {status}</p>
    </body>
</html>
"""


class WebPage(LoopbackApp):
    """A web server that is no OpenAI endpoint: every request gets an HTML page."""

    def __init__(self, status: int) -> None:
        super().__init__()
        self.status = status

    async def _page(self, request: web.Request) -> web.Response:
        body = HTML_PAGE.format(status=self.status)
        return web.Response(status=self.status, text=body, content_type="text/html")

    def routes(self) -> list[web.RouteDef]:
        return [web.route("*", "/{tail:.*}", self._page)]


@pytest.mark.parametrize("status", [404, 500])
def test_a_web_page_for_a_judge_is_quoted_on_one_line(study: StudyFiles, status: int) -> None:
    # The page's HTML was printed as it came, a dozen lines for each failure.
    with WebPage(status) as page:
        study.write_config(page.base_url, limits={"retries": 1, "backoff": 0.01})
        result = run_study(study, "--limit", "2")
    assert result.returncode == 1, result.stderr
    output = result.stdout + result.stderr
    assert "<html" not in output.replace("<!DOCTYPE HTML> <html", "")  # only joined lines
    quoted = [line for line in output.splitlines() if "<!DOCTYPE HTML>" in line]
    assert quoted, output
    for line in quoted:
        assert f"Error code: {status}" in line and "</html>" in line
        assert line.startswith(("stopped: ", "  ")), line


@pytest.mark.parametrize("status", [405, 501])
def test_a_server_that_takes_no_chat_completions_stops_the_run_and_stores_nothing(
    study: StudyFiles, status: int
) -> None:
    # 405 was read as "this request is refused for good": every item was stored as a
    # refusal, and the next run, pointed at the right URL, asked for none of them again.
    from geval_async.judging.store.cache import JudgeCache

    with WebPage(status) as page:
        study.write_config(page.base_url, limits={"retries": 1, "backoff": 0.01})
        result = run_study(study)
    assert result.returncode == 1, result.stderr
    output = result.stdout + result.stderr
    assert "does not take chat-completions requests" in output, output
    with JudgeCache(study.cache) as cache:
        assert len(cache) == 0  # no refusal stored
