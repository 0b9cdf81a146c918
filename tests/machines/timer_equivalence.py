"""The timer equivalence machine: a reference timer and another implementation's in step (R1-R12).

See ``tests.machines.equivalence`` for what the equivalence machines compare and why;
``make_timer_machine`` binds the machine to two packages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from hypothesis import event, target
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from tests.machines.equivalence import (
    ADVANCE_KINDS,
    DELAY_KINDS,
    EquivalencePair,
    ImplPackage,
    MachineStats,
    advance_amount,
    bound_to,
    delay_from,
    run_check,
    run_on_sides,
    wheel_level,
)
from tests.machines.equivalence_sides import (
    NEXT_TASK,
    TimerLogEntry,
    TimerSide,
    canonical_timer_log,
)


class TimerEquivalence(RuleBasedStateMachine):
    """Reference and other timer in step; see ``make_timer_machine``."""

    pair: ClassVar[EquivalencePair]
    """The two packages and the run's settings (bound by ``make_timer_machine``)."""

    tasks = Bundle("tasks")

    def __init__(self) -> None:
        super().__init__()
        self.sides: list[TimerSide] = []
        self.tick = 1
        self.wheel = 2
        self.count = 0
        self.levels: dict[str, int] = {}
        self.max_scheduled = -1
        self.max_drained = -1
        self.visited: dict[str, set[int]] = {}
        self.max_cascade = 0

    # -- set-up ------------------------------------------------------------------

    @initialize(
        tick=st.one_of(st.just(1), st.integers(1, 10), st.sampled_from([7, 100, 1000])),
        wheel=st.one_of(
            st.integers(2, 4),
            st.integers(2, 4),
            st.integers(5, 20),
            st.sampled_from([32, 64, 512]),
        ),
        clock_start=st.one_of(
            st.just(0),
            st.integers(-10_000, 10_000),
            st.just(1_700_000_000_123),
        ),
        start_a=st.one_of(st.none(), st.none(), st.none(), st.integers(-50, 50)),
        # B ahead of the clock (a task moved from A to B is due there at once), or so
        # far ahead that only "years" delays are scheduled in B
        start_b=st.one_of(
            st.none(),
            st.none(),
            st.integers(-50, 50),
            st.integers(1, 5_000),
            st.just(50_000_000),
        ),
    )
    def set_up(
        self,
        tick: int,
        wheel: int,
        clock_start: int,
        start_a: int | None,
        start_b: int | None,
    ) -> None:
        """Build both sides; ``start_*`` offsets give a start_ms apart from the clock (R2)."""
        self.tick, self.wheel = tick, wheel
        starts = {
            "A": None if start_a is None else clock_start + start_a,
            "B": None if start_b is None else clock_start + start_b,
        }
        self.sides = [
            TimerSide(pkg, tick, wheel, clock_start, starts)
            for pkg in (self.pair.ref_pkg, self.pair.other_pkg)
        ]
        self._compare_state("set_up")

    def teardown(self) -> None:
        """Close every timer; report how deep this example went."""
        for side in self.sides:
            side.close()
        if self.sides:
            event(f"timer: deepest level drained {min(self.max_drained, 6)}")
            event(f"timer: deepest level scheduled {min(self.max_scheduled, 8)}")
            event(f"timer: most levels cascaded through {min(self.max_cascade, 6)}")
            target(float(self.max_cascade), label="most levels cascaded through")
            if self.pair.stats is not None:
                self.pair.stats.record_example(
                    self.max_scheduled, self.max_drained, self.max_cascade
                )

    # -- the comparison ------------------------------------------------------------

    def _step(self, what: str, action: Callable[[TimerSide], object]) -> object:
        """Run ``action`` on each side and compare outcome, runs and state."""
        if self.pair.stats is not None:
            self.pair.stats.steps += 1
        outcomes, logs = run_on_sides(self.sides, action)
        ref_out, other_out = outcomes
        assert ref_out == other_out, (
            f"{what}: {self.pair.ref_name} -> {ref_out}, {self.pair.other_name} -> {other_out}"
        )
        canon = [canonical_timer_log(log) for log in logs]
        assert canon[0] == canon[1], (
            f"{what}: hand-over differs\n  {self.pair.ref_name}: {logs[0]}"
            f"\n  {self.pair.other_name}: {logs[1]}"
        )
        for side, log in zip(self.sides, logs, strict=True):
            self._check_spec(what, side, log)
        self._compare_state(what)
        return ref_out[1]

    def _check_spec(self, what: str, side: TimerSide, log: list[TimerLogEntry]) -> None:
        """Rules checked on each side on its own: R4 never early, R6 order, no stray run."""
        assert not side.unexpected_runs, (
            f"{what}: {side.name} ran tasks that were not scheduled: {side.unexpected_runs}"
        )
        dues = [due for _, due, _, _, _ in log]
        assert dues == sorted(dues), f"{what}: {side.name} handed over out of due order (R6): {log}"
        for label, due, now, timer_name, _ in log:
            timer = side.timers.get(timer_name)
            if timer is not None:  # due at the reading (drained) or at once (R3)
                assert due <= max(now, timer.current_time), (
                    f"{what}: {side.name} ran {label} early (R4): due {due} at reading {now}"
                )

    def _compare_state(self, what: str) -> None:
        ref, other = self.sides
        assert ref.sizes() == other.sizes(), (
            f"{what}: size differs: {self.pair.ref_name} {ref.sizes()} "
            f"vs {self.pair.other_name} {other.sizes()}"
        )
        for side in self.sides:
            assert side.sizes() == side.model_sizes(), (
                f"{what}: {side.name} size {side.sizes()} but "
                f"scheduled tasks {side.model_sizes()} (R12)"
            )
        for side in self.sides:
            next_dues = side.next_due_times()
            assert next_dues == side.model_next_due_times(), (
                f"{what}: {side.name} next_due_time {next_dues} but scheduled tasks "
                f"give {side.model_next_due_times()} (R44)"
            )
        assert ref.next_due_times() == other.next_due_times(), (
            f"{what}: next_due_time differs: {self.pair.ref_name} {ref.next_due_times()} vs "
            f"{self.pair.other_name} {other.next_due_times()} (R44)"
        )
        for name in ref.timers:
            ref_ct = ref.timers[name].current_time
            other_ct = other.timers[name].current_time
            assert ref_ct == other_ct, (
                f"{what}: timer {name} current_time {self.pair.ref_name} {ref_ct} vs "
                f"{self.pair.other_name} {other_ct} (R2)"
            )
        for side in self.sides:
            for name, timer in side.timers.items():
                if self.pair.run_checks:
                    run_check(timer, f"{side.name} timer {name}")
                levels = getattr(timer, "levels", None)
                if self.pair.stats is not None and isinstance(levels, int):
                    self.pair.stats.max_levels_created = max(
                        self.pair.stats.max_levels_created, levels
                    )

    # -- rules ---------------------------------------------------------------------

    @precondition(lambda self: self.count < self.pair.limit)
    @rule(
        target=tasks,
        kind=st.sampled_from(DELAY_KINDS),
        level=st.integers(0, 7),
        mult=st.integers(0, 64),
        jitter=st.integers(-2, 2),
        raw=st.integers(0, 1 << 40),
        timer_name=st.sampled_from(["A", "A", "B"]),
    )
    def new_task(
        self, kind: str, level: int, mult: int, jitter: int, raw: int, timer_name: str
    ) -> str:
        """Create a task pair with a drawn delay and add it (R1, R3)."""
        delay = delay_from(kind, level, mult, jitter, raw, self.tick, self.wheel)
        label = f"t{self.count}"
        self.count += 1
        for side in self.sides:
            side.new_task(label, delay)
        self._add(label, timer_name)
        return label

    def _add(self, label: str, timer_name: str) -> None:
        ref = self.sides[0]
        due = ref.due_of(label)
        current = ref.timers[timer_name].current_time
        if due > current:
            level = wheel_level(due, current, self.tick, self.wheel)
            self.levels[label] = level
            self.visited[label] = {level}
            self.max_scheduled = max(self.max_scheduled, level)
        else:
            self.levels.pop(label, None)
            self.visited.pop(label, None)
        self._step(f"add({label} -> {timer_name})", lambda side: side.add(label, timer_name))

    @rule(label=tasks, timer_name=st.sampled_from(["A", "B"]))
    def add(self, label: str, timer_name: str) -> None:
        """Re-add a task: scheduled (replace), cancelled, run, or in the other timer (R10)."""
        self._add(label, timer_name)

    @precondition(
        lambda self: (
            bool(self.sides) and any(name == "A" for name, _ in self.sides[0].scheduled.values())
        )
    )
    @rule(pick=st.integers(0, 1 << 16))
    def move_scheduled(self, pick: int) -> None:
        """Move a task scheduled in A to B (R10); due there at once when B is ahead."""
        in_a = sorted(label for label, (name, _) in self.sides[0].scheduled.items() if name == "A")
        self._add(in_a[pick % len(in_a)], "B")

    @rule(label=tasks)
    def cancel(self, label: str) -> None:
        """Cancel a task, scheduled or not (R9)."""
        self._step(f"cancel({label})", lambda side: side.cancel(label))

    @rule(
        timer_name=st.sampled_from(["A", "A", "A", "B"]),
        kind=st.sampled_from(ADVANCE_KINDS),
        level=st.integers(0, 7),
        mult=st.integers(0, 64),
        jitter=st.integers(-2, 2),
        raw=st.integers(0, 1 << 40),
        pick=st.integers(0, 1 << 16),
    )
    def advance(
        self,
        timer_name: str,
        kind: str,
        level: int,
        mult: int,
        jitter: int,
        raw: int,
        pick: int,
    ) -> None:
        """advance_clock on one timer by a drawn amount; compare result and runs (R4-R8)."""
        ref = self.sides[0]
        dues = sorted(due for name, due in ref.scheduled.values() if name == timer_name)
        if not dues:
            next_due = None
        elif kind == "step_down" or pick % 3 == 0:
            next_due = dues[0]  # the next task to drain: step it down level by level
        else:
            next_due = dues[pick % len(dues)]
        amount = advance_amount(
            kind,
            level,
            mult,
            jitter,
            raw,
            self.tick,
            self.wheel,
            next_due,
            ref.clock.now_ms(),
        )
        self._advance(timer_name, amount)

    @rule(
        timer_name=st.sampled_from(["A", "A", "B"]),
        pick=st.integers(0, 1 << 16),
        times=st.integers(1, 64),
    )
    def cascade(self, timer_name: str, pick: int, times: int) -> None:
        """Up to ``times`` ``step_down`` advances toward one scheduled task: each drops
        it one wheel level (draining whatever is due earlier on the way), so it
        cascades level by level down to its hand-over."""
        ref = self.sides[0]
        labels = sorted(
            (due, label) for label, (name, due) in ref.scheduled.items() if name == timer_name
        )
        if not labels:
            return
        chosen = labels[pick % len(labels)][1]
        for _ in range(times):
            where = ref.scheduled.get(chosen)
            if where is None or where[0] != timer_name:
                return
            amount = advance_amount(
                "step_down", 0, 0, 0, 0, self.tick, self.wheel, where[1], ref.clock.now_ms()
            )
            self._advance(timer_name, amount)

    def _advance(self, timer_name: str, amount: int) -> None:
        """One compared advance_clock, then R5 (never late) on each side, then self.pair.stats."""
        ref = self.sides[0]
        before = {label for label, (name, _) in ref.scheduled.items() if name == timer_name}
        self._step(
            f"advance({timer_name}, {amount})",
            lambda side: side.timers[timer_name].advance_clock(amount),
        )
        now = ref.clock.now_ms()
        for side in self.sides:
            late = [
                label
                for label, (name, due) in side.scheduled.items()
                if name == timer_name and due <= now and label in before
            ]
            assert not late, (
                f"advance({timer_name}, {amount}): "
                f"{side.name} left due tasks scheduled (R5): {late}"
            )
        drained = [
            self.levels[label]
            for label, _, _, name, _ in ref.log
            if name == timer_name and label in self.levels and label in before
        ]
        if drained:
            self.max_drained = max(self.max_drained, max(drained))
        for label, _, _, name, _ in ref.log:
            if name == timer_name and label in before and label in self.visited:
                self.max_cascade = max(self.max_cascade, len(self.visited.pop(label)))
        current = ref.timers[timer_name].current_time
        for label, (name, due) in ref.scheduled.items():
            if name == timer_name and label in self.visited:
                self.visited[label].add(wheel_level(due, current, self.tick, self.wheel))

    @rule(
        kind=st.sampled_from(["one", "tick", "span", "random", "huge"]),
        level=st.integers(0, 5),
        mult=st.integers(0, 64),
        raw=st.integers(0, 1 << 40),
    )
    def clock_advance(self, kind: str, level: int, mult: int, raw: int) -> None:
        """Move both clocks without draining: due tasks wait for advance_clock (R2, R3)."""
        amount = advance_amount(kind, level, mult, 0, raw, self.tick, self.wheel, None, 0)
        self._step(f"clock.advance({amount})", lambda side: side.clock.advance(amount))

    @precondition(lambda self: self.count < self.pair.limit)
    @rule(
        target=tasks,
        kind=st.sampled_from(DELAY_KINDS),
        level=st.integers(0, 4),
        mult=st.integers(0, 64),
        jitter=st.integers(-2, 2),
        raw=st.integers(0, 1 << 40),
        victim=tasks,
        next_task=st.booleans(),
        action=st.sampled_from(["cancel", "readd", "move"]),
    )
    def new_agent(
        self,
        kind: str,
        level: int,
        mult: int,
        jitter: int,
        raw: int,
        victim: str,
        next_task: bool,
        action: str,
    ) -> str:
        """The one task that acts on another when it runs (R11); added to timer A.

        Its target is ``victim``, or with ``next_task`` whichever task is due next
        after it in its timer when it runs.
        """
        delay = delay_from(kind, level, mult, jitter, raw, self.tick, self.wheel)
        label = f"agent{self.count}"
        self.count += 1
        for side in self.sides:
            side.new_task(label, delay)
            side.agent = label
            side.agent_action = (action, NEXT_TASK if next_task else victim)
        self._add(label, "A")
        return label

    @precondition(lambda self: self.count < self.pair.limit)
    @rule(
        target=tasks,
        timer_name=st.sampled_from(["A", "B"]),
        action=st.sampled_from(["cancel", "readd", "move"]),
        level=st.integers(0, 4),
        gap=st.sampled_from(["one", "tick", "ticks", "span"]),
    )
    def race(self, timer_name: str, action: str, level: int, gap: str) -> MultipleResults[str]:
        """R11 head-on: a new agent and a task due just after it, then one advance that
        drains both; the agent cancels, re-adds or moves that task before its turn.

        The new agent replaces the old one (which becomes an ordinary task), so there
        is still only one agent at a time.
        """
        delay = self.tick * int(self.wheel**level)
        after = {
            "one": 1,
            "tick": self.tick,
            "ticks": 2 * self.tick,
            "span": self.tick * self.wheel,
        }[gap]
        agent, victim = f"agent{self.count}", f"t{self.count + 1}"
        self.count += 2
        for side in self.sides:
            side.new_task(agent, delay)
            side.new_task(victim, delay + after)
            side.agent = agent
            side.agent_action = (action, NEXT_TASK)
        self._add(agent, timer_name)
        self._add(victim, timer_name)
        self._advance(timer_name, delay + after + self.tick)
        return multiple(agent, victim)

    @precondition(lambda self: self.sides and self.sides[0].agent is not None)
    @rule(
        victim=tasks,
        next_task=st.booleans(),
        action=st.sampled_from(["cancel", "readd", "move"]),
    )
    def retarget_agent(self, victim: str, next_task: bool, action: str) -> None:
        """Point the agent at another task (or the next one due) or action."""
        if victim == self.sides[0].agent and not next_task:
            return
        for side in self.sides:
            side.agent_action = (action, NEXT_TASK if next_task else victim)

    @invariant()
    def same_schedule(self) -> None:
        """Both sides agree on which tasks are scheduled where, with which due time."""
        if self.sides:
            ref, other = self.sides
            assert ref.scheduled == other.scheduled, (
                f"scheduled tasks differ: {self.pair.ref_name} {ref.scheduled} vs "
                f"{self.pair.other_name} {other.scheduled}"
            )


def make_timer_machine(
    ref_pkg: ImplPackage,
    other_pkg: ImplPackage,
    *,
    stats: MachineStats | None = None,
    max_tasks: int = 40,
    run_checks: bool = True,
) -> type[RuleBasedStateMachine]:
    """A machine that drives ``ref_pkg`` and ``other_pkg`` timers in step (R1-R12).

    Each side has a ``ManualClock`` and two inline-executor timers A and B on it, with
    ``tick_ms``, ``wheel_size`` and start time drawn by ``@initialize`` (tiny wheels of 2
    to 4 often, so cheap runs reach 3+ overflow levels). Rules add tasks with delays from
    negative through several wheel levels to years, cancel, re-add, move between timers,
    advance a timer by 0, 1, exact wheel spans, up to or beside a due time and by huge
    jumps, move the clock directly, and set up one "agent" task that cancels, re-adds or
    moves another task when it runs (R11). After every step both sides must agree on the
    call's outcome, the canonical hand-over log, each timer's ``size`` and
    ``current_time``, and pass ``_check()`` (unless ``run_checks`` is False, which
    measures what the behavioural comparison alone catches). ``stats`` (optional)
    collects how deep the runs went.
    """
    pair = EquivalencePair(ref_pkg, other_pkg, stats, max_tasks, run_checks)
    return bound_to(TimerEquivalence, pair)
