"""``kpurgatory demo``: a small produce/fetch scenario run through the purgatory.

A toy broker holds one partition. Produce requests with ``acks=all`` wait in a
produce purgatory until both followers have replicated their offset; long-poll fetch
requests wait in a fetch purgatory until enough bytes arrive or their timeout passes.
It runs in virtual time (``ManualClock`` + ``InlineExecutor``), so the output is the
same on every run and every machine.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from kpurgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    InlineExecutor,
    ManualClock,
    SystemTimer,
)

PARTITION = ("orders", 0)


@dataclass
class Log:
    """The partition's log: bytes appended, and how far each follower has replicated."""

    end_offset: int = 0
    follower_offsets: dict[str, int] = field(default_factory=lambda: {"f1": 0, "f2": 0})

    @property
    def high_watermark(self) -> int:
        return min(self.follower_offsets.values())


class DelayedProduce(DelayedOperation):
    """acks=all: done when every follower has replicated up to ``required_offset``."""

    def __init__(self, name: str, timeout_ms: int, log: Log, required_offset: int, out: Out):
        super().__init__(timeout_ms)
        self.name, self.log, self.required_offset, self.out = name, log, required_offset, out

    def try_complete(self) -> bool:
        return self.log.high_watermark >= self.required_offset and self.force_complete()

    def on_complete(self) -> None:
        replicated = self.log.high_watermark >= self.required_offset
        status = "all replicas have it" if replicated else "not fully replicated"
        self.out.say(f"{self.name}: responds, offset {self.required_offset}: {status}")

    def on_expiration(self) -> None:
        self.out.say(f"{self.name}: ...because its {self.delay_ms} ms timeout passed")


class DelayedFetch(DelayedOperation):
    """Long poll: done when at least ``min_bytes`` lie beyond ``fetch_offset``."""

    def __init__(
        self, name: str, timeout_ms: int, log: Log, fetch_offset: int, min_bytes: int, out: Out
    ):
        super().__init__(timeout_ms)
        self.name, self.log, self.fetch_offset, self.min_bytes, self.out = (
            name,
            log,
            fetch_offset,
            min_bytes,
            out,
        )

    def try_complete(self) -> bool:
        available = self.log.high_watermark - self.fetch_offset
        return available >= self.min_bytes and self.force_complete()

    def on_complete(self) -> None:
        available = max(0, self.log.high_watermark - self.fetch_offset)
        self.out.say(f"{self.name}: responds with {available} bytes")

    def on_expiration(self) -> None:
        self.out.say(f"{self.name}: ...because its {self.delay_ms} ms timeout passed")


@dataclass
class Out:
    """Collects the demo's narration, stamped with virtual time."""

    clock: ManualClock
    lines: list[str] = field(default_factory=list)

    def say(self, text: str) -> None:
        self.lines.append(f"[t={self.clock.now_ms():>4} ms] {text}")


def run_demo() -> list[str]:
    """Run the scenario and return its narration, one line per event."""
    clock = ManualClock(0)
    out = Out(clock)
    log = Log()

    def purgatory(name: str) -> DelayedOperationPurgatory[DelayedOperation]:
        timer = SystemTimer(name, clock=clock, executor=InlineExecutor())
        return DelayedOperationPurgatory(name, timer=timer, reaper_enabled=False)

    with purgatory("Produce") as produce, purgatory("Fetch") as fetch:

        def append(nbytes: int) -> None:
            log.end_offset += nbytes
            out.say(f"leader appends {nbytes} bytes (log end {log.end_offset})")

        def replicate(follower: str) -> None:
            log.follower_offsets[follower] = log.end_offset
            out.say(f"{follower} replicated to {log.end_offset} (hw {log.high_watermark})")
            produce.check_and_complete(PARTITION)
            fetch.check_and_complete(PARTITION)

        def step(ms: int) -> None:
            produce.advance_clock(ms)
            fetch.advance_clock(0)

        fetch.try_complete_else_watch(DelayedFetch("fetch-A", 500, log, 0, 100, out), [PARTITION])
        fetch.try_complete_else_watch(
            DelayedFetch("fetch-B", 200, log, 0, 10_000, out), [PARTITION]
        )
        out.say(f"2 fetches waiting (watched={fetch.watched}, delayed={fetch.num_delayed})")
        append(150)
        produce.try_complete_else_watch(
            DelayedProduce("produce-1", 1000, log, 150, out), [PARTITION]
        )
        step(30)
        replicate("f1")
        step(20)
        replicate("f2")
        append(60)
        produce.try_complete_else_watch(
            DelayedProduce("produce-2", 100, log, 210, out), [PARTITION]
        )
        for _ in range(4):
            step(50)
        out.say(
            f"end: produce watched={produce.watched} delayed={produce.num_delayed}; "
            f"fetch watched={fetch.watched} delayed={fetch.num_delayed} "
            "(expired operations stay watched until a check_and_complete or a purge)"
        )
    return out.lines


def _run(args: argparse.Namespace) -> int:
    for line in run_demo():
        print(line)
    return 0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``kpurgatory demo``."""
    parser = subparsers.add_parser(
        "demo",
        help="run a small produce/fetch scenario in virtual time",
        description=(
            "A toy broker with one partition: produce requests with acks=all wait in a "
            "produce purgatory until both followers have replicated them; long-poll fetch "
            "requests wait in a fetch purgatory until enough bytes arrive or they time out. "
            "Runs in virtual time (ManualClock, InlineExecutor): the output is the same on "
            "every run."
        ),
    )
    parser.set_defaults(func=_run)
