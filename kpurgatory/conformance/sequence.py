"""Whether a list of steps is a valid run, checked without running it.

``sequence_error`` finds the steps ``Driver`` would refuse (``StepError``) or a task's
run would meet, so that vectors, ports' replays and the shrinker can reject a list
before any implementation sees it (docs/vectors.md, "The step language").
"""

from __future__ import annotations

from collections.abc import Sequence

from kpurgatory.steps import (
    Add,
    Advance,
    Cancel,
    Close,
    ExecutorShutdown,
    ForceComplete,
    Init,
    NextDueTime,
    SetReady,
    Step,
    Watch,
    nested_steps,
)

__all__ = ["sequence_error"]


def sequence_error(steps: Sequence[Step]) -> tuple[int, str] | None:
    """The first step (0-based index) that does not fit the sequence, and why; else None.

    Checked without running anything, as ``Driver`` would refuse it or a task's run
    would meet it: the first step is an ``init`` (a later ``init`` starts a new run);
    every timer label is declared by the run's ``init``; every label a step refers to
    (``cancel``, ``set_ready``, ``force_complete``, and the same inside a task's
    ``on_run`` and an operation's callbacks) was defined earlier in the run by an ``add``
    or a ``watch`` (a task's ``on_run`` may name the task itself, an operation's callbacks
    the operation itself); a label is a task or an operation, not both; a re-add repeats
    the task's delay and ``on_run``; a repeated watch repeats the watch.
    """
    tasks: dict[str, Add] = {}
    operations: dict[str, Watch] = {}
    timers: tuple[str, ...] = ()

    def check(step: Step, nested: bool) -> str | None:
        if isinstance(step, Init):
            return "init inside a callback's steps" if nested else None
        if (
            isinstance(step, Add | Advance | NextDueTime | Close | ExecutorShutdown)
            and step.timer not in timers
        ):
            return f"unknown timer label {step.timer!r}; init declared {list(timers)}"
        if isinstance(step, Add):
            if step.task in operations:
                return f"{step.task!r} is an operation; only tasks are added"
            first = tasks.setdefault(step.task, step)
            if (first.delay_ms, first.on_run) != (step.delay_ms, step.on_run):
                return f"a re-add of {step.task!r} must repeat its delay and on_run"
        elif isinstance(step, Cancel):
            if step.task not in tasks and step.task not in operations:
                return f"unknown task or operation label {step.task!r} (not added or watched)"
        elif isinstance(step, Watch):
            if step.operation in tasks:
                return f"{step.operation!r} is a task label"
            if operations.setdefault(step.operation, step) != step:
                return f"a repeated watch of {step.operation!r} must repeat its first watch"
        elif isinstance(step, SetReady | ForceComplete) and step.operation not in operations:
            return f"unknown operation label {step.operation!r} (not watched before)"
        owner = step.task if isinstance(step, Add) else getattr(step, "operation", "")
        for field, inner in nested_steps(step):
            problem = check(inner, True)
            if problem is not None:
                return f"{inner.STEP} in the {field} of {owner!r}: {problem}"
        return None

    for index, step in enumerate(steps):
        if isinstance(step, Init):
            tasks, operations, timers = {}, {}, step.timers
            continue
        if index == 0:
            return 0, "the first step of a run must be init"
        problem = check(step, False)
        if problem is not None:
            return index, f"{step.STEP}: {problem}"
    return None
