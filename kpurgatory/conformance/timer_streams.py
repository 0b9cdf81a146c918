"""Timer streams: runs of the timer's steps alone, for the vectors a timer-only port answers.

Most published ports are timers without a purgatory, and ``kpurgatory conformance
--timer-only`` sends them only vectors made of timer steps. The workload streams
(``kpurgatory.workloads``) all watch operations, so this generator writes the timer's
own streams: for each preset of the workloads (tick, wheel size, start time) and seed, a
run of adds with delays shaped by the wheel's spans (on and beside slot and level
edges, zero, negative), re-adds, cancels (``cancel``), clock moves without a drain,
advances that stop exactly on or one short of the next due time, ``next_due_time``
reads, tasks whose run cancels or re-adds a later task or drains (a nested drain,
R74), and one seed per preset that starts the clock at a negative reading, where a port
with truncating division rounds the wrong way (R1, ``kafka-truncating-division``).

The streams are a pure function of (preset, seed): ``random.Random`` seeded from both,
so regenerating reproduces the committed files byte for byte (``GENERATOR_VERSION``).
"""

from __future__ import annotations

import random

from kpurgatory.steps import Add, Advance, Cancel, ClockAdvance, Init, NextDueTime, Step
from kpurgatory.workloads import PRESETS

__all__ = ["GENERATOR_VERSION", "NEGATIVE_START_SEED", "TIMER_SEEDS", "timer_stream"]

GENERATOR_VERSION = "1"
"""Bumped whenever the streams change for the same (preset, seed)."""

TIMER_SEEDS: tuple[int, ...] = (1, 2, 3)
"""The seeds committed per preset."""

NEGATIVE_START_SEED = 3
"""The seed whose run starts the clock (and the timer) below zero."""


def timer_stream(preset: str, seed: int, n_steps: int = 40) -> list[Step]:
    """The timer stream of ``preset`` and ``seed``: an ``init`` and ``n_steps`` steps."""
    chosen = PRESETS[preset]
    rng = random.Random(f"timer/{preset}/{seed}")
    init = chosen.init(seed)
    if seed == NEGATIVE_START_SEED:
        start = -rng.randrange(1, 50 * init.tick_ms) - init.tick_ms * init.wheel_size * 3
        init = Init(
            tick_ms=init.tick_ms, wheel_size=init.wheel_size, start_ms=start, clock_ms=start
        )
    return _Stream(rng, init).run(n_steps)


class _Stream:
    """The state a stream needs to stay a valid run: the tasks added so far."""

    def __init__(self, rng: random.Random, init: Init) -> None:
        self.rng = rng
        self.init = init
        self.tick = init.tick_ms
        self.wheel = init.wheel_size
        self.tasks: dict[str, tuple[int, tuple[Step, ...]]] = {}
        self.clock = init.clock_ms
        self.due: dict[str, int] = {}

    def run(self, n_steps: int) -> list[Step]:
        steps: list[Step] = [self.init]
        choices = ["add", "add", "add", "act", "readd", "cancel", "advance", "advance"]
        choices += ["due", "clock", "next"]
        while len(steps) <= n_steps:
            kind = self.rng.choice(choices)
            step = getattr(self, f"_{kind}")()
            if step is not None:
                steps.append(step)
        return steps

    def _delay(self) -> int:
        rng, tick, wheel = self.rng, self.tick, self.wheel
        shape = rng.choice(["slot", "slot", "edge", "level", "zero", "negative"])
        if shape == "slot":
            return rng.randrange(0, 2 * tick * wheel)
        if shape == "edge":
            return tick * rng.choice([1, wheel - 1, wheel, wheel + 1]) + rng.choice([-1, 0, 1])
        if shape == "level":
            span: int = tick * wheel ** rng.randrange(1, 4)
            return span * rng.randrange(1, wheel + 1) + rng.choice([-1, 0, 1])
        if shape == "zero":
            return 0
        return -rng.randrange(1, 3 * tick)

    def _new_label(self) -> str:
        return f"t{len(self.tasks)}"

    def _schedule(self, label: str, delay: int) -> None:
        self.due[label] = self.clock + delay

    def _add(self) -> Step:
        label, delay = self._new_label(), self._delay()
        self.tasks[label] = (delay, ())
        self._schedule(label, delay)
        return Add(label, delay)

    def _act(self) -> Step | None:
        """A task due no later than an existing quiet one, whose run cancels it, re-adds
        it or drains a little further (R11, R10, R74)."""
        quiet = sorted(label for label, (_, run) in self.tasks.items() if not run)
        if not quiet:
            return None
        target = self.rng.choice(quiet)
        target_delay = self.tasks[target][0]
        delay = target_delay - self.tick * self.rng.choice([0, 1, 2])
        act = self.rng.choice(["cancel", "readd", "drain"])
        on_run: tuple[Step, ...]
        if act == "cancel":
            on_run = (Cancel(target),)
        elif act == "readd":
            on_run = (Add(target, target_delay),)
        else:
            on_run = (Advance(self.tick * self.rng.randrange(0, 3)),)
        label = self._new_label()
        self.tasks[label] = (delay, on_run)
        self._schedule(label, delay)
        return Add(label, delay, on_run=on_run)

    def _readd(self) -> Step | None:
        if not self.tasks:
            return None
        label = self.rng.choice(sorted(self.tasks))
        delay, on_run = self.tasks[label]
        self._schedule(label, delay)
        return Add(label, delay, on_run=on_run)

    def _cancel(self) -> Step | None:
        if not self.tasks:
            return None
        return Cancel(self.rng.choice(sorted(self.tasks)))

    def _advance(self) -> Step:
        ms = self.rng.choice([self.tick, 2 * self.tick, self.tick * self.wheel, 1])
        self.clock += ms
        return Advance(ms)

    def _due(self) -> Step | None:
        """An advance exactly to, or one short of, a scheduled task's expiration."""
        ahead = sorted(due - self.clock for due in self.due.values() if due > self.clock)
        if not ahead:
            return None
        ms = ahead[0] - self.rng.choice([0, 0, 1])
        if ms <= 0 or ms > 10 * self.tick * self.wheel**3:
            return None
        self.clock += ms
        return Advance(ms)

    def _clock(self) -> Step:
        ms = self.rng.choice([1, self.tick, self.tick * self.wheel])
        self.clock += ms
        return ClockAdvance(ms)

    def _next(self) -> Step:
        return NextDueTime()
