"""``--timer-only`` has the strength of the full kit on the timer: every timer bug, every seed.

Published ports are timers without a purgatory. For each bug of the port-bug catalogue
that concerns the timer (``TIMER_BUGS``), the timer-only run a porter is told to use
(``kpurgatory conformance --adapter CMD --stateful --timer-only``: the timer-only
vectors, then the timer-only search) must fail the port on every seed of the battery.
Measured in process (the port is ``kpurgatory.optimized`` with the bug planted; the
judge and the search are the ones the adapter runs, and a port that crashes counts as
caught, as an adapter's error answer would be).

- quick tier: the bug shapes of published timer ports, seed 1;
- slow tier: every timer bug, seeds 1-10, search alone and with the vectors.
"""

from __future__ import annotations

import pytest

from kpurgatory import optimized
from kpurgatory.conformance.adapter import DEFAULT_VECTORS_DIR, step_kinds, vector_paths
from kpurgatory.conformance.differences import Judge
from kpurgatory.conformance.driver import DriverSide
from kpurgatory.conformance.stateful import run_stateful
from kpurgatory.conformance.steps import TIMER_STEP_KINDS
from kpurgatory.conformance.vectors import load_vector, vector_steps
from tests.conformance.ports.catalog import PORT_BUGS, TIMER_AREAS, planted, port_bug
from tests.support import load, needs_python_source

pytestmark = needs_python_source()

TIMER_BUGS: tuple[str, ...] = tuple(bug.name for bug in PORT_BUGS if bug.area in TIMER_AREAS)

PUBLISHED_SHAPES: tuple[str, ...] = (
    "flush-runs-first-task-only",
    "wrong-overflow-tick",
    "cancel-keeps-bucketed-task",
    "bucket-expires-at-slot-end",
    "cascade-stranded-in-flushed-bucket",
    "level-from-clock-reading",
)
"""The bug shapes seen in published timer ports: a flush that runs only the first task, an
overflow wheel created with the wrong interval, a cancel that leaves the task to run, a
wrong rounding of the bucket expiration, a task re-added into the bucket being flushed
(stranded there), a level chosen against the clock reading instead of the wheel's time."""


def timer_vectors_catch(name: str) -> bool:
    """Whether the committed timer-only vectors fail the port with bug ``name``."""
    with planted(port_bug(name)):
        for path in vector_paths([DEFAULT_VECTORS_DIR]):
            steps, expected = vector_steps(load_vector(path))
            if set().union(*map(step_kinds, steps)) - TIMER_STEP_KINDS:
                continue
            judge = Judge(timer_only=True)
            side = DriverSide(optimized)
            try:
                for step, expect in zip(steps, expected, strict=True):
                    try:
                        actual = side.execute(step)
                    except Exception:  # the port crashed: an error answer through an adapter
                        return True
                    if judge.judge(step, expect, actual)[0] is not None:
                        return True
            finally:
                side.close()
    return False


def timer_search_catches(name: str, seed: int) -> bool:
    """Whether the timer-only search with ``seed`` fails the port with bug ``name``."""
    with planted(port_bug(name)):
        try:
            failure, _ = run_stateful(
                DriverSide(optimized),
                reference=load("reference"),
                seed=seed,
                timer_only=True,
                shrink=False,
            )
        except Exception:  # the port crashed (its own assertion): caught
            return True
    return failure is not None


def test_the_published_shapes_are_in_the_catalogue_as_timer_bugs() -> None:
    assert set(PUBLISHED_SHAPES) <= set(TIMER_BUGS)
    assert len(TIMER_BUGS) >= 21


def test_the_port_without_a_bug_passes_the_timer_only_search() -> None:
    failure, stats = run_stateful(
        DriverSide(optimized),
        reference=load("reference"),
        seed=1,
        max_examples=30,
        timer_only=True,
    )
    assert failure is None
    assert set(stats.kinds) <= TIMER_STEP_KINDS


@pytest.mark.parametrize("name", PUBLISHED_SHAPES)
def test_a_published_bug_shape_is_caught_by_the_timer_only_search(name: str) -> None:
    assert timer_search_catches(name, 1)


@pytest.mark.slow
@pytest.mark.timeout(0)
@pytest.mark.parametrize("name", TIMER_BUGS)
def test_every_timer_bug_is_caught_timer_only_on_every_seed(name: str) -> None:
    """The default timer-only run (vectors, then search) on seeds 1-10; the published
    shapes by the search alone, on every seed."""
    if name not in PUBLISHED_SHAPES and timer_vectors_catch(name):
        return  # the run fails at its vectors, whatever the seed
    missed = [seed for seed in range(1, 11) if not timer_search_catches(name, seed)]
    assert not missed, f"{name}: the timer-only run missed it on seeds {missed}"
