"""The stateful search's state machine: valid runs of the step language, drawn by Hypothesis.

``ConformanceMachine`` is a Hypothesis ``RuleBasedStateMachine`` whose rules are the
steps of the step language; every step runs on the in-process reference and on the
other side and the two answers are judged at once (``side_by_side.compare_step``).
A search binds its sides, settings and counters (a ``MachineRun``) to it or to one of
its variants (``kpurgatory.conformance.search_machines.make_machine``), and
``kpurgatory.conformance.stateful.run_stateful`` runs it.

The generated runs are built to be valid for any conforming implementation: labels
are consistent (a re-add repeats the task's delay and ``on_run``), nested ``on_run``
steps only re-add tasks that run nothing themselves (so a run always terminates), and
values stay within +-2**40 (safe for 64-bit ports). Delays and clock moves are shaped
by the run's tick and wheel size, so short runs on tiny wheels reach deep levels and
land on slot boundaries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import ClassVar

from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from kpurgatory import steps as language
from kpurgatory.conformance.capabilities import Capabilities
from kpurgatory.conformance.differences import Judge
from kpurgatory.conformance.driver import DriverSide
from kpurgatory.conformance.side_by_side import Side, StatefulFailure, StatefulStats, compare_step
from kpurgatory.spec.known_differences import KnownDifference
from kpurgatory.steps import Key, Step, Watch

__all__ = [
    "KEY_POOL",
    "LIMIT",
    "NEGATIVE_TIME_DIFFERENCE",
    "ConformanceMachine",
    "HangFound",
    "MachineRun",
    "available",
    "start_rule",
]

KEY_POOL: tuple[Key, ...] = ("a", "b", "c", 7, "7")
"""Watch keys the machine uses: few, so operations share keys; 7 and "7" differ (R24)."""

LIMIT = 1 << 40
"""Bound on every generated delay and clock move."""

NEGATIVE_TIME_DIFFERENCE = "kafka-truncating-division"
"""The known difference under which runs start at no negative time
(``search_machines.make_machine``)."""

CLOCK_READINGS = (0, 0, 7, -5, 1000, -LIMIT, LIMIT)
"""The clock readings a run starts at."""

START_OFFSETS = (0, 0, 0, -3, 5)
"""The timers' start time relative to the clock reading."""


class HangFound(BaseException):
    """Raised by the machine when the other side stopped answering (a hang).

    A ``BaseException``, so Hypothesis does not shrink it: every candidate run of a port
    that hangs costs the whole answer timeout, and shrinking would take minutes or hours.
    ``run_stateful`` reports the sequence as found instead."""


@dataclass
class MachineRun:
    """One search: the sides compared, how they are judged, where failures and counts go.

    ``found`` holds the first divergence found, whose kind shrinking keeps."""

    other: Side
    reference: ModuleType
    on_failure: Callable[[StatefulFailure], None]
    stats: StatefulStats
    allow: Sequence[KnownDifference] = ()
    timer_only: bool = False
    capabilities: Capabilities = field(default_factory=Capabilities)
    found: list[StatefulFailure] = field(default_factory=list)


def start_rule(
    clock_readings: Sequence[int], start_offsets: Sequence[int]
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The decorator that makes ``ConformanceMachine.start`` the initialize rule, drawing its
    arguments (in this order) with ``clock_ms`` and ``start_offset`` from the values given."""
    return initialize(
        tick=st.sampled_from([1, 1, 2, 3, 10]),
        wheel=st.sampled_from([2, 3, 4, 8, 20]),
        clock_ms=st.sampled_from(list(clock_readings)),
        start_offset=st.sampled_from(list(start_offsets)),
        purge_interval=st.sampled_from([0, 1, 2, 5, 1000]),
        timer_enabled=st.sampled_from([True, True, True, False]),
        two_timers=st.booleans(),
    )


def available(*names: str) -> Callable[[ConformanceMachine], bool]:
    """A rule is drawn only if the port has every step kind or feature it sends."""
    return lambda machine: all(machine.run.capabilities.has(name) for name in names)


def available_for_purgatory(*names: str) -> Callable[[ConformanceMachine], bool]:
    """``available``, and never for a timer-only port: purgatory rules are not drawn there
    (no wasted steps)."""
    return lambda machine: (
        not machine.run.timer_only and all(machine.run.capabilities.has(name) for name in names)
    )


class ConformanceMachine(RuleBasedStateMachine):
    """Generates valid runs of the step language; see the module docstring."""

    run: ClassVar[MachineRun]
    """The search this machine serves (bound by ``search_machines.make_machine``)."""

    def __init__(self) -> None:
        super().__init__()
        run = self.run
        self.reference = DriverSide(run.reference)
        self.judge = Judge(run.allow, timer_only=run.timer_only, capabilities=run.capabilities)
        self.steps: list[Step] = []
        self.tasks: dict[str, tuple[int, tuple[Step, ...]]] = {}
        self.operations: dict[str, Watch] = {}
        self.timers: tuple[str, ...] = ("main",)
        self.tick = 1
        self.wheel = 20
        self.shut_down = False
        self.spawned = 0  # operations a callback submits (labels cb1, cb2, ...)
        self.sweeping_tries = 0  # operations whose try_complete sweeps a key

    # -- plumbing -------------------------------------------------------------------

    def do(self, step: Step) -> None:
        """Run ``step`` on both sides; a divergence is reported and fails the example."""
        run = self.run
        self.steps.append(step)
        run.stats.steps += 1
        run.stats.kinds[step.STEP] = run.stats.kinds.get(step.STEP, 0) + 1
        nested = run.stats.nested
        pending = [inner for _, inner in language.nested_steps(step)]
        while pending:
            inner = pending.pop()
            nested[inner.STEP] = nested.get(inner.STEP, 0) + 1
            pending += [deeper for _, deeper in language.nested_steps(inner)]
        expected = self.reference.execute(step)
        failure = compare_step(
            self.steps, expected, run.other, step, self.judge, run.stats.accepted
        )
        if failure is not None:
            if run.found and run.found[0].kind != failure.kind:
                # another divergence than the one found: not a smaller example of it
                # (Hypothesis shrinks towards the failure it found, not any failure)
                reject()
            run.on_failure(failure)
            run.found.append(failure)
            if failure.hung:
                raise HangFound(failure.message)
            raise AssertionError(f"step {failure.step_number} {step.STEP}: {failure.message}")

    def teardown(self) -> None:
        self.reference.close()
        self.judge.close()
        self.run.other.close()

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
            return -data.draw(st.sampled_from([1, self.tick, 2 * self.tick * self.wheel, LIMIT]))
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
        """Steps a new task performs when it runs (``Add.on_run``): every call R69 allows
        from a task's run that the port has (``callback_steps``)."""
        return self.callback_steps(data, own, "on_run")

    def callback_steps(self, data: st.DataObject, own: str, where: str) -> tuple[Step, ...]:
        """Up to two steps a task's ``on_run`` (``where``) or an operation's ``on_try``,
        ``on_complete`` or ``on_expiration`` performs: cancels, re-adds of tasks that run
        nothing, flags, sweeps, forced completions, ``cancel_for_key``, a submission of a
        new operation that calls nothing back, a nested drain, and rarely a shutdown or a
        close (R69). A task never re-adds itself, and sweeps from a ``try_complete`` are
        rationed (``sweeping_tries``): each try of such an operation sweeps again, and
        operations trying each other multiply the tries."""
        kinds = ["cancel", "cancel", "add", "add", "advance"]
        if not self.run.timer_only:
            kinds += ["set_ready", "set_ready", "check", "check", "force", "cancel_for_key"]
            kinds += ["watch", "purgatory_advance", "shutdown"]
        kinds.append("close")
        step_kind = {"check": "check_and_complete", "force": "force_complete"}
        kinds = [kind for kind in kinds if self.run.capabilities.has(step_kind.get(kind, kind))]
        if not self.run.capabilities.has("re_add"):  # a nested add re-adds an existing task
            kinds = [kind for kind in kinds if kind != "add"]
        if not self.run.capabilities.has("nested_advance"):
            kinds = [kind for kind in kinds if kind not in ("advance", "purgatory_advance")]
        if where == "on_try" and self.sweeping_tries >= 2:
            kinds = [kind for kind in kinds if kind not in ("check", "cancel_for_key")]
        if not kinds:
            return ()
        steps: list[Step] = []
        for _ in range(data.draw(st.integers(0, 2))):
            kind = data.draw(st.sampled_from(kinds))
            quiet = sorted(label for label, (_, run) in self.tasks.items() if not run)
            # rare: the run's later steps only show a closed world (less rare for a timer
            # alone, whose only close is this one)
            rarity = 1 if self.run.timer_only else 3
            if kind in ("shutdown", "close") and data.draw(st.integers(0, rarity)) != 0:
                continue
            if kind == "cancel" and (self.tasks or self.operations):
                labels = sorted(self.tasks) + sorted(self.operations)
                steps.append(language.Cancel(data.draw(st.sampled_from(labels))))
            elif kind == "add" and quiet:
                label = data.draw(st.sampled_from(quiet))
                timer = data.draw(st.sampled_from(self.timers))
                steps.append(language.Add(label, self.tasks[label][0], timer))
            elif kind == "set_ready" and self.operations:
                steps.append(language.SetReady(self.op_label(data), data.draw(st.booleans())))
            elif kind == "check":
                steps.append(language.CheckAndComplete(data.draw(st.sampled_from(KEY_POOL))))
            elif kind == "force" and self.operations:
                steps.append(language.ForceComplete(self.op_label(data)))
            elif kind == "cancel_for_key":
                steps.append(language.CancelForKey(data.draw(st.sampled_from(KEY_POOL))))
            elif kind == "watch":
                self.spawned += 1  # never named again: a later run of it resubmits (R34)
                keys = tuple(data.draw(st.lists(st.sampled_from(KEY_POOL), min_size=1, max_size=2)))
                steps.append(language.Watch(f"cb{self.spawned}", self.delay(data), keys))
            elif kind == "advance":
                timer = data.draw(st.sampled_from(self.timers))
                moves = data.draw(st.integers(0, 2 * self.tick * self.wheel))
                steps.append(language.Advance(moves, timer))
            elif kind == "purgatory_advance":
                steps.append(language.PurgatoryAdvance(data.draw(st.integers(0, self.tick * 3))))
            elif kind == "shutdown":
                steps.append(language.Shutdown())
            elif kind == "close":
                steps.append(language.Close(data.draw(st.sampled_from(self.timers))))
        if where == "on_try" and any(
            isinstance(step, language.CheckAndComplete | language.CancelForKey) for step in steps
        ):
            self.sweeping_tries += 1
        assert all(not (isinstance(s, language.Add) and s.task == own) for s in steps)
        return tuple(steps)

    # -- rules ----------------------------------------------------------------------

    def start(
        self,
        tick: int,
        wheel: int,
        clock_ms: int,
        start_offset: int,
        purge_interval: int,
        timer_enabled: bool,
        two_timers: bool,
    ) -> None:
        """The run's ``init`` step, from the values Hypothesis drew (``init`` is this
        method as an initialize rule; a variant may draw from other values)."""
        self.run.stats.runs += 1
        self.tick, self.wheel = tick, wheel
        self.timers = ("main", "aux") if two_timers else ("main",)
        start_ms = clock_ms + start_offset
        if not self.run.capabilities.has("negative_time"):
            clock_ms, start_ms = abs(clock_ms), abs(start_ms)
        self.do(
            language.Init(
                tick_ms=tick,
                wheel_size=wheel,
                start_ms=start_ms,
                clock_ms=clock_ms,
                purge_interval=purge_interval,
                timer_enabled=timer_enabled,
                timers=self.timers,
            )
        )

    init = start_rule(CLOCK_READINGS, START_OFFSETS)(start)

    @precondition(available("add"))
    @rule(data=st.data())
    def add_new_task(self, data: st.DataObject) -> None:
        label = f"t{len(self.tasks)}"
        delay = self.delay(data)
        on_run = (
            self.nested(data, label)
            if self.run.capabilities.has("on_run") and data.draw(st.booleans())
            else ()
        )
        self.tasks[label] = (delay, on_run)
        self.do(language.Add(label, delay, data.draw(st.sampled_from(self.timers)), on_run))

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
        acts: list[Step] = [language.Cancel(target)] if self.run.capabilities.has("cancel") else []
        if not target_run and self.run.capabilities.has("re_add"):
            acts.append(language.Add(target, target_delay, data.draw(st.sampled_from(self.timers))))
        quick = sorted(
            name
            for name, (quick_delay, run) in self.tasks.items()
            if not run and quick_delay <= self.tick
        )
        if quick and self.run.capabilities.has("re_add"):
            name = data.draw(st.sampled_from(quick))
            acts.append(
                language.Add(name, self.tasks[name][0], data.draw(st.sampled_from(self.timers)))
            )
        if not acts:
            return
        on_run = tuple(data.draw(st.permutations(acts))[: data.draw(st.integers(1, 2))])
        self.tasks[label] = (delay, on_run)
        self.do(language.Add(label, delay, data.draw(st.sampled_from(self.timers)), on_run))

    @precondition(available("add"))
    @rule(data=st.data())
    def add_with_the_same_due_time(self, data: st.DataObject) -> None:
        """A task due when an existing one is: one bucket flushed with several entries,
        the shape of a flush that runs only its first task (published ports, Kafka-like
        ones too), which uniform draws meet too rarely."""
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
        self.do(language.Add(label, delay, data.draw(st.sampled_from(self.timers))))

    @precondition(available("add", "on_run", "close"))
    @rule(data=st.data(), now=st.integers(0, 3))
    def add_task_closing_its_timer(self, data: st.DataObject, now: int) -> None:
        """Sometimes: a task whose run closes its timer, so the rest of its drain stays
        unrun (R64) and the closed timer moves no clock (R14)."""
        if now != 0:
            return
        label = f"t{len(self.tasks)}"
        timer = data.draw(st.sampled_from(self.timers))
        on_run: tuple[Step, ...] = (language.Close(timer),)
        delay = self.delay(data)
        self.tasks[label] = (delay, on_run)
        self.do(language.Add(label, delay, timer, on_run))

    @precondition(available("add", "re_add"))
    @rule(data=st.data())
    def re_add_task(self, data: st.DataObject) -> None:
        if not self.tasks:
            return
        label = self.task_label(data)
        delay, on_run = self.tasks[label]
        self.do(language.Add(label, delay, data.draw(st.sampled_from(self.timers)), on_run))

    @precondition(available("cancel"))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        if not (self.tasks or self.operations):
            return
        labels = sorted(self.tasks) + sorted(self.operations)
        self.do(language.Cancel(data.draw(st.sampled_from(labels))))

    # One rule per step kind: the rules share a shape (precondition, rule, one step) deliberately.
    @precondition(available_for_purgatory("cancel"))
    @rule(data=st.data())
    def cancel_operation(self, data: st.DataObject) -> None:
        """``cancel`` on an operation: an abandon while it is pending (R40)."""
        if self.operations:
            self.do(language.Cancel(self.op_label(data)))

    @precondition(available("advance"))
    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        timer = data.draw(st.sampled_from(self.timers))
        self.do(language.Advance(self.moves(data, timer), timer))

    @precondition(available("clock_advance"))
    @rule(data=st.data())
    def clock_advance(self, data: st.DataObject) -> None:
        self.do(language.ClockAdvance(self.moves(data)))

    @precondition(available_for_purgatory("watch"))
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
        label = f"op{len(self.operations)}"
        self.operations[label] = Watch(label, 0, ())  # its callbacks may name it
        callbacks: dict[str, tuple[Step, ...]] = {}
        if self.run.capabilities.has("callbacks") and data.draw(st.integers(0, 2)) == 0:
            for where in language.CALLBACKS:
                if data.draw(st.booleans()):
                    callbacks[where] = self.callback_steps(data, label, where)
        step = Watch(label, self.delay(data), tuple(keys), ready, ready_on_try, **callbacks)
        self.operations[label] = step
        self.do(step)

    @precondition(available_for_purgatory("watch"))
    @rule(data=st.data())
    def resubmit(self, data: st.DataObject) -> None:
        if self.operations:
            self.do(self.operations[self.op_label(data)])

    @precondition(available_for_purgatory("set_ready"))
    @rule(data=st.data(), ready=st.booleans())
    def set_ready(self, data: st.DataObject, ready: bool) -> None:
        if self.operations:
            self.do(language.SetReady(self.op_label(data), ready))

    @precondition(available_for_purgatory("check_and_complete"))
    @rule(key=st.sampled_from(KEY_POOL))
    def check_and_complete(self, key: Key) -> None:
        self.do(language.CheckAndComplete(key))

    @precondition(available_for_purgatory("force_complete"))
    @rule(data=st.data())
    def force_complete(self, data: st.DataObject) -> None:
        if self.operations:
            self.do(language.ForceComplete(self.op_label(data)))

    @precondition(available_for_purgatory("cancel_for_key"))
    @rule(key=st.sampled_from(KEY_POOL))
    def cancel_for_key(self, key: Key) -> None:
        self.do(language.CancelForKey(key))

    @precondition(available("next_due_time"))
    @rule(data=st.data())
    def next_due_time(self, data: st.DataObject) -> None:
        self.do(language.NextDueTime(data.draw(st.sampled_from(self.timers))))

    @precondition(available_for_purgatory("purgatory_advance"))
    @rule(data=st.data())
    def purgatory_advance(self, data: st.DataObject) -> None:
        self.do(language.PurgatoryAdvance(self.moves(data)))

    @precondition(available("executor_shutdown"))
    @rule(data=st.data(), now=st.integers(0, 7))
    def executor_shutdown(self, data: st.DataObject, now: int) -> None:
        """Rare: a timer's executor refuses every task from then on (R65), which hides
        every later hand-over of that timer, so most runs keep theirs."""
        if now == 0:
            self.do(language.ExecutorShutdown(data.draw(st.sampled_from(self.timers))))

    @precondition(available_for_purgatory("shutdown"))
    @rule(now=st.integers(0, 3))
    def shutdown(self, now: int) -> None:
        if now == 0 and not self.shut_down:  # rare: later steps raise
            self.shut_down = True
            self.do(language.Shutdown())
