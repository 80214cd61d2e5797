"""The study a command works on: its config file, patched by the command's flags.

The flags go through :func:`~geval_async.study.overrides.read_overrides`, the reader the file
goes through, so a bad ``--n`` fails like a bad ``n =`` in the file, with the flag named.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from ..study.config import EvalConfig, load_config
from ..study.overrides import read_overrides

__all__ = ["study_config"]


def study_config(args: argparse.Namespace, names: Iterable[str]) -> EvalConfig:
    """``args.config`` loaded, with the flags among ``names`` that were given applied."""
    flags = {name: getattr(args, name, None) for name in names}
    return read_overrides(load_config(args.config), flags, flags=True)
