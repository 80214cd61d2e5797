"""The command line: one module per command group; parsing and printing only."""

from .app import main

__all__ = ["main"]
