"""What a port declares it has: the steps and features it lacks, and whether it runs tasks inline.

Most published ports of Kafka's timer have no ``next_due_time``, some no cancel, no
size or no re-add, and some hand expired tasks to another thread instead of running
them inside ``advance_clock``. ``Capabilities`` is that declaration, made by the
adapter in its answer to ``init`` (``"capabilities": {"without": [...], "async_run":
true}``) or by the command line (``--without``, ``--async-run``). The kit then never
sends what the port lacks: the search generates no such step, a vector that needs one
is listed as not consumed (not sent), and the report names what was not checked.
docs/conformance.md states the contract.

``without`` names step kinds (``cancel``, ``next_due_time``, ``clock_advance``, ...)
and six features: ``re_add`` (adding a task that is already scheduled or has run),
``on_run`` (a task performing steps when it runs), ``callbacks`` (an operation whose
``try_complete``, ``on_complete`` or ``on_expiration`` performs steps),
``nested_advance`` (a task or callback that advances a timer or the purgatory: a drain
inside a drain, R74), ``negative_time`` (a run whose clock or start reading is negative,
R1) and ``size`` (the timers' sizes: ``state.timer_sizes`` is then not compared).
For the threads mode
(``THREADS_FEATURES``): ``threads`` (the adapter has no threads mode at all) and the
calls only a threads program makes: ``abandon``, ``safe_try_complete`` and
``maybe_try_complete`` (no program then calls them); a step kind it lacks
(``cancel_for_key``, ``purgatory_advance``, ...) is left out of its programs too.

``async_run``: the port runs expired tasks after the flush, on another thread. It
must still answer a step only once the tasks that step handed over have run (wait for
its executor to go idle). What the kit checks then: each task runs exactly once, never
early, at the clock reading of the step that was due to run it, and a cancel before the
flush wins; the order of the tasks within one step is not compared, and no task or
operation callback performs steps (``on_run``, ``callbacks``: with tasks on other
threads their order is not defined).
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kpurgatory.conformance.steps import Add, Init, Step, Watch, nested_steps

__all__ = ["CAPABILITY_NAMES", "FEATURES", "THREADS_FEATURES", "Capabilities", "needed"]

THREADS_FEATURES: tuple[str, ...] = (
    "threads",
    "abandon",
    "safe_try_complete",
    "maybe_try_complete",
)
"""What only the threads mode uses: the mode itself, and calls no step makes."""

FEATURES: tuple[str, ...] = (
    "re_add",
    "on_run",
    "callbacks",
    "nested_advance",
    "negative_time",
    "size",
    *THREADS_FEATURES,
)
"""Declarable features that are not step kinds."""

CAPABILITY_NAMES: frozenset[str] = frozenset(
    cls.STEP for cls in typing.get_args(Step) if cls.STEP != "init"
) | frozenset(FEATURES)
"""Everything ``without`` may name."""

NESTED_ADVANCES: frozenset[str] = frozenset({"advance", "purgatory_advance"})
"""Step kinds that, performed from a task or callback, are ``nested_advance``."""


@dataclass(frozen=True)
class Capabilities:
    """A port's declaration (module docstring); the default is a port that has everything."""

    without: frozenset[str] = frozenset()
    async_run: bool = False

    def __post_init__(self) -> None:
        unknown = sorted(set(self.without) - CAPABILITY_NAMES)
        if unknown:
            raise ValueError(
                f"unknown capability {', '.join(map(repr, unknown))}; a port may declare "
                f"without any of {sorted(CAPABILITY_NAMES)}"
            )

    @staticmethod
    def parse_without(text: str) -> frozenset[str]:
        """``--without``'s comma-separated names; ``ValueError`` naming an unknown one."""
        names = frozenset(part.strip() for part in text.split(",") if part.strip())
        Capabilities(names)  # validates
        return names

    @staticmethod
    def from_json(data: object) -> Capabilities:
        """An ``init`` answer's ``capabilities`` object; ``ValueError`` naming the field."""
        if not isinstance(data, Mapping):
            raise ValueError("capabilities must be a JSON object")
        extra = sorted(set(data) - {"without", "async_run"})
        if extra:
            raise ValueError(f"capabilities: unknown field {extra[0]!r} (without, async_run)")
        without = data.get("without", [])
        if not isinstance(without, list) or not all(isinstance(n, str) for n in without):
            raise ValueError("capabilities.without must be a list of names")
        async_run = data.get("async_run", False)
        if not isinstance(async_run, bool):
            raise ValueError("capabilities.async_run must be true or false")
        return Capabilities(frozenset(without), async_run)

    def merged(self, other: Capabilities) -> Capabilities:
        """Both declarations at once (the flags and the adapter's own)."""
        return Capabilities(self.without | other.without, self.async_run or other.async_run)

    def has(self, name: str) -> bool:
        """Whether the port has step kind or feature ``name`` (``on_run`` and
        ``callbacks`` also need tasks run inline)."""
        if name in ("on_run", "callbacks") and self.async_run:
            return False
        return name not in self.without

    def missing(self, steps: Sequence[Step]) -> list[str]:
        """The declared-absent capabilities ``steps`` need, in ``CAPABILITY_NAMES`` order."""
        return sorted(name for name in needed(steps) if not self.has(name))

    def describe(self) -> str:
        """One line for reports: what was not checked, or "" for a port that has everything."""
        parts = []
        if self.without:
            parts.append("declared without " + ", ".join(sorted(self.without)))
        if self.async_run:
            parts.append(
                "tasks run asynchronously (the order within a step and on_run are not checked)"
            )
        return "; ".join(parts)


def needed(steps: Iterable[Step]) -> set[str]:
    """The step kinds and features a sequence uses."""
    names: set[str] = set()
    added: set[str] = set()

    def visit(step: Step, nested: bool) -> None:
        names.add(step.STEP)
        if nested and step.STEP in NESTED_ADVANCES:
            names.add("nested_advance")
        if isinstance(step, Add):
            if step.task in added:
                names.add("re_add")
            added.add(step.task)
            if step.on_run:
                names.add("on_run")
        elif isinstance(step, Watch) and nested_steps(step):
            names.add("callbacks")
        for _, inner in nested_steps(step):
            visit(inner, True)

    for step in steps:
        if isinstance(step, Init):
            added = set()
            if step.start_ms < 0 or step.clock_ms < 0:
                names.add("negative_time")
            continue
        visit(step, False)
    return names
