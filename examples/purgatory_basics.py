"""Purgatory basics in virtual time: watch, complete, expire, cancel, purge.

A group coordinator holds "join" requests until every expected member has joined or
the rebalance timeout passes. Each ``DelayedJoin`` is watched on the group's key and
on the joining member's key, so this walk-through also shows what happens to an
operation that is completed through one key while still watched on another.
Run: ``python examples/purgatory_basics.py``.
"""

from __future__ import annotations

from kpurgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    InlineExecutor,
    ManualClock,
    SystemTimer,
)

__all__ = ["DelayedJoin", "main", "run"]


class DelayedJoin(DelayedOperation):
    """Completes when ``expected`` members are in ``joined``, or expires."""

    def __init__(
        self, name: str, timeout_ms: int, joined: set[str], expected: int, out: list[str]
    ) -> None:
        super().__init__(timeout_ms)
        self.name, self.joined, self.expected, self.out = name, joined, expected, out

    def try_complete(self) -> bool:
        """Complete iff the group is full."""
        return len(self.joined) >= self.expected and self.force_complete()

    def on_complete(self) -> None:
        """Answer the join with the members present."""
        self.out.append(f"{self.name}: complete, members={sorted(self.joined)}")

    def on_expiration(self) -> None:
        """Runs after ``on_complete`` when the timeout won (R17)."""
        self.out.append(f"{self.name}: ...by expiry")


def run() -> list[str]:
    """Walk through the purgatory rules; return what happened, one line per event."""
    out: list[str] = []
    clock = ManualClock(0)
    timer = SystemTimer("Rebalance", clock=clock, executor=InlineExecutor())
    joins: DelayedOperationPurgatory[DelayedJoin] = DelayedOperationPurgatory(
        "Rebalance", timer=timer, reaper_enabled=False, purge_interval=0
    )
    with joins:
        members: set[str] = {"m1"}
        first = DelayedJoin("join-m1", 1000, members, 3, out)
        # R22/R23: not complete yet, so it is watched on each key and timed.
        done = joins.try_complete_else_watch(first, ["group-g", "member-m1"])
        out.append(
            f"join-m1 waits: {not done}, watched={joins.watched}, delayed={joins.num_delayed}"
        )

        members.add("m2")
        second = DelayedJoin("join-m2", 1000, members, 3, out)
        joins.try_complete_else_watch(second, ["group-g", "member-m2"])
        out.append(f"join-m2 waits: watched={joins.watched}, delayed={joins.num_delayed}")

        # R25: the third member arrives; check the group key. Both joins complete.
        members.add("m3")
        count = joins.check_and_complete("group-g")
        out.append(f"check_and_complete(group-g) -> {count}")
        # R61: completed, they would linger on their member keys (R27), but nothing is
        # left unfinished, so the purgatory unlinked them all at once; R28: timer empty.
        out.append(f"after: watched={joins.watched}, delayed={joins.num_delayed}")

        # R30: the periodic purge (estimate 2 - delayed 0 > interval 0) finds nothing left.
        joins.advance_clock(0)
        out.append(f"after purge: watched={joins.watched}, purged={joins.num_purged}")

        # R23: a join that finds the group already full completes at once, unwatched.
        late = DelayedJoin("join-m4", 1000, members, 3, out)
        out.append(f"join-m4 completed at once: {joins.try_complete_else_watch(late, ['group-g'])}")

        # R17: a join nobody completes expires when its timeout passes.
        lonely = DelayedJoin("join-x1", 300, {"x1"}, 2, out)
        joins.try_complete_else_watch(lonely, ["group-x"])
        joins.advance_clock(299)
        out.append(f"t={clock.now_ms()}: join-x1 still waiting: {not lonely.is_completed}")
        joins.advance_clock(1)
        out.append(f"t={clock.now_ms()}: join-x1 completed: {lonely.is_completed}")

        # R29: cancel_for_key drops a key; its operations neither complete nor expire.
        stuck = DelayedJoin("join-y1", 300, {"y1"}, 2, out)
        joins.try_complete_else_watch(stuck, ["group-y"])
        cancelled = joins.cancel_for_key("group-y")
        joins.advance_clock(1000)
        names = [operation.name for operation in cancelled]
        out.append(
            f"cancelled {names}: completed={stuck.is_completed}, delayed={joins.num_delayed}"
        )

        # R34: an operation goes through the purgatory once.
        try:
            joins.try_complete_else_watch(stuck, ["group-y"])
        except ValueError:
            out.append("second submission of join-y1 refused")
    return out


def main() -> int:
    """Print the walk-through."""
    for line in run():
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
