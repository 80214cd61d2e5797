"""``geval-async demo``: the UEQ example end to end, with the simulated judge, no API key.

It starts geval-async's simulated OpenAI-compatible judge on a free loopback port, points the
shipped UEQ study (``examples/ueq``: 24 users x 2 conditions x 4 criteria, n = 10) at it, and
after the CLI has run the judge stage, scores, averages, tests and plots from the cache. The
simulated judge's ratings are synthetic, and every output says so.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import ConfigError
from ..sim.server import SimServer, SimSettings
from ..study.config import EvalConfig, apply_overrides, load_config
from ..study.shipped import shipped

EXAMPLE = shipped("examples", "ueq", "config.toml")


def demo_server() -> SimServer:
    """The demo's judge: ~30 ms median latency with a tail, 1% unparseable answers."""
    return SimServer(
        SimSettings(
            latency_ms=30,
            latency_sigma=0.6,
            invalid_answers=0.01,
            rpm=20_000,
            tpm=20_000_000,
            seed=7,
            batch_seconds=2.0,  # `demo --batch`: long enough to see the progress line
        )
    )


def demo_config(folder: Path, base_url: str, *, fresh: bool = False) -> EvalConfig:
    """The UEQ example config, pointed at the simulated judge and at ``folder``."""
    if not EXAMPLE.is_file():
        raise ConfigError(
            f"{EXAMPLE}: the demo's example study is missing from this installation; "
            "reinstall geval-async (`pip install --force-reinstall geval-async`)"
        )
    folder = folder.resolve()
    cache = folder / "cache"
    if fresh and cache.exists():
        shutil.rmtree(cache)
    return apply_overrides(
        load_config(EXAMPLE),
        base_url=base_url,
        model="sim-judge",
        cache=str(cache),
        output=str(folder / "out"),
        concurrency=32,
        rpm=20_000,
        tpm=20_000_000,
    )
