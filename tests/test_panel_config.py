"""A panel of judges in the config: ``[[judges]]`` and ``[panel]`` read, checked, and split
into one-judge studies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import no_judge_named

from geval_async.errors import ConfigError
from geval_async.options import PanelPool
from geval_async.study.config import load_config

HEAD = """
[data]
path = "records.jsonl"

[sampling]
n = 4
temperature = 1.0

[limits]
rpm = 600
concurrency = 8

[cache]
path = "cache"

[output]
path = "out"
prefix = "study"

[[criteria]]
name = "flu"
prompt = "flu.txt"
scale = [1, 5]
fields = ["text"]
"""

THREE = """
[[judges]]
name = "gpt"
model = "gpt-4o-mini"
base_url = "https://api.openai.com/v1"

[[judges]]
name = "gemini"
model = "gemini-2.0-flash"
base_url = "https://generativelanguage.googleapis.com/v1beta/openai"
api_key_env = "GEMINI_API_KEY"
[judges.limits]
rpm = 15
[judges.sampling]
temperature = 0.7

[[judges]]
name = "local"
model = "Qwen/Qwen2.5-7B-Instruct"
base_url = "http://127.0.0.1:8000/v1"

[panel]
pool = "median"
weights = { gpt = 2 }
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "flu.txt").write_text("Rate {{text}} 1-5.\nRating:", encoding="utf-8")
    (tmp_path / "records.jsonl").write_text('{"id": "a", "text": "x"}\n', encoding="utf-8")
    path = tmp_path / "config.toml"
    path.write_text(HEAD + text, encoding="utf-8")
    return path


def test_three_judges_each_with_their_own_endpoint_limits_and_sampling(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, THREE))
    assert config.is_panel and config.judge_names == ("gpt", "gemini", "local")
    gemini = config.for_judge("gemini")
    assert gemini.judge.model == "gemini-2.0-flash"
    assert gemini.judge.api_key_env == "GEMINI_API_KEY"
    # its own keys on top of the study's tables; the rest inherited
    assert gemini.limits.rpm == 15 and gemini.limits.concurrency == 8
    assert gemini.sampling.temperature == 0.7 and gemini.sampling.n == 4
    gpt = config.for_judge("gpt")
    assert gpt.limits.rpm == 600 and gpt.sampling.temperature == 1.0
    # a member is a one-judge study with its own output names, the same cache and records
    assert not gpt.is_panel and gpt.output.prefix == "study-judge-gpt"
    assert gpt.cache_path == config.cache_path and gpt.data == config.data
    assert [m.judge.model for m in config.members()] == [
        "gpt-4o-mini",
        "gemini-2.0-flash",
        "Qwen/Qwen2.5-7B-Instruct",
    ]
    # the first judge stands for the panel where one judge is read
    assert config.judge == gpt.judge
    assert config.panel.pool == PanelPool.MEDIAN
    assert config.panel.weight("gpt") == 2.0 and config.panel.weight("local") == 1.0


def test_one_judge_is_its_own_only_member(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[judge]\nmodel = "m"\n'))
    assert not config.is_panel and config.members() == (config,)
    with pytest.raises(
        ConfigError, match=re.escape(no_judge_named("x", "none: it has one [judge]"))
    ):
        config.for_judge("x")


JUDGE_A = '[[judges]]\nname = "a"\nmodel = "m1"\n'
JUDGE_B = '[[judges]]\nname = "b"\nmodel = "m2"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[judge]\nmodel = "m"\n' + JUDGE_A, r"both \[judge\] and \[\[judges\]\]"),
        (JUDGE_A + JUDGE_A.replace("m1", "m3"), r"'a' and 'a' are one name"),
        (JUDGE_A + JUDGE_A.replace('"a"', '"A"').replace("m1", "m3"), "'a' and 'A' are one name"),
        (JUDGE_A + JUDGE_A.replace('"a"', '"c"'), "judges 'a' and 'c' would share their cached"),
        (
            JUDGE_A + 'base_url = "http://127.0.0.1:8000/v1"\n' + JUDGE_A.replace('"a"', '"c"'),
            "judges 'a' and 'c' would share",
        ),
        ('[[judges]]\nmodel = "m1"\n', r"\[judges\] \[1\] 'name' is required"),
        ('[[judges]]\nname = "a/b"\nmodel = "m1"\n', "'name' 'a/b' must be letters"),
        ('[[judges]]\nname = "Panel"\nmodel = "m1"\n', "'name' 'Panel' is the panel's own"),
        (JUDGE_A + 'modle = "x"\n', "unknown key 'modle'"),
        (JUDGE_A + "[judges.limits]\nrpmm = 3\n", r"\[judges.a.limits\] unknown key 'rpmm'"),
        (JUDGE_A + "[judges.sampling]\nn = 500\n", r"\[judges.a.sampling\] 'n' must be at most"),
        (JUDGE_A + JUDGE_B + "[panel]\nweights = { c = 1 }\n", "'weights' names 'c'"),
        (JUDGE_A + JUDGE_B + "[panel]\nweights = { a = -1 }\n", "0 or above"),
        (JUDGE_A + JUDGE_B + "[panel]\nweights = { a = 0, b = 0 }\n", "at least one judge"),
        (JUDGE_A + JUDGE_B + '[panel]\npool = "mode"\n', "'pool' must be one of mean, median"),
        ('[judge]\nmodel = "m"\n[panel]\npool = "mean"\n', r"\[panel\] needs \[\[judges\]\]"),
        ('[judges]\nname = "a"\nmodel = "m"\n', "'judges' must be"),
    ],
)
def test_a_bad_panel_is_one_line_naming_the_file_and_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)
