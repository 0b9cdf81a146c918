"""The lockset checks themselves: what they flag, what they exempt, and that they leave
the classes as they found them."""

from __future__ import annotations

import importlib
import threading
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock, optimized, reference
from kpurgatory.optimized import purgatory as optimized_purgatory
from tests.concurrency.lockset import (
    GUARDS,
    UNGUARDED,
    Guard,
    GuardedDict,
    Lockset,
    LocksetViolationError,
    attr_lock,
    holds,
    is_pure,
)
from tests.concurrency.scheduler import attribute_names
from tests.support import ready_operation


def test_holds_asks_the_lock_itself() -> None:
    lock = threading.RLock()
    assert not holds(lock)
    with lock:
        assert holds(lock)
        seen: list[bool] = []
        other = threading.Thread(target=lambda: seen.append(holds(lock)))
        other.start()
        other.join()
        assert seen == [False]
    with pytest.raises(TypeError, match="_is_owned"):
        holds(object())


@pytest.mark.skipif(
    not is_pure("kpurgatory.protocol"), reason="compiled: the protocol's fields are native"
)
def test_unguarded_writes_are_flagged_guarded_and_first_writes_are_not() -> None:
    lockset = Lockset()
    with lockset.installed():
        purgatory: Any = reference.DelayedOperationPurgatory(  # first writes: initialisation
            "lockset", timer=reference.SystemTimer("lockset", clock=ManualClock(0)),
            reaper_enabled=False,
        )  # fmt: skip
        with purgatory._lock:
            purgatory._num_purged = 1
            purgatory._watchers["k"] = []
            list(purgatory._watchers)
        assert lockset.violations == []
        with pytest.raises(LocksetViolationError, match="_num_purged"):
            purgatory._num_purged = 2
        with pytest.raises(LocksetViolationError, match="_watchers"):
            purgatory._watchers["k"].append(object())
        with pytest.raises(LocksetViolationError, match="iterate"):
            list(purgatory._watchers)
        assert len(purgatory._watchers) == 1  # a single read is exempt
        purgatory.shutdown()
    assert len(lockset.violations) == 3


@pytest.mark.skipif(
    not is_pure("kpurgatory.optimized.purgatory"), reason="compiled: the lockset skips it"
)
def test_optimized_slots_and_mutators_are_checked() -> None:
    lockset = Lockset()
    with lockset.installed():
        timer = optimized.SystemTimer("slots", clock=ManualClock(0), executor=InlineExecutor())
        purgatory: optimized.DelayedOperationPurgatory[Any] = optimized.DelayedOperationPurgatory(
            "slots", timer=timer, reaper_enabled=False, shards=2
        )
        shard = purgatory._shards[0]
        assert isinstance(shard.watchers, GuardedDict)
        with pytest.raises(LocksetViolationError, match=r"_Shard\.count"):
            shard.count = 5
        bucket = timer._wheel.buckets[0]
        with pytest.raises(LocksetViolationError, match=r"TimerTaskList\.remove"):
            bucket.remove(bucket.root)
        timer.close()


@pytest.mark.skipif(
    not is_pure("kpurgatory.optimized.purgatory"), reason="compiled: the lockset skips it"
)
def test_installed_restores_every_class_and_disarms_its_containers() -> None:
    before = {(g.module, g.owner, g.attribute): _raw(g) for g in GUARDS}
    lockset = Lockset()
    with lockset.installed():
        shard: optimized_purgatory._Shard[Any] = optimized_purgatory._Shard()
    assert {(g.module, g.owner, g.attribute): _raw(g) for g in GUARDS} == before
    shard.watchers["k"] = optimized_purgatory.WatcherList("k")  # no lock, no longer checked
    assert lockset.violations == []


@pytest.mark.skipif(
    not is_pure("kpurgatory.optimized.purgatory"), reason="compiled: the lockset skips it"
)
def test_a_table_row_for_a_missing_attribute_fails_loudly() -> None:
    stale = Guard("kpurgatory.optimized.purgatory", "_Shard", "gone", "method", attr_lock("lock"))
    with pytest.raises(LookupError, match=r"_Shard\.gone"), Lockset().installed([stale]):
        pass


def _raw(guard: Guard) -> object:
    import importlib

    cls = getattr(importlib.import_module(guard.module), guard.owner)
    return cls.__dict__.get(guard.attribute)


@pytest.mark.skipif(
    not is_pure("kpurgatory.protocol"), reason="compiled: the protocol's fields are native"
)
def test_reads_of_shared_state_without_the_lock_are_recorded() -> None:
    """Reads are checked too, once a second thread has touched the object (Eraser's
    exclusive state exempts initialisation): a single read of a guarded field or
    container without its lock is recorded, once per kind of read, and not raised (a read
    changes nothing); rows with ``free_reads`` (documented lock-free reads) are exempt."""
    lockset = Lockset()
    with lockset.installed():
        purgatory: Any = reference.DelayedOperationPurgatory(
            "reads", timer=reference.SystemTimer("reads", clock=ManualClock(0)),
            reaper_enabled=False,
        )  # fmt: skip
        assert purgatory._num_purged == 0  # one thread so far: exclusive, exempt
        assert "k" not in purgatory._watchers
        assert lockset.violations == []

        def touch() -> None:
            with purgatory._lock:
                purgatory._num_purged = 0

        other = threading.Thread(target=touch)
        other.start()
        other.join()
        with purgatory._lock:
            assert purgatory._num_purged == 0  # shared, but locked
            assert purgatory._watchers.get("k") is None
        assert lockset.violations == []
        assert purgatory._num_purged == 0  # shared and unlocked: recorded, not raised
        assert purgatory._num_purged == 0  # the same read again: recorded once
        assert purgatory._watchers.get("k") is None
        assert purgatory._is_shut_down is False  # free_reads: the fast refusal
        purgatory.shutdown()
    assert len(lockset.violations) == 2, lockset.violations
    assert lockset.violations[0].startswith("read Purgatory._num_purged")
    assert lockset.violations[1].startswith("get from DelayedOperationPurgatory._watchers")


def test_every_lock_free_read_says_why() -> None:
    """A row exempting reads gives its reason (docs/verification.md lists them)."""
    for guard in GUARDS:
        assert guard.free_reads is None or len(guard.free_reads) > 20, guard.label


@pytest.mark.parametrize("package", ["reference", "optimized"])
def test_every_field_of_a_timer_purgatory_and_operation_is_guarded_or_says_why(
    package: str,
) -> None:
    """R21, R37: the lockset covers a shared field only if the table lists it; a field
    missing from both tables (as the unfinished count of R61 once was) is a gap."""
    module = importlib.import_module(f"kpurgatory.{package}")
    timer = module.SystemTimer("probe", clock=ManualClock(0), executor=InlineExecutor())
    purgatory = module.DelayedOperationPurgatory("probe", timer=timer, reaper_enabled=False)
    operation = ready_operation(module)(5)
    purgatory.try_complete_else_watch(operation, ["k"])
    guarded = {(guard.owner, guard.attribute) for guard in GUARDS}
    missing = []
    for obj in (timer, purgatory, operation):
        owners = [cls.__name__ for cls in type(obj).__mro__]
        for name in attribute_names(obj):
            if name == "ready":  # the probe operation's own condition, not the library's
                continue
            listed = [owner for owner in owners if (owner, name) in guarded]
            listed += [owner for owner in owners if f"{owner}.{name}" in UNGUARDED]
            if not listed:
                missing.append(f"{type(obj).__name__}.{name}")
    purgatory.shutdown()
    assert not missing, f"fields in neither GUARDS nor UNGUARDED: {missing}"


def test_every_unguarded_field_says_why() -> None:
    assert all(len(reason) > 20 for reason in UNGUARDED.values())


@pytest.mark.parametrize("package", ["reference", "optimized"])
def test_the_counted_flag_is_guarded_by_its_purgatorys_counters_lock(package: str) -> None:
    """R61: an operation's counted flag changes only under the counters lock of the
    purgatory it is submitted to; before any submission no purgatory counts it, so
    writing it is nobody's shared state."""
    module = importlib.import_module(f"kpurgatory.{package}")
    if not is_pure(module.DelayedOperation.__module__):
        pytest.skip("compiled: the lockset skips it")
    lockset = Lockset()
    with lockset.installed():
        timer = module.SystemTimer("counted", clock=ManualClock(0), executor=InlineExecutor())
        purgatory: Any = module.DelayedOperationPurgatory(
            "counted", timer=timer, reaper_enabled=False
        )
        free: Any = ready_operation(module)(5)
        free._counted = False  # not submitted: exempt
        operation: Any = ready_operation(module)(5)
        assert purgatory.try_complete_else_watch(operation, ["k"]) is False
        assert lockset.violations == []
        with pytest.raises(LocksetViolationError, match=r"DelayedOperation\._counted"):
            operation._counted = False
        with purgatory._counters_lock:
            operation._counted = True
        purgatory.shutdown()
    assert len(lockset.violations) == 1, lockset.violations
