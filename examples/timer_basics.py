"""Timer basics in virtual time: due times, "due at once", cancel, re-add, and size.

A ``SystemTimer`` on a ``ManualClock`` with an ``InlineExecutor`` is fully
deterministic: ``advance_clock(ms)`` moves the clock by exactly ``ms`` and runs every
task that is due, in the calling thread. That makes it the right tool to learn the
rules (and to test code that uses the timer). Run: ``python examples/timer_basics.py``.
"""

from __future__ import annotations

from kpurgatory import InlineExecutor, ManualClock, SystemTimer, TimerTask

__all__ = ["Say", "main", "run"]


class Say(TimerTask):
    """A task that records its name and the clock reading when it runs."""

    def __init__(self, delay_ms: int, name: str, clock: ManualClock, out: list[str]) -> None:
        super().__init__(delay_ms)
        self.name, self.clock, self.out = name, clock, out

    def run(self) -> None:
        """Record ``t=<now>: <name> ran``."""
        self.out.append(f"t={self.clock.now_ms()}: {self.name} ran")


def run() -> list[str]:
    """Walk through the timer rules; return what happened, one line per event."""
    out: list[str] = []
    clock = ManualClock(0)
    with SystemTimer("basics", tick_ms=10, clock=clock, executor=InlineExecutor()) as timer:
        # R1: due time = floor((reading + delay) / tick) * tick. 25 -> 20, 40 -> 40.
        soon, later = Say(25, "soon", clock, out), Say(40, "later", clock, out)
        timer.add(soon)
        timer.add(later)
        # R3: a due time at or before the current time (0) runs inside add: 5 -> 0.
        timer.add(Say(5, "at-once", clock, out))
        out.append(f"scheduled: size={timer.size}")  # R12: at-once is not counted

        # R7: advance_clock(20) moves the manual clock by exactly 20, then drains.
        ran = timer.advance_clock(20)
        out.append(f"advance_clock(20) -> {ran}, current_time={timer.current_time}")

        # R9: cancel is idempotent and drops size at once; the task never runs.
        later.cancel()
        later.cancel()
        out.append(f"cancelled later: size={timer.size}")
        ran = timer.advance_clock(100)
        out.append(f"advance_clock(100) -> {ran} (nothing was due)")  # R8

        # R10: adding a task again schedules it afresh, from the new clock reading.
        again = Say(50, "again", clock, out)
        timer.add(again)  # reading 120: due 170
        clock.advance(30)
        timer.add(again)  # reading 150: due 200, the first schedule is gone
        out.append(f"re-added: size={timer.size}")
        timer.advance_clock(20)  # t=170: not due any more
        timer.advance_clock(30)  # t=200: due now
    return out


def main() -> int:
    """Print the walk-through."""
    for line in run():
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
