"""``geval-async sim``'s arguments, added only when that command is chosen.

The command takes a flag per setting of the simulated judge (:class:`~geval_async.sim.SimSettings`).
Reading those settings imports the simulated judge and with it aiohttp.web, which no other
command needs: so the flags are added by a :class:`CommandParser` when ``sim`` is the command
being parsed (or asked for its ``--help``), and every other command starts without them.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["CommandParser", "add_sim_command", "sim_setting_names"]


class CommandParser(argparse.ArgumentParser):
    """A command's parser that can add some of its arguments only when the command is chosen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deferred: list[Callable[[argparse.ArgumentParser], None]] = []

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        # argparse parses a chosen command's arguments (and its --help) through this method.
        while self.deferred:
            self.deferred.pop(0)(self)
        return super().parse_known_args(*args, **kwargs)


def add_sim_command(commands: Any, handler: Callable[[argparse.Namespace], int]) -> None:
    """Register ``sim`` on the CLI's subparsers (made with ``parser_class=CommandParser``)."""
    sim = commands.add_parser("sim", help="serve the simulated OpenAI-compatible judge")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    sim.deferred.append(_setting_arguments)
    sim.set_defaults(handler=handler)


def sim_setting_names() -> list[str]:
    """The simulated judge's settings, each a flag of ``sim`` (imports the simulated judge)."""
    from ..sim.settings import SimSettings

    return [f.name for f in dataclasses.fields(SimSettings)]


def _setting_arguments(sim: argparse.ArgumentParser) -> None:
    from ..sim.settings import SimSettings

    for f in dataclasses.fields(SimSettings):
        default = f.default
        flag = "--" + f.name.replace("_", "-")
        if isinstance(default, bool):
            sim.add_argument(flag, action="store_true", help=f"(default {default})")
        else:
            kind: Callable[[str], Any] = type(default) if default is not None else _number
            sim.add_argument(flag, type=kind, default=default, help=f"(default {default})")


def _number(text: str) -> float | int | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
