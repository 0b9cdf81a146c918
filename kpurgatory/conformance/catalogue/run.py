"""What one hand-written vector is before it runs, and the catalogue's version."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from kpurgatory.steps import Step

__all__ = ["RULE_GENERATOR_VERSION", "RuleRun"]

RULE_GENERATOR_VERSION = "3"
"""Version of the hand-written rule vectors; bump it when one changes."""


class RuleRun(NamedTuple):
    """One hand-written vector before it is run: its name, what it shows, the rules it
    checks and the function that writes its steps."""

    name: str
    description: str
    rules: tuple[str, ...]
    build: Callable[[], list[Step]]
