"""The optimized purgatory's structure: shards, identity-keyed watcher lists, the
``removeKeyIfEmpty`` rule, its counters, and ``_check()``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.optimized import DelayedOperation, DelayedOperationPurgatory, SystemTimer
from kpurgatory.optimized import purgatory as purgatory_module
from tests.optimized.helpers import assert_check_fails


class Op(DelayedOperation):
    """Completes iff ``ready``; records its callbacks in ``log``."""

    def __init__(self, delay_ms: int, name: str, log: list[str]) -> None:
        super().__init__(delay_ms)
        self.name = name
        self.log = log
        self.ready = False

    def try_complete(self) -> bool:
        return self.ready and self.force_complete()

    def on_complete(self) -> None:
        self.log.append(f"complete {self.name}")

    def on_expiration(self) -> None:
        self.log.append(f"expire {self.name}")


class EqualToEverything(Op):
    """A user operation whose ``==`` and hash lie: the purgatory must use identity."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 1


class Key:
    """A key with a chosen hash (negative hashes must land in a valid shard)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __hash__(self) -> int:
        return self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and other.value == self.value


def make(shards: int = 512, purge_interval: int = 1000) -> DelayedOperationPurgatory[Op]:
    timer = SystemTimer("p", clock=ManualClock(0), executor=InlineExecutor())
    return DelayedOperationPurgatory(
        "p", timer, purge_interval=purge_interval, reaper_enabled=False, shards=shards
    )


@pytest.fixture
def purgatory() -> Iterator[DelayedOperationPurgatory[Op]]:
    with make() as made:
        yield made


def test_keys_go_to_the_shard_of_their_absolute_hash(
    purgatory: DelayedOperationPurgatory[Op],
) -> None:
    log: list[str] = []
    keys = [Key(-5), Key(5), Key(-1), Key(511), Key(512), Key(-(2**40))]
    for index, key in enumerate(keys):
        purgatory.try_complete_else_watch(Op(100, f"o{index}", log), [key])
    for key in keys:
        shard = purgatory._shards[abs(hash(key)) % 512]
        assert key in shard.watchers
    assert purgatory.shards == 512
    assert purgatory.watched == len(keys) and purgatory.watched_keys == len(keys)
    purgatory._check()


def test_operations_are_watched_and_unlinked_by_identity(
    purgatory: DelayedOperationPurgatory[Op],
) -> None:
    """R25/R27: two operations equal by ``==`` (same hash) are two watchers; completing
    one unlinks exactly that one."""
    log: list[str] = []
    first, second = EqualToEverything(100, "a", log), EqualToEverything(100, "b", log)
    purgatory.try_complete_else_watch(first, ["k"])
    purgatory.try_complete_else_watch(second, ["k"])
    assert purgatory.watched == 2
    second.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert log == ["complete b"]
    assert purgatory.watched == 1
    assert purgatory.cancel_for_key("k") == [first]
    purgatory._check()


def test_a_detached_list_emptied_later_does_not_drop_the_new_list(
    purgatory: DelayedOperationPurgatory[Op],
) -> None:
    """R26 (Kafka's removeKeyIfEmpty): check_and_complete snapshots list L1; during its
    visit the key is cancelled and watched again (list L2); emptying L1 must not drop L2."""
    log: list[str] = []
    late = Op(100, "late", log)

    class Rewatcher(Op):
        def try_complete(self) -> bool:
            if not self.ready:
                return False
            purgatory.cancel_for_key("k")  # detaches L1
            purgatory.try_complete_else_watch(late, ["k"])  # maps a new L2
            return self.force_complete()

    first = Rewatcher(100, "first", log)
    purgatory.try_complete_else_watch(first, ["k"])
    first.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert purgatory.watched == 1 and purgatory.watched_keys == 1
    late.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert purgatory.watched_keys == 0
    purgatory._check()


@pytest.mark.parametrize("shards", [1, 3, 512])
def test_same_results_for_any_number_of_shards(shards: int) -> None:
    """R22-R30: the shard count changes only where lists live, never what is observed."""
    log: list[str] = []
    with make(shards=shards, purge_interval=1) as purgatory:
        ops = [Op(10 * (index + 1), f"o{index}", log) for index in range(6)]
        for index, op in enumerate(ops):
            purgatory.try_complete_else_watch(op, [f"k{index % 3}", "all"])
        ops[1].ready = ops[4].ready = True
        assert purgatory.check_and_complete("k1") == 2
        ops[2].force_complete()
        purgatory.advance_clock(30)  # o0 expires; 6 watched - 2 delayed > 1: purge
        assert purgatory.num_purged == 6  # o0, o1, o2, o4 on "all"; o0 on k0; o2 on k2
        assert purgatory.watched == 4  # o3, o5 on their own key and on "all"
        assert purgatory.num_expired == 1 and purgatory.num_completed == 2
        assert purgatory.estimated_total_operations == 2  # reset to num_delayed first
        assert purgatory.check_and_complete("k2") == 0  # o5 pending, o2 already purged
        purgatory._check()
        snapshot = (purgatory.watched, purgatory.watched_keys, purgatory.num_delayed, log)
    assert snapshot == (
        4,
        3,
        2,
        ["complete o1", "complete o4", "complete o2", "complete o0", "expire o0"],
    )


def test_num_expired_counts_only_expiries_that_won(
    purgatory: DelayedOperationPurgatory[Op],
) -> None:
    """R17: completion by force_complete is not an expiry; expiry of a pending op is."""
    log: list[str] = []
    early, late = Op(10, "early", log), Op(10, "late", log)
    purgatory.try_complete_else_watch(early, ["k"])
    purgatory.try_complete_else_watch(late, ["k"])
    early.force_complete()
    purgatory.advance_clock(10)
    assert purgatory.num_expired == 1
    assert log == ["complete early", "complete late", "expire late"]


def test_shards_argument_is_validated() -> None:
    with pytest.raises(ValueError, match="shards"):
        make(shards=0)
    with pytest.raises(TypeError, match="shards"):
        make(shards=True)


def test_check_detects_a_wrong_shard_count(purgatory: DelayedOperationPurgatory[Op]) -> None:
    purgatory.try_complete_else_watch(Op(10, "o", []), ["k"])
    purgatory._shards[abs(hash("k")) % 512].count += 1
    assert_check_fails(purgatory, "counts")


def test_check_detects_an_empty_mapped_list(purgatory: DelayedOperationPurgatory[Op]) -> None:
    purgatory.try_complete_else_watch(Op(10, "o", []), ["k"])
    shard = purgatory._shards[abs(hash("k")) % 512]
    shard.watchers["k"].ops.clear()
    shard.count = 0
    assert_check_fails(purgatory, "empty watcher list")


def test_check_detects_a_key_in_the_wrong_shard(purgatory: DelayedOperationPurgatory[Op]) -> None:
    purgatory.try_complete_else_watch(Op(10, "o", []), [Key(7)])
    source, target = purgatory._shards[7], purgatory._shards[8]
    target.watchers.update(source.watchers)
    target.count, source.count = source.count, 0
    source.watchers.clear()
    assert_check_fails(purgatory, "not its own")


class SelfUnequalKey:
    """A hashable key that is not equal even to itself (as a NaN is not): a dict still
    finds it, by identity."""

    def __hash__(self) -> int:
        return 5

    def __eq__(self, other: object) -> bool:
        return False


def test_r22_check_accepts_a_key_not_equal_to_itself(
    purgatory: DelayedOperationPurgatory[Op],
) -> None:
    """R22, R25: keys are looked up as a dict does, identity first, so a key unequal to
    itself (a NaN, or this one) is watched and checked like any other; ``_check`` must
    accept the list mapped for it (its ``key`` is that very object)."""
    log: list[str] = []
    for key in (SelfUnequalKey(), float("nan")):
        op = Op(10**6, "o", log)
        assert purgatory.try_complete_else_watch(op, [key]) is False
        purgatory._check()
        op.ready = True
        assert purgatory.check_and_complete(key) == 1
        purgatory._check()
    assert log == ["complete o", "complete o"] and purgatory.watched == 0


def test_r35_operation_classes_checked_once_are_remembered_up_to_a_bound(
    purgatory: DelayedOperationPurgatory[Op],
) -> None:
    """R35's type check (an optimized ``DelayedOperation``, else ``TypeError``) is made
    once per class: a class that passed is remembered, so its next submission skips
    the ABC ``isinstance``. At most ``_KNOWN_TYPES_LIMIT`` classes are remembered
    (classes made on the fly would grow the set for ever); past that a class is still
    checked, and accepted or refused, each time."""
    known = purgatory_module._KNOWN_OPERATION_TYPES
    limit = purgatory_module._KNOWN_TYPES_LIMIT
    saved = set(known)
    log: list[str] = []

    class First(Op):
        pass

    class Second(Op):
        pass

    try:
        known.clear()
        assert purgatory.try_complete_else_watch(First(10, "a", log), ["k"]) is False
        assert known == {First}
        known.update(type(f"Filler{index}", (), {}) for index in range(limit - 1))
        assert len(known) == limit
        assert purgatory.try_complete_else_watch(Second(10, "b", log), ["k"]) is False
        assert Second not in known and len(known) == limit
        with pytest.raises(TypeError, match="operation"):
            purgatory.try_complete_else_watch(object(), ["k"])  # type: ignore[call-overload]
        assert purgatory.watched == 2
    finally:
        known.clear()
        known.update(saved)
