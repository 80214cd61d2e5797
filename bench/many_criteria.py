"""Loading a study of many criteria: ``geval-async status CONFIG`` at 2,000 to 16,000 criteria.

Each study has two records and N criteria sharing one prompt file, and an empty cache (the
work is the config, the prompts and the plan, not the answers). Each size runs once in a fresh
process (``bench/launch.py``): wall, CPU seconds and peak RSS, and the CPU seconds per
thousand criteria, which stay about level when loading grows with the criteria count (and
grow with it when it grows with its square). ``--baseline FOLDER`` runs another tree's
``geval_async`` beside this one.

    .venv/bin/python bench/many_criteria.py [--quick] [--sizes 2000 8000 16000]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, ROOT, add_baseline, baseline_trees, run_child, save, table, workdir

PROMPT = "Rate the text.\n\nText:\n{{text}}\n\nEvaluation Form (scores ONLY):\n- Score (1-5):"


def write_study(folder: Path, criteria: int) -> Path:
    """A study of ``criteria`` criteria and two records in ``folder``; its config's path."""
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts" / "p.txt").write_text(PROMPT, encoding="utf-8")
    records = "".join(json.dumps({"id": f"r{i}", "text": "t"}) + "\n" for i in range(2))
    (folder / "records.jsonl").write_text(records, encoding="utf-8")
    tables = [
        '[data]\npath = "records.jsonl"\n',
        '[judge]\nmodel = "judge"\nbase_url = "http://127.0.0.1:9/v1"\n',
        '[cache]\npath = "cache"\n',
    ]
    tables += [
        f'[[criteria]]\nname = "c{i}"\nprompt = "prompts/p.txt"\nscale = [1, 5]\n'
        'fields = ["text"]\n'
        for i in range(criteria)
    ]
    config = folder / "config.toml"
    config.write_text("\n".join(tables), encoding="utf-8")
    return config


def _tree_env(tree: str) -> dict[str, str]:
    """The environment that imports ``tree``'s geval_async (PYTHONSAFEPATH: not the one in
    the working folder, which ``python -m`` would put first)."""
    return {"PYTHONPATH": tree, "PYTHONSAFEPATH": "1"}


def make_cache(config: Path, tree: str) -> None:
    """An empty cache folder beside ``config``, made as a run makes it."""
    code = (
        "import sys; from pathlib import Path; "
        "from geval_async.judging.store.cache import JudgeCache; JudgeCache(Path(sys.argv[1]))"
    )
    done = run_child([PYTHON, "-c", code, str(config.parent / "cache")], env=_tree_env(tree))
    if done.returncode != 0:
        raise RuntimeError(done.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="500 and 2,000 criteria only")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000, 16000])
    add_baseline(parser, "another tree's geval_async to run beside this one")
    args = parser.parse_args()
    sizes = [500, 2000] if args.quick else args.sizes
    trees = {"this": str(ROOT), **baseline_trees(parser, args.baseline)}
    rows = []
    with workdir("criteria") as folder:
        for size in sizes:
            config = write_study(folder / f"c{size}", size)
            for name, tree in trees.items():
                make_cache(config, tree)
                done = run_child(
                    [PYTHON, "-m", "geval_async", "status", str(config)],
                    env=_tree_env(tree),
                )
                if done.returncode != 0:
                    raise RuntimeError(done.stderr)
                rows.append(
                    {
                        "tree": name,
                        "criteria": size,
                        "wall_s": done.wall,
                        "cpu_s": done.cpu,
                        "cpu_ms_per_1000": 1000 * done.cpu / (size / 1000),
                        "maxrss_mb": done.maxrss_mb,
                    }
                )
    columns = ["tree", "criteria", "wall_s", "cpu_s", "cpu_ms_per_1000", "maxrss_mb"]
    print(table(rows, columns))
    print(f"results: {save('many_criteria', {'rows': rows})}")


if __name__ == "__main__":
    main()
