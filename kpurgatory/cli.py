"""The ``kpurgatory`` command: one subcommand per module, each registered here.

Each command module exposes ``add_parser(subparsers)``, which registers its parser
and sets ``func`` (``args -> exit code``) as the handler. Modules must not import
heavy optional dependencies (pyspark, matplotlib) at import time: only inside ``func``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import kpurgatory

COMMAND_MODULES: tuple[str, ...] = (
    "kpurgatory.demo",
    "kpurgatory.bench.cli",
    "kpurgatory.conformance.cli",
    "kpurgatory.pipeline.cli",
    "kpurgatory.pipeline.reproduce",
)
"""Modules that register subcommands, in the order ``--help`` lists them."""


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an int >= ``minimum`` (argparse names the flag in the error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def add_command(subparsers: Any, name: str, *, help: str, description: str) -> Any:
    """Register the subcommand ``name`` with its one-line ``help`` and its ``description``
    (printed as written: the command modules lay their descriptions out by hand)."""
    return subparsers.add_parser(
        name,
        help=help,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="kpurgatory",
        description="Kafka's delayed-operation purgatory and timing wheel: demo, tools, checks.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {kpurgatory.__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
