"""The purgatory equivalence machine: a reference purgatory and another implementation's in
step (R16-R34).

See ``tests.machines.equivalence`` for what the equivalence machines compare and why;
``make_purgatory_machine`` binds the machine to two packages.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import ClassVar

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
)

from tests.machines.equivalence import (
    ADVANCE_KINDS,
    DELAY_KINDS,
    MISSING_DUE,
    EquivalencePair,
    ImplPackage,
    MachineStats,
    advance_amount,
    bound_to,
    delay_from,
    run_check,
    run_on_sides,
)
from tests.machines.equivalence_sides import (
    KEYS,
    PurgatoryLogEntry,
    PurgatorySide,
    canonical_expiries,
)


class PurgatoryEquivalence(RuleBasedStateMachine):
    """Reference and other purgatory in step; see ``make_purgatory_machine``."""

    pair: ClassVar[EquivalencePair]
    """The two packages and the run's settings (bound by ``make_purgatory_machine``)."""

    operations = Bundle("operations")

    def __init__(self) -> None:
        super().__init__()
        self.sides: list[PurgatorySide] = []
        self.tick = 1
        self.wheel = 2
        self.count = 0
        self.keys_of: dict[str, list[Hashable]] = {}
        self.missing: dict[str, list[Hashable]] = {}  # keys still needed before ready
        self.due: dict[str, int] = {}

    @initialize(
        tick=st.one_of(st.just(1), st.integers(1, 5)),
        wheel=st.one_of(st.integers(2, 4), st.integers(2, 20)),
        clock_start=st.one_of(st.just(0), st.integers(-1000, 1000)),
        purge_interval=st.integers(0, 5),
        timer_enabled=st.sampled_from([True, True, True, False]),
        shards=st.sampled_from([None, 1, 2, 3, 8]),
    )
    def set_up(
        self,
        tick: int,
        wheel: int,
        clock_start: int,
        purge_interval: int,
        timer_enabled: bool,
        shards: int | None,
    ) -> None:
        """Build both purgatories (R33 when timer_enabled is False).

        ``shards`` is passed only to an implementation whose purgatory accepts it
        (the optimized one's keyword extension; None keeps its default of 512): few
        shards put many keys in one shard and make each step cheaper.
        """
        self.tick, self.wheel = tick, wheel
        self.sides = [
            PurgatorySide(pkg, tick, wheel, clock_start, purge_interval, timer_enabled, shards)
            for pkg in (self.pair.ref_pkg, self.pair.other_pkg)
        ]
        self._compare_state("set_up")

    def teardown(self) -> None:
        """Shut both purgatories down."""
        for side in self.sides:
            side.close()
        if self.sides and self.pair.stats is not None:
            self.pair.stats.examples += 1

    def _step(
        self, what: str, action: Callable[[PurgatorySide], object], *, expiries: bool = False
    ) -> object:
        """Run ``action`` on each side, compare outcome, events and state."""
        if self.pair.stats is not None:
            self.pair.stats.steps += 1
        outcomes, logs = run_on_sides(self.sides, action)
        assert outcomes[0] == outcomes[1], (
            f"{what}: {self.pair.ref_name} -> {outcomes[0]}, "
            f"{self.pair.other_name} -> {outcomes[1]}"
        )
        if expiries:
            same = canonical_expiries(logs[0], self.due) == canonical_expiries(logs[1], self.due)
        else:
            same = logs[0] == logs[1]
        assert same, (
            f"{what}: events differ\n  {self.pair.ref_name}: {logs[0]}"
            f"\n  {self.pair.other_name}: {logs[1]}"
        )
        for side, log in zip(self.sides, logs, strict=True):
            self._check_spec(what, side, log, expiries)
        if self.pair.stats is not None:
            for kind in ("complete", "expire"):
                self.pair.stats.counters[kind] += sum(1 for entry in logs[0] if entry[1] == kind)
        self._adopt_children()
        self._compare_state(what)
        return outcomes[0][1]

    def _adopt_children(self) -> None:
        """Register operations a reentrant completion submitted (keys, due time)."""
        spawned = [side.spawned for side in self.sides]
        assert spawned[0] == spawned[1], f"spawned operations differ: {spawned}"
        for child, due, key in spawned[0]:
            self.keys_of[child] = [key]
            self.missing[child] = [key]
            self.due[child] = due
            if self.pair.stats is not None:
                self.pair.stats.counters["reentrant"] += 1
        for side in self.sides:
            side.spawned = []

    def _check_spec(
        self, what: str, side: PurgatorySide, log: list[PurgatoryLogEntry], expiries: bool
    ) -> None:
        """R17 on each side: an expiry directly follows that operation's completion;
        R6: expiries in non-decreasing due order."""
        for index, (op_name, kind, _, _) in enumerate(log):
            if kind == "expire":
                assert index > 0 and log[index - 1][:2] == (op_name, "complete"), (
                    f"{what}: {side.name} expired {op_name} without completing it first "
                    f"(R17): {log}"
                )
        if expiries:
            dues = [self.due.get(op_name, MISSING_DUE) for op_name, _, _, _ in log]
            assert dues == sorted(dues), f"{what}: {side.name} expired out of due order (R6): {log}"

    def _compare_state(self, what: str) -> None:
        ref, other = self.sides
        ref_counters, other_counters = ref.counters(), other.counters()
        assert ref_counters == other_counters, (
            f"{what}: counters differ: {self.pair.ref_name} {ref_counters} vs "
            f"{self.pair.other_name} {other_counters}"
        )
        ref_ops, other_ops = ref.op_states(), other.op_states()
        assert ref_ops == other_ops, (
            f"{what}: operations (completed, abandoned, try_complete calls) differ:\n"
            f"  {self.pair.ref_name}: {ref_ops}\n  {self.pair.other_name}: {other_ops}"
        )
        assert ref.timer.current_time == other.timer.current_time, (
            f"{what}: current_time {ref.timer.current_time} vs {other.timer.current_time}"
        )
        assert ref.timer.next_due_time == other.timer.next_due_time, (
            f"{what}: next_due_time {ref.timer.next_due_time} vs {other.timer.next_due_time} (R44)"
        )
        if self.pair.run_checks:
            for side in self.sides:
                run_check(side.timer, f"{side.name} timer")
                run_check(side.purgatory, f"{side.name} purgatory")

    # -- rules ---------------------------------------------------------------------

    @precondition(lambda self: self.count < self.pair.limit)
    @rule(
        target=operations,
        kind=st.sampled_from(DELAY_KINDS),
        level=st.integers(0, 5),
        mult=st.integers(0, 64),
        jitter=st.integers(-2, 2),
        raw=st.integers(0, 1 << 30),
        keys=st.lists(KEYS, min_size=1, max_size=4),
        ready_on_try=st.sampled_from([0, 0, 0, 1, 2, 3, -1, -2]),
        reentrant=st.sampled_from([False, False, False, True]),
        needs=st.lists(KEYS, max_size=2),
    )
    def submit(
        self,
        kind: str,
        level: int,
        mult: int,
        jitter: int,
        raw: int,
        keys: list[Hashable],
        ready_on_try: int,
        reentrant: bool,
        needs: list[Hashable],
    ) -> str:
        """try_complete_else_watch on one or many keys (R22-R24, R33).

        ``ready_on_try``: 0 never by itself, 1 ready at submission (first try), 2 on the
        second try (completed inside the call, stays watched), 3 on the next try; -1 and
        -2: the first or second try raises, and the call must leave no trace (R38).
        ``needs``: the keys whose events make it ready (default: its first watch key);
        a needed key it does not watch makes it ready without a check on that key.
        """
        delay = delay_from(kind, level, mult, jitter, raw, self.tick, self.wheel)
        return self._submit(delay, keys, ready_on_try, reentrant, needs)

    @precondition(lambda self: self.count < self.pair.limit)
    @rule(
        target=operations,
        other=operations,
        extra=st.lists(KEYS, max_size=2),
        level=st.integers(0, 3),
        ready_on_try=st.sampled_from([0, 0, 1, 2, 3]),
        reentrant=st.sampled_from([False, False, True]),
        needs=st.lists(KEYS, max_size=2),
    )
    def submit_alongside(
        self,
        other: str,
        extra: list[Hashable],
        level: int,
        ready_on_try: int,
        reentrant: bool,
        needs: list[Hashable],
    ) -> str:
        """Submit an operation watching the keys of ``other`` (plus ``extra``): watcher
        lists with several operations, of which an event completes only some (R25)."""
        delay = self.tick * int(self.wheel**level) + 1
        keys = [*self.keys_of[other], *extra]
        return self._submit(delay, keys, ready_on_try, reentrant, needs)

    def _submit(
        self,
        delay: int,
        keys: list[Hashable],
        ready_on_try: int,
        reentrant: bool,
        needs: list[Hashable],
    ) -> str:
        name = f"op{self.count}"
        self.count += 1
        self.keys_of[name] = list(keys)
        self.missing[name] = list(needs) if needs else list(keys[:1])
        ref = self.sides[0]
        self.due[name] = (ref.clock.now_ms() + delay) // self.tick * self.tick
        if reentrant and ref.reactor is None:
            # One reentrant operation at a time: two could race on the same key in an
            # order the spec leaves open (same-due expiries, R6). It reacts on the key
            # whose event completes it, i.e. inside check_and_complete on that key.
            self.missing[name] = list(keys[:1])
            for side in self.sides:
                side.reactor = (name, keys[0])
        self._step(
            f"try_complete_else_watch({name}, {keys})",
            lambda side: side.submit(name, delay, keys, ready_on_try),
        )
        return name

    @rule(op=operations, keys=st.lists(KEYS, min_size=1, max_size=2))
    def resubmit(self, op: str, keys: list[Hashable]) -> None:
        """A second submission raises ValueError and changes nothing (R34)."""
        self._step(
            f"try_complete_else_watch({op}) again",
            lambda side: side.purgatory.try_complete_else_watch(side.ops[op], list(keys)),
        )

    @rule(key=KEYS)
    def keyed_event(self, key: Hashable) -> None:
        """Record an event on ``key``, then check_and_complete(key) (R25).

        An operation becomes ready once every key it needs has had an event, so an
        event completes some of the operations watching its key and not others.
        """
        self._event(key)

    @rule(op=operations)
    def event_for(self, op: str) -> None:
        """An event on a key ``op`` still needs (or its first watch key): aims events
        at keys that pending operations watch, the reentrant one's included."""
        missing = self.missing.get(op)
        self._event(missing[0] if missing else self.keys_of[op][0])

    def _event(self, key: Hashable) -> None:
        for name in list(self.missing):
            missing = self.missing[name]
            if key in missing:
                missing[:] = [other for other in missing if other != key]
                if not missing:
                    del self.missing[name]
                    for side in self.sides:
                        side.ops[name].ready = True
        count = self._step(f"event({key!r})", lambda side: side.purgatory.check_and_complete(key))
        event(f"purgatory: event completed {min(count, 3) if isinstance(count, int) else count}")

    @rule(key=KEYS)
    def check_and_complete(self, key: Hashable) -> None:
        """check_and_complete with no new readiness: counts only what it completes (R25)."""
        self._step(
            f"check_and_complete({key!r})", lambda side: side.purgatory.check_and_complete(key)
        )

    @rule(op=operations)
    def set_ready(self, op: str) -> None:
        """Make an operation completable without telling the purgatory."""
        for side in self.sides:
            side.ops[op].ready = True

    @rule(op=operations)
    def force_complete(self, op: str) -> None:
        """A direct force_complete from outside the purgatory (R16)."""
        self._step(f"force_complete({op})", lambda side: side.ops[op].force_complete())

    @rule(op=operations)
    def safe_try_complete(self, op: str) -> None:
        """safe_try_complete skips try_complete on a completed operation (R18)."""
        self._step(f"safe_try_complete({op})", lambda side: side.ops[op].safe_try_complete())

    @rule(op=operations)
    def cancel_timer_entry(self, op: str) -> None:
        """op.cancel(): abandon if submitted (R40), else the timer-level cancel (R9)."""
        self._step(f"cancel({op})", lambda side: side.ops[op].cancel())

    @rule(op=operations)
    def abandon(self, op: str) -> None:
        """purgatory.abandon: True once for a pending op; unwatched, untimed (R40)."""
        self._step(f"abandon({op})", lambda side: side.purgatory.abandon(side.ops[op]))

    @rule(key=KEYS)
    def cancel_for_key(self, key: Hashable) -> None:
        """cancel_for_key returns the watchers in watch order (R29)."""
        self._step(
            f"cancel_for_key({key!r})",
            lambda side: [op.name for op in side.purgatory.cancel_for_key(key)],
        )

    @rule(
        kind=st.sampled_from(ADVANCE_KINDS),
        level=st.integers(0, 5),
        mult=st.integers(0, 64),
        jitter=st.integers(-2, 2),
        raw=st.integers(0, 1 << 30),
        pick=st.integers(0, 1 << 16),
    )
    def advance_clock(
        self, kind: str, level: int, mult: int, jitter: int, raw: int, pick: int
    ) -> None:
        """Purgatory advance_clock: expiries in due order, then the purge rule (R17, R30)."""
        ref = self.sides[0]
        pending = sorted(
            self.due[name]
            for name, op in ref.ops.items()
            if not op.is_completed and name in self.due
        )
        next_due = pending[pick % len(pending)] if pending else None
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
        purged_before = ref.purgatory.num_purged
        self._step(
            f"advance_clock({amount})",
            lambda side: side.purgatory.advance_clock(amount),
            expiries=True,
        )
        if ref.purgatory.num_purged > purged_before:
            event("purgatory: a purge removed operations")
            if self.pair.stats is not None:
                self.pair.stats.counters["purges"] += 1

    @rule(kind=st.sampled_from(["one", "tick", "random"]), raw=st.integers(0, 1 << 20))
    def clock_advance(self, kind: str, raw: int) -> None:
        """Move both clocks without draining."""
        amount = advance_amount(kind, 0, 0, 0, raw, self.tick, self.wheel, None, 0)
        self._step(f"clock.advance({amount})", lambda side: side.clock.advance(amount))


def make_purgatory_machine(
    ref_pkg: ImplPackage,
    other_pkg: ImplPackage,
    *,
    stats: MachineStats | None = None,
    max_operations: int = 40,
    run_checks: bool = True,
) -> type[RuleBasedStateMachine]:
    """A machine that drives ``ref_pkg`` and ``other_pkg`` purgatories in step (R16-R34).

    Each side: a purgatory (reaper off, ``purge_interval`` 0..5, ``timer_enabled`` drawn,
    False now and then) on a manual-clock inline timer. Operations complete when their
    ``ready`` flag is set: at submission (completed on the first try), on the second try
    (between the two tries of ``try_complete_else_watch``), on a later try, or by a keyed
    ``event`` that marks every operation interested in the key ready and then runs
    ``check_and_complete(key)``. Other rules: check_and_complete without an event,
    force_complete, safe_try_complete, cancel of the timer entry, cancel_for_key, a
    second submission (R34), advance_clock (purges included) and bare clock moves. After
    every step both sides must agree on the return value or exception, the completion and
    expiry events in order (same-due expiries as a multiset), every counter, and each
    operation's completed flag and number of try_complete calls, and pass ``_check()``
    (unless ``run_checks`` is False). One operation per run may be reentrant: its
    ``on_complete`` calls ``cancel_for_key`` and submits a fresh operation (R37).
    """
    pair = EquivalencePair(ref_pkg, other_pkg, stats, max_operations, run_checks)
    return bound_to(PurgatoryEquivalence, pair)
