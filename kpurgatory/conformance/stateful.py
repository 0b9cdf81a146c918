"""Stateful conformance: Hypothesis generates step sequences; the reference judges every step.

``run_stateful(other)`` drives a Hypothesis ``RuleBasedStateMachine`` whose rules are
the steps of the step language (``kpurgatory.conformance.steps``). Each generated step
runs on the in-process reference (through ``Driver``) and on ``other``, a ``Side``:
another implementation in process (``DriverSide``) or a port behind its adapter
(``AdapterSide``). The two observations are compared with ``compare_observations``
after every step. On a difference Hypothesis shrinks the sequence, and the result is a
``StatefulFailure`` holding the **shrunk** steps, ready to print as JSON lines that
``kpurgatory conformance --replay`` (or the porter's own test) runs again.

The generated runs are built to be valid for any conforming implementation: labels
are consistent (a re-add repeats the task's delay and ``on_run``), nested ``on_run``
steps only re-add tasks that run nothing themselves (so a run always terminates), and
values stay within +-2**40 (safe for 64-bit ports). Delays and clock moves are shaped
by the run's tick and wheel size, so short runs on tiny wheels reach deep levels and
land on slot boundaries.

Needs Hypothesis (the ``conformance`` extra: ``pip install 'kpurgatory[conformance]'``);
``kpurgatory conformance`` imports this module only for ``--stateful`` and ``--replay``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from hypothesis import HealthCheck, Phase, Verbosity, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from kpurgatory.conformance.adapter import AdapterError, AdapterProcess
from kpurgatory.conformance.capabilities import Capabilities
from kpurgatory.conformance.differences import Judge, report_json
from kpurgatory.conformance.driver import DriverSide, Observation, sequence_error
from kpurgatory.conformance.steps import (
    Add,
    Advance,
    Cancel,
    CancelForKey,
    CheckAndComplete,
    ClockAdvance,
    ForceComplete,
    Init,
    Key,
    NextDueTime,
    PurgatoryAdvance,
    SetReady,
    Shutdown,
    Step,
    Watch,
    step_to_json,
)
from kpurgatory.spec.known_differences import KnownDifference

__all__ = [
    "KEY_POOL",
    "AdapterSide",
    "DriverSide",
    "Side",
    "StatefulFailure",
    "StatefulStats",
    "check_sequence",
    "failure_kind",
    "format_failure",
    "make_machine",
    "minimize",
    "run_stateful",
]

KEY_POOL: tuple[Key, ...] = ("a", "b", "c", 7, "7")
"""Watch keys the machine uses: few, so operations share keys; 7 and "7" differ (R24)."""

LIMIT = 1 << 40
"""Bound on every generated delay and clock move."""

NEGATIVE_TIME_DIFFERENCE = "kafka-truncating-division"
"""The known difference under which runs start at no negative time (see ``make_machine``)."""


class Side(Protocol):
    """One implementation under comparison: executes a step, returns its observation.

    An ``Init`` step starts a new run. ``AdapterError`` means the side did not answer.
    """

    def execute(self, step: Step) -> Observation: ...

    def close(self) -> None: ...


class AdapterSide:
    """A port behind its adapter process; the process is started (again) at each ``Init``
    if it is not running, so one crash does not end the whole search."""

    def __init__(self, adapter: AdapterProcess) -> None:
        self.adapter = adapter

    def execute(self, step: Step) -> Observation:
        """Send ``step`` to the adapter and return its answer."""
        if isinstance(step, Init) and not self.adapter.running:
            self.adapter.start()
        return self.adapter.send(step)

    @property
    def last_absent(self) -> frozenset[str]:
        """The state fields the last answer declared absent (answered null)."""
        return self.adapter.last_absent

    def close(self) -> None:
        """Nothing to do: the adapter's owner closes it."""


@dataclass
class StatefulFailure:
    """A sequence on which ``other`` disagrees with the reference at its last step."""

    steps: list[Step]
    message: str
    expected: dict[str, Any] | None
    actual: dict[str, Any] | None

    @property
    def step_index(self) -> int:
        """Index of the step that diverged (the last one; 0-based, reports print + 1)."""
        return len(self.steps) - 1

    @property
    def step_number(self) -> int:
        """The diverging step's number as reports print it (from 1, like every report)."""
        return len(self.steps)

    @property
    def kind(self) -> tuple[str, str]:
        """What failed: ``failure_kind`` of this failure."""
        return failure_kind(self.steps[-1], self.message)

    def json_lines(self) -> list[str]:
        """The steps as JSON lines, the adapter protocol's input format."""
        return [json.dumps(step_to_json(step)) for step in self.steps]


def failure_kind(step: Step, message: str) -> tuple[str, str]:
    """The kind of a divergence: the step kind and what differed (``raised``, ``result``,
    ``events``, ``tries``, the state fields, or ``no answer``). Shrinking keeps it, so the
    failure reported is the one the search found, not another one met on the way."""
    head = message.split(":", 1)[0].split(" (", 1)[0]
    if head == "state":
        fields = sorted(
            part.split(":", 1)[0].strip()
            for part in message.removeprefix("state:").split(" (", 1)[0].split(";")
        )
        head = "state " + ",".join(fields)
    return step.STEP, head


@dataclass
class StatefulStats:
    """How much the search did."""

    runs: int = 0
    steps: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    accepted: dict[str, int] = field(default_factory=dict)  # known difference id -> steps


def _compare(
    steps: list[Step],
    expected: Observation,
    other: Side,
    step: Step,
    judge: Judge,
    accepted: dict[str, int],
) -> StatefulFailure | None:
    try:
        actual = other.execute(step)
    except AdapterError as exc:
        return StatefulFailure(
            list(steps),
            f"no answer: {exc}",
            report_json(expected, timer_only=judge.timer_only),
            None,
        )
    absent: frozenset[str] = getattr(other, "last_absent", frozenset())
    message, used = judge.judge(step, expected, actual, absent=absent)
    for ident in used:
        accepted[ident] = accepted.get(ident, 0) + 1
    if message is None:
        return None
    shown = judge.expected if judge.expected is not None else expected
    return StatefulFailure(
        list(steps),
        message,
        report_json(shown, timer_only=judge.timer_only),
        report_json(actual, timer_only=judge.timer_only),
    )


def check_sequence(
    steps: Sequence[Step],
    other: Side,
    reference: ModuleType,
    *,
    allow: Sequence[KnownDifference] = (),
    timer_only: bool = False,
    accepted: dict[str, int] | None = None,
    capabilities: Capabilities | None = None,
) -> StatefulFailure | None:
    """Run ``steps`` on the reference and on ``other``; the first divergence, or None.

    The returned failure's ``steps`` end at the diverging step. ``allow`` and
    ``timer_only`` shape the comparison (``Judge``); ``accepted`` (if given) counts the
    steps each known difference was accepted on. This is what ``kpurgatory conformance
    --replay FILE`` runs.
    """
    ref = DriverSide(reference)
    judge = Judge(allow, timer_only=timer_only, capabilities=capabilities)
    counts: dict[str, int] = {} if accepted is None else accepted
    done: list[Step] = []
    try:
        for step in steps:
            done.append(step)
            failure = _compare(done, ref.execute(step), other, step, judge, counts)
            if failure is not None:
                return failure
    finally:
        ref.close()
        other.close()
        judge.close()
    return None


def make_machine(
    other: Side,
    reference: ModuleType,
    on_failure: Callable[[StatefulFailure], None],
    stats: StatefulStats,
    *,
    allow: Sequence[KnownDifference] = (),
    timer_only: bool = False,
    capabilities: Capabilities | None = None,
) -> type[RuleBasedStateMachine]:
    """The machine class: reference (in process) versus ``other``, compared at every step.

    ``timer_only`` generates only timer steps (``TIMER_STEP_KINDS``: a port of the timer
    alone); ``allow`` is passed to the comparison (``Judge``). When it allows Kafka's
    truncating division, no run starts at a negative clock reading or start time: upstream
    Kafka then indexes its wheel with a negative slot (``ArrayIndexOutOfBoundsException``,
    a crash that no difference excuses), so such runs could only fail an honest Kafka port.
    """
    no_negative_times = any(d.id == NEGATIVE_TIME_DIFFERENCE for d in allow)
    found: list[StatefulFailure] = []  # the first divergence found, whose kind shrinking keeps
    clock_readings = [0, 0, 7, -5, 1000, -LIMIT, LIMIT]
    start_offsets = [0, 0, 0, -3, 5]
    if no_negative_times:
        clock_readings = [reading for reading in clock_readings if reading >= 0]
        start_offsets = [offset for offset in start_offsets if offset >= 0]

    caps = Capabilities() if capabilities is None else capabilities

    def purgatory_steps(_: object) -> bool:
        """Purgatory rules are never drawn for a timer-only port (no wasted steps)."""
        return not timer_only

    def available(*names: str) -> Callable[[object], bool]:
        """A rule is drawn only if the port has every step kind or feature it sends."""
        return lambda _: all(caps.has(name) for name in names)

    class ConformanceMachine(RuleBasedStateMachine):
        """Generates valid runs of the step language; see the module docstring."""

        def __init__(self) -> None:
            super().__init__()
            self.reference = DriverSide(reference)
            self.judge = Judge(allow, timer_only=timer_only, capabilities=caps)
            self.steps: list[Step] = []
            self.tasks: dict[str, tuple[int, tuple[Step, ...]]] = {}
            self.operations: dict[str, Watch] = {}
            self.timers: tuple[str, ...] = ("main",)
            self.tick = 1
            self.wheel = 20
            self.shut_down = False

        # -- plumbing -------------------------------------------------------------------

        def do(self, step: Step) -> None:
            self.steps.append(step)
            stats.steps += 1
            stats.kinds[step.STEP] = stats.kinds.get(step.STEP, 0) + 1
            expected = self.reference.execute(step)
            failure = _compare(self.steps, expected, other, step, self.judge, stats.accepted)
            if failure is not None:
                if found and found[0].kind != failure.kind:
                    # another divergence than the one found: not a smaller example of it
                    # (Hypothesis shrinks towards the failure it found, not any failure)
                    reject()
                on_failure(failure)
                found.append(failure)
                raise AssertionError(f"step {failure.step_number} {step.STEP}: {failure.message}")

        def teardown(self) -> None:
            self.reference.close()
            self.judge.close()
            other.close()

        def delay(self, data: st.DataObject) -> int:
            """Any int delay is legal (R1): small, on tick and span boundaries, negative,
            and at the +-LIMIT extremes."""
            kind = data.draw(
                st.sampled_from(["small", "small", "near", "ticks", "span", "negative", "extreme"])
            )
            if kind == "near":  # one tick either side of a slot or wheel edge from now
                ticks = data.draw(st.sampled_from([0, 1, 1, 2, self.wheel - 1, self.wheel]))
                return self.tick * ticks + data.draw(st.sampled_from([0, 0, -1, 1]))
            if kind == "extreme":
                return data.draw(st.sampled_from([LIMIT, -LIMIT, LIMIT - 1, -LIMIT + 1]))
            if kind == "small":
                return data.draw(st.integers(0, 3 * self.tick * self.wheel))
            if kind == "ticks":
                return self.tick * data.draw(st.integers(0, 2 * self.wheel)) + data.draw(
                    st.sampled_from([0, 0, -1, 1])
                )
            if kind == "span":
                level = data.draw(st.integers(1, 4))
                times = data.draw(st.integers(1, self.wheel))
                jitter = data.draw(st.sampled_from([0, -1, 1, -self.tick, self.tick]))
                return max(-LIMIT, min(LIMIT, self.tick * int(self.wheel**level) * times + jitter))
            return -data.draw(st.integers(1, 3 * self.tick))

        def moves(self, data: st.DataObject, timer: str = "main") -> int:
            """A clock move or timeout: mostly forward, sometimes 0, sometimes exactly to
            (or one short of) the next due time of ``timer`` (as the reference has it: the
            edge where a drain must or must not hand a task over), and sometimes negative,
            which every implementation must refuse with ValueError (R8, R35)."""
            kind = data.draw(
                st.sampled_from(["small", "small", "tick", "span", "zero", "negative", "due"])
            )
            if kind == "due":
                driver = self.reference.driver
                if driver is not None:
                    due = driver.timers[timer].next_due_time
                    now = driver.clock.now_ms()
                    if due is not None and 0 <= due - now <= LIMIT:
                        return int(due - now - data.draw(st.sampled_from([0, 0, 1])))
                kind = "small"
            if kind == "zero":
                return 0
            if kind == "negative":
                return -data.draw(
                    st.sampled_from([1, self.tick, 2 * self.tick * self.wheel, LIMIT])
                )
            if kind == "small":
                return data.draw(st.integers(1, 2 * self.tick * self.wheel))
            if kind == "tick":
                return self.tick * data.draw(st.integers(1, 3))
            level = data.draw(st.integers(1, 4))
            return min(LIMIT, self.tick * int(self.wheel**level) + data.draw(st.integers(-1, 1)))

        def task_label(self, data: st.DataObject) -> str:
            return data.draw(st.sampled_from(sorted(self.tasks)))

        def op_label(self, data: st.DataObject) -> str:
            return data.draw(st.sampled_from(sorted(self.operations)))

        def nested(self, data: st.DataObject, own: str) -> tuple[Step, ...]:
            """Steps a new task performs when it runs (``Add.on_run``)."""
            steps: list[Step] = []
            kinds = ["cancel", "add"]
            if not timer_only:
                kinds += ["set_ready", "check", "force", "cancel_for_key"]
            step_kind = {"check": "check_and_complete", "force": "force_complete"}
            kinds = [kind for kind in kinds if caps.has(step_kind.get(kind, kind))]
            if not caps.has("re_add"):  # a nested add re-adds an existing task
                kinds = [kind for kind in kinds if kind != "add"]
            if not kinds:
                return ()
            for _ in range(data.draw(st.integers(0, 2))):
                kind = data.draw(st.sampled_from(kinds))
                quiet = sorted(label for label, (_, run) in self.tasks.items() if not run)
                if kind == "cancel" and (self.tasks or self.operations):
                    labels = sorted(self.tasks) + sorted(self.operations)
                    steps.append(Cancel(data.draw(st.sampled_from(labels))))
                elif kind == "add" and quiet:
                    label = data.draw(st.sampled_from(quiet))
                    timer = data.draw(st.sampled_from(self.timers))
                    steps.append(Add(label, self.tasks[label][0], timer))
                elif kind == "set_ready" and self.operations:
                    steps.append(SetReady(self.op_label(data), data.draw(st.booleans())))
                elif kind == "check":
                    steps.append(CheckAndComplete(data.draw(st.sampled_from(KEY_POOL))))
                elif kind == "force" and self.operations:
                    steps.append(ForceComplete(self.op_label(data)))
                elif kind == "cancel_for_key":
                    steps.append(CancelForKey(data.draw(st.sampled_from(KEY_POOL))))
            assert all(not (isinstance(s, Add) and s.task == own) for s in steps)
            return tuple(steps)

        # -- rules ----------------------------------------------------------------------

        @initialize(
            tick=st.sampled_from([1, 1, 2, 3, 10]),
            wheel=st.sampled_from([2, 3, 4, 8, 20]),
            clock_ms=st.sampled_from(clock_readings),
            start_offset=st.sampled_from(start_offsets),
            purge_interval=st.sampled_from([0, 1, 2, 5, 1000]),
            timer_enabled=st.sampled_from([True, True, True, False]),
            two_timers=st.booleans(),
        )
        def init(
            self,
            tick: int,
            wheel: int,
            clock_ms: int,
            start_offset: int,
            purge_interval: int,
            timer_enabled: bool,
            two_timers: bool,
        ) -> None:
            stats.runs += 1
            self.tick, self.wheel = tick, wheel
            self.timers = ("main", "aux") if two_timers else ("main",)
            self.do(
                Init(
                    tick_ms=tick,
                    wheel_size=wheel,
                    start_ms=clock_ms + start_offset,
                    clock_ms=clock_ms,
                    purge_interval=purge_interval,
                    timer_enabled=timer_enabled,
                    timers=self.timers,
                )
            )

        @precondition(available("add"))
        @rule(data=st.data())
        def add_new_task(self, data: st.DataObject) -> None:
            label = f"t{len(self.tasks)}"
            delay = self.delay(data)
            on_run = (
                self.nested(data, label) if caps.has("on_run") and data.draw(st.booleans()) else ()
            )
            self.tasks[label] = (delay, on_run)
            self.do(Add(label, delay, data.draw(st.sampled_from(self.timers)), on_run))

        @precondition(available("add", "on_run"))
        @rule(data=st.data())
        def add_task_acting_on_a_later_one(self, data: st.DataObject) -> None:
            """A task due no later than an existing one, which its run cancels or re-adds,
            or which adds a task due at once: what R11 and R2's "current time before the
            hand-over" are about, made likely rather than left to chance."""
            if not self.tasks:
                return
            target = self.task_label(data)
            target_delay, target_run = self.tasks[target]
            label = f"t{len(self.tasks)}"
            delay = max(-LIMIT, target_delay - self.tick * data.draw(st.sampled_from([0, 0, 1, 2])))
            acts: list[Step] = [Cancel(target)] if caps.has("cancel") else []
            if not target_run and caps.has("re_add"):
                acts.append(Add(target, target_delay, data.draw(st.sampled_from(self.timers))))
            quick = sorted(
                name
                for name, (quick_delay, run) in self.tasks.items()
                if not run and quick_delay <= self.tick
            )
            if quick and caps.has("re_add"):
                name = data.draw(st.sampled_from(quick))
                acts.append(Add(name, self.tasks[name][0], data.draw(st.sampled_from(self.timers))))
            if not acts:
                return
            on_run = tuple(data.draw(st.permutations(acts))[: data.draw(st.integers(1, 2))])
            self.tasks[label] = (delay, on_run)
            self.do(Add(label, delay, data.draw(st.sampled_from(self.timers)), on_run))

        @precondition(available("add", "re_add"))
        @rule(data=st.data())
        def re_add_task(self, data: st.DataObject) -> None:
            if not self.tasks:
                return
            label = self.task_label(data)
            delay, on_run = self.tasks[label]
            self.do(Add(label, delay, data.draw(st.sampled_from(self.timers)), on_run))

        @precondition(available("cancel"))
        @rule(data=st.data())
        def cancel(self, data: st.DataObject) -> None:
            if not (self.tasks or self.operations):
                return
            labels = sorted(self.tasks) + sorted(self.operations)
            self.do(Cancel(data.draw(st.sampled_from(labels))))

        @precondition(purgatory_steps)
        @precondition(available("cancel"))
        @rule(data=st.data())
        def cancel_operation(self, data: st.DataObject) -> None:
            """``cancel`` on an operation: an abandon while it is pending (R40)."""
            if self.operations and not timer_only:
                self.do(Cancel(self.op_label(data)))

        @precondition(available("advance"))
        @rule(data=st.data())
        def advance(self, data: st.DataObject) -> None:
            timer = data.draw(st.sampled_from(self.timers))
            self.do(Advance(self.moves(data, timer), timer))

        @precondition(available("clock_advance"))
        @rule(data=st.data())
        def clock_advance(self, data: st.DataObject) -> None:
            self.do(ClockAdvance(self.moves(data)))

        @precondition(purgatory_steps)
        @precondition(available("watch"))
        @rule(
            data=st.data(),
            keys=st.one_of(
                st.lists(st.sampled_from(KEY_POOL), min_size=1, max_size=3),
                st.just([]),  # R36: ValueError
            ),
            ready=st.sampled_from([False, False, True]),
            ready_on_try=st.sampled_from([None, None, 1, 2, 3]),
        )
        def watch_new(
            self, data: st.DataObject, keys: list[Key], ready: bool, ready_on_try: int | None
        ) -> None:
            if timer_only:
                return
            label = f"op{len(self.operations)}"
            step = Watch(label, self.delay(data), tuple(keys), ready, ready_on_try)
            self.operations[label] = step
            self.do(step)

        @precondition(purgatory_steps)
        @precondition(available("watch"))
        @rule(data=st.data())
        def resubmit(self, data: st.DataObject) -> None:
            if self.operations:
                self.do(self.operations[self.op_label(data)])

        @precondition(purgatory_steps)
        @precondition(available("set_ready"))
        @rule(data=st.data(), ready=st.booleans())
        def set_ready(self, data: st.DataObject, ready: bool) -> None:
            if self.operations and not timer_only:
                self.do(SetReady(self.op_label(data), ready))

        @precondition(purgatory_steps)
        @precondition(available("check_and_complete"))
        @rule(key=st.sampled_from(KEY_POOL))
        def check_and_complete(self, key: Key) -> None:
            if not timer_only:
                self.do(CheckAndComplete(key))

        @precondition(purgatory_steps)
        @precondition(available("force_complete"))
        @rule(data=st.data())
        def force_complete(self, data: st.DataObject) -> None:
            if self.operations and not timer_only:
                self.do(ForceComplete(self.op_label(data)))

        @precondition(purgatory_steps)
        @precondition(available("cancel_for_key"))
        @rule(key=st.sampled_from(KEY_POOL))
        def cancel_for_key(self, key: Key) -> None:
            if not timer_only:
                self.do(CancelForKey(key))

        @precondition(available("next_due_time"))
        @rule(data=st.data())
        def next_due_time(self, data: st.DataObject) -> None:
            self.do(NextDueTime(data.draw(st.sampled_from(self.timers))))

        @precondition(purgatory_steps)
        @precondition(available("purgatory_advance"))
        @rule(data=st.data())
        def purgatory_advance(self, data: st.DataObject) -> None:
            if not timer_only:
                self.do(PurgatoryAdvance(self.moves(data)))

        @precondition(purgatory_steps)
        @precondition(available("shutdown"))
        @rule(now=st.integers(0, 5))
        def shutdown(self, now: int) -> None:
            if now == 0 and not self.shut_down and not timer_only:  # rare: later steps raise
                self.shut_down = True
                self.do(Shutdown())

    class TimerOnlyMachine(ConformanceMachine):
        """The machine for a timer-only port: the same timer rules plus shapes that
        published timer ports get wrong and uniform draws meet too rarely: tasks sharing
        a due time (one bucket flushed with several entries), an add right after the
        clock moved without a drain (the wheel's current time is behind the clock, R2),
        and an add due at once right after an advance by whole ticks (R2, R3)."""

        @precondition(available("add"))
        @rule(data=st.data())
        def add_with_the_same_due_time(self, data: st.DataObject) -> None:
            driver = self.reference.driver
            if driver is None or not self.tasks:
                return
            other = self.task_label(data)
            due = driver.due_ms(other)
            if due is None:
                return
            label = f"t{len(self.tasks)}"
            delay = max(-LIMIT, min(LIMIT, due - driver.clock.now_ms()))
            delay += data.draw(st.integers(0, self.tick - 1))  # rounds down to the same due
            self.tasks[label] = (delay, ())
            self.do(Add(label, delay, data.draw(st.sampled_from(self.timers))))

        @precondition(available("add", "clock_advance"))
        @rule(data=st.data())
        def add_after_the_clock_moved(self, data: st.DataObject) -> None:
            self.do(ClockAdvance(abs(self.moves(data))))
            label = f"t{len(self.tasks)}"
            delay = self.delay(data)
            self.tasks[label] = (delay, ())
            self.do(Add(label, delay, data.draw(st.sampled_from(self.timers))))

        @precondition(available("add", "advance"))
        @rule(data=st.data())
        def add_due_now_after_an_advance(self, data: st.DataObject) -> None:
            """An advance by whole ticks (often with nothing due: the idle path), then a
            task due at or just around the new current time (R2, R3)."""
            timer = data.draw(st.sampled_from(self.timers))
            self.do(Advance(self.tick * data.draw(st.integers(0, 2)), timer))
            label = f"t{len(self.tasks)}"
            delay = data.draw(st.sampled_from([0, 0, -1, 1, self.tick - 1, self.tick]))
            self.tasks[label] = (delay, ())
            self.do(Add(label, delay, timer))

    return TimerOnlyMachine if timer_only else ConformanceMachine


def run_stateful(
    other: Side,
    *,
    reference: ModuleType,
    max_examples: int = 100,
    step_count: int = 50,
    seed: int | None = None,
    allow: Sequence[KnownDifference] = (),
    timer_only: bool = False,
    shrink: bool = True,
    capabilities: Capabilities | None = None,
) -> tuple[StatefulFailure | None, StatefulStats]:
    """Search for a sequence on which ``other`` disagrees with ``reference``.

    Returns the shrunk failure (or None) and what the search covered. ``seed`` makes
    the search reproducible; ``allow`` and ``timer_only`` as in ``make_machine``.
    ``shrink=False`` returns the first failing sequence as found (same search, same
    verdict, no time spent shrinking: for measuring what a search catches). Errors
    that are not disagreements (a bug in the machine, an interrupt) propagate.
    """
    for name, value in (("max_examples", max_examples), ("step_count", step_count)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    failures: list[StatefulFailure] = []
    stats = StatefulStats()
    machine = make_machine(
        other,
        reference,
        failures.append,
        stats,
        allow=allow,
        timer_only=timer_only,
        capabilities=capabilities,
    )
    if seed is not None:
        machine = hypothesis_seed(seed)(machine)
    config = settings(
        max_examples=max_examples,
        stateful_step_count=step_count,
        deadline=None,
        database=None,
        derandomize=False,
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target]
        + ([Phase.shrink] if shrink else []),
        suppress_health_check=list(HealthCheck),
    )
    try:
        run_state_machine_as_test(machine, settings=config)
    except AssertionError:
        if not failures:
            raise
        if not shrink:
            return failures[0], stats
        # Hypothesis replays its shrunk example last; then drop what it could not.
        shrunk = failures[-1] if sequence_error(failures[-1].steps) is None else failures[0]
        return minimize(
            shrunk,
            other,
            reference,
            allow=allow,
            timer_only=timer_only,
            capabilities=capabilities,
        ), stats
    return None, stats


def minimize(
    failure: StatefulFailure,
    other: Side,
    reference: ModuleType,
    budget: int = 200,
    *,
    allow: Sequence[KnownDifference] = (),
    timer_only: bool = False,
    capabilities: Capabilities | None = None,
) -> StatefulFailure:
    """Delete steps from ``failure`` while the sequence still diverges (delta debugging).

    Hypothesis shrinks the choices that generated a run; deleting a step can change
    how later choices are read, so some removable steps survive its shrinking. This
    pass tries removing each step but ``init``, last to first, keeps any removal after
    which the sequence (truncated at its first divergence) still diverges, and repeats
    until nothing more goes or ``budget`` candidate runs were spent. A candidate that is
    not a valid sequence (``sequence_error``: a label used before it is defined, in a
    task's ``on_run`` too) is never run, and a removal is kept only if the candidate
    still fails the same way (``failure_kind``): the failure reported is the one found.
    """
    best = failure
    kind = failure.kind
    spent = 0
    improved = True
    while improved and spent < budget:
        improved = False
        index = len(best.steps) - 2
        while index >= 1 and spent < budget:
            candidate = best.steps[:index] + best.steps[index + 1 :]
            if sequence_error(candidate) is not None:
                index -= 1
                continue
            spent += 1
            try:
                found = check_sequence(
                    candidate,
                    other,
                    reference,
                    allow=allow,
                    timer_only=timer_only,
                    capabilities=capabilities,
                )
            except ValueError:  # StepError: the candidate is not a valid run
                found = None
            if found is not None and found.kind == kind and len(found.steps) < len(best.steps):
                best, improved = found, True
                index = min(index, len(best.steps) - 1)
            index -= 1
    return best


def format_failure(failure: StatefulFailure, command: str, *, shrunk: bool = True) -> str:
    """The report of a failure: where, expected versus actual, then the steps as JSON lines.

    ``shrunk`` says whether the steps came from Hypothesis's shrinking (``--stateful``)
    or were given (``--replay``); only the wording changes.
    """
    step = failure.steps[-1]
    what, sequence = ("stateful", "shrunk failing sequence") if shrunk else ("replay", "sequence")
    lines = [
        f"FAIL {what}: step {failure.step_number} ({step.STEP}) of the {sequence} "
        f"below: {failure.message}",
        f"    step:     {json.dumps(step_to_json(step))}",
    ]
    if failure.expected is not None:
        lines.append(f"    expected: {json.dumps(failure.expected)}")
    lines.append(
        f"    actual:   {json.dumps(failure.actual) if failure.actual is not None else '(none)'}"
    )
    lines.append(
        f"{sequence} ({len(failure.steps)} steps, JSON lines; save them to a file and "
        f"run: kpurgatory conformance --adapter {shlex.quote(command)} --replay FILE):"
    )
    lines.append("--- begin steps ---")
    lines.extend(failure.json_lines())
    lines.append("--- end steps ---")
    return "\n".join(lines)
