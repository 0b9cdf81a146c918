"""Targeted examples: one recorded machine program per seeded mutant, replayed without Hypothesis.

A derandomized budget catches a mutant only as long as the Hypothesis version in use
draws the same examples: another version draws others (the pinned one has no wheel for
every interpreter the package supports), and a "caught" mutant may then survive. So each
mutant also has a witness: a program the machine failed with, stored as its
steps (``tests/mutants/witnesses.py``) and replayed here by plain calls of the machine's
methods (``state.rule(...)``, its invariants, ``state.teardown()``), which no Hypothesis
version changes. The replay must fail with the mutant applied and pass without it.

Record them again after a change of the machines or the catalog, with the hash seed the
test replays them with (a program may depend on where a str key's hash puts it)::

    PYTHONHASHSEED=0 python -m tests.mutants.witness > tests/mutants/witnesses.py

or in parallel: ``--part 0/2 --jsonl a.jsonl`` and ``--part 1/2 --jsonl b.jsonl``, then
``--merge a.jsonl b.jsonl > tests/mutants/witnesses.py``.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

__all__ = ["Witness", "record", "replay"]

Witness = tuple[str, tuple[str, ...]]
"""(machine name, the program's steps after ``state = Machine()``)."""

_STEP = re.compile(r"^(?:[\w, ]+ = )?state\.\w+\(.*\)$", re.DOTALL)
"""One step as Hypothesis prints it: ``state.rule(...)``, maybe bound to bundle names."""

_STEP_START = re.compile(r"^(?:[\w, ]+ = )?state\.\w+\(")
"""The first line of a step."""

HUNTING = settings(
    stateful_step_count=50,
    phases=[Phase.explicit, Phase.generate],
    database=None,
    deadline=None,
    report_multiple_bugs=False,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)
"""What every hunt for a mutant shares: 50 steps, no shrinking, no database, quiet."""

RECORD_SETTINGS = settings(HUNTING, max_examples=500)
"""Searching for a witness: a generous budget, no shrinking (it would cost minutes per
mutant; an unshrunk program of at most 50 steps replays in milliseconds)."""


def steps_of(failure: BaseException) -> tuple[str, ...]:
    """The steps of the failing program Hypothesis attached to ``failure`` (its notes); a
    step printed over several lines (a long argument list) is joined into one."""
    notes = "\n".join(getattr(failure, "__notes__", ()))
    lines = notes.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().startswith("state = ")]
    if not starts:
        raise ValueError(f"no state machine program in the failure's notes:\n{notes}")
    steps: list[str] = []
    pending: list[str] = []
    for line in lines[starts[0] + 1 :]:
        if not pending and not _STEP_START.match(line.strip()):
            break
        pending.append(line.strip() if not pending else line)
        statement = "\n".join(pending)
        try:
            ast.parse(statement)
        except SyntaxError:
            continue
        steps.append(statement)
        pending = []
    return tuple(steps)


REPLAY_SETTINGS = settings(
    max_examples=1,
    phases=[Phase.generate],
    database=None,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    report_multiple_bugs=False,
    print_blob=False,
)
"""One run of the witness inside a Hypothesis test (the machines call ``event`` and
``target``, which need one); its only strategy draws ``None``, so nothing is generated."""


def replay(machine: type[RuleBasedStateMachine], steps: tuple[str, ...]) -> None:
    """Run ``steps`` on a new ``machine``: each a call of one of its methods (or a bundle
    value bound to names) as Hypothesis printed it, the names its arguments use resolved
    in the machine's module. Raises what the machine raises."""
    for step in steps:
        if not _STEP.match(step):
            raise ValueError(f"not a machine step: {step!r}")
    helpers = dict(vars(sys.modules[machine.__module__]))

    @REPLAY_SETTINGS
    @given(st.none())
    def run(_: None) -> None:
        namespace: dict[str, Any] = {"state": machine()}
        try:
            for step in steps:
                exec(step, helpers, namespace)
        finally:
            if not steps or not steps[-1].startswith("state.teardown("):
                namespace["state"].teardown()

    run()


def record(
    cases: Iterator[tuple[str, str, Callable[[], type[RuleBasedStateMachine]], Any]],
    found: Callable[[str, Witness], None],
) -> None:
    """For each (name, machine name, machine factory, patch context) case whose machine
    fails under its patch within ``RECORD_SETTINGS`` and whose program fails again on
    replay, call ``found(name, witness)`` (a name's later cases are skipped once it has
    one); the others are reported on stderr."""
    done: set[str] = set()
    for name, machine_name, factory, patched in cases:
        if name in done:
            continue
        context: AbstractContextManager[Any] = patched
        with context:
            try:
                run_state_machine_as_test(factory(), settings=RECORD_SETTINGS)
            except Exception as failure:
                steps = steps_of(failure)
                try:
                    replay(factory(), steps)
                except (NameError, SyntaxError) as broken:  # a step Python cannot rerun
                    print(f"{name}: the program does not replay: {broken}", file=sys.stderr)
                    continue
                except Exception:
                    done.add(name)
                    found(name, (machine_name, steps))
                    continue
                print(f"{name}: the recorded program does not fail on replay", file=sys.stderr)
                continue
        print(f"{name}: not caught by {machine_name} while recording", file=sys.stderr)


def _cases() -> Iterator[tuple[str, str, Callable[[], type[RuleBasedStateMachine]], Any]]:
    from tests.machines.fault_machine import LifecycleMachine, OptimizedLifecycleMachine
    from tests.machines.purgatory_equivalence import make_purgatory_machine
    from tests.machines.timer_equivalence import make_timer_machine
    from tests.mutants.catalog import MUTANTS, applied
    from tests.support import load

    reference, optimized = load("reference"), load("optimized")
    factories: dict[str, Callable[[], type[RuleBasedStateMachine]]] = {
        "timer": lambda: make_timer_machine(reference, optimized),
        "purgatory": lambda: make_purgatory_machine(reference, optimized),
        "lifecycle-reference": lambda: LifecycleMachine,
        "lifecycle-optimized": lambda: OptimizedLifecycleMachine,
    }
    for mutant in MUTANTS:
        for machine_name in mutant.machines:
            yield mutant.name, machine_name, factories[machine_name], applied(mutant)
    # The lifecycle machine's shared bugs have no witness (see test_witnesses._cases).


def render(witnesses: dict[str, Witness]) -> str:
    """The text of ``tests/mutants/witnesses.py``."""
    lines = [
        '"""Recorded witnesses of the seeded mutants (``python -m tests.mutants.witness``).',
        "",
        "Generated: each entry is a program a machine failed with under the mutant",
        '(``tests/mutants/witness.py`` replays it without Hypothesis)."""',
        "",
        "from __future__ import annotations",
        "",
        "from tests.mutants.witness import Witness",
        "",
        "WITNESSES: dict[str, Witness] = {",
    ]
    for name, (machine_name, steps) in sorted(witnesses.items()):
        lines += [f"    {name!r}: (", f"        {machine_name!r},", "        ("]
        lines += [f"            {step!r}," for step in steps]
        lines += ["        ),", "    ),"]
    return "\n".join([*lines, "}", ""])


def main(argv: list[str]) -> int:
    """``[--part I/N] [--jsonl FILE]``: record the I-th of N shares of the cases, each
    witness appended to FILE as it is found (parallel runs); ``--merge FILE...``: print
    ``tests/mutants/witnesses.py`` from such files. No argument: record all, print it."""
    if argv[:1] == ["--merge"]:
        merged: dict[str, Witness] = {}
        for path in argv[1:]:
            with open(path, encoding="utf-8") as lines:
                for line in lines:
                    name, machine_name, steps = json.loads(line)
                    merged.setdefault(name, (machine_name, tuple(steps)))
        print(render(merged), end="")
        return 0
    part, parts = 0, 1
    out: str | None = None
    if "--part" in argv:
        part, parts = (int(n) for n in argv[argv.index("--part") + 1].split("/"))
    if "--jsonl" in argv:
        out = argv[argv.index("--jsonl") + 1]
    names = sorted({name for name, *_ in _cases()})
    if "--match" in argv:
        names = [name for name in names if argv[argv.index("--match") + 1] in name]
    mine = set(names[part::parts])
    witnesses: dict[str, Witness] = {}

    def found(name: str, witness: Witness) -> None:
        witnesses[name] = witness
        if out is not None:
            with open(out, "a", encoding="utf-8") as sink:
                sink.write(json.dumps([name, witness[0], list(witness[1])]) + "\n")

    record((case for case in _cases() if case[0] in mine), found)
    if out is None:
        print(render(witnesses), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
