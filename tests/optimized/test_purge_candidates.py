"""The optimized purgatory's purge candidates (R30 without scanning every watcher list).

A purge unlinks the operations recorded as candidates when they completed; these tests
pin what the equivalence machines cannot see: that the candidates keep no operation the
lists have let go of, and that an overflow falls back to Kafka's full scan.
"""

from __future__ import annotations

import pytest

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.optimized import DelayedOperationPurgatory, SystemTimer
from tests.optimized.test_purgatory_structure import Op


def make(purge_interval: int = 0) -> DelayedOperationPurgatory[Op]:
    timer = SystemTimer("p", clock=ManualClock(0), executor=InlineExecutor())
    return DelayedOperationPurgatory(
        "p", timer, purge_interval=purge_interval, reaper_enabled=False
    )


def test_a_one_key_operation_completed_by_check_leaves_the_candidates() -> None:
    """Unlinked from its only key by check_and_complete: nothing keeps it alive."""
    log: list[str] = []
    with make(purge_interval=1000) as purgatory:
        op = Op(100, "a", log)
        assert purgatory.try_complete_else_watch(op, ["k"]) is False
        op.ready = True
        assert purgatory.check_and_complete("k") == 1
        assert purgatory._candidates == {} and purgatory.watched == 0
        purgatory._check()


def test_a_multi_key_operation_stays_a_candidate_until_the_purge() -> None:
    """Completed through one key, still watched on the other while another operation is
    unfinished (else R61 unlinks it at once): the purge unlinks it."""
    log: list[str] = []
    with make() as purgatory:
        keeper = Op(10**6, "keeper", log)
        assert purgatory.try_complete_else_watch(keeper, ["c"]) is False
        op = Op(100, "a", log)
        assert purgatory.try_complete_else_watch(op, ["a", "b"]) is False
        op.ready = True
        assert purgatory.check_and_complete("a") == 1
        assert list(purgatory._candidates.values()) == [op] and purgatory.watched == 2
        purgatory._check()
        purgatory.advance_clock(0)
        assert (purgatory.watched, purgatory.num_purged, purgatory._candidates) == (1, 1, {})
        keeper.ready = True
        assert purgatory.check_and_complete("c") == 1
        assert purgatory.watched == 0


def test_candidates_overflow_falls_back_to_a_full_scan() -> None:
    """Past the limit the candidates are dropped and the next purge scans every list."""
    log: list[str] = []
    with make() as purgatory:
        purgatory._candidates_limit = 2
        ops = [Op(100, f"o{i}", log) for i in range(4)]
        for op in ops:
            assert purgatory.try_complete_else_watch(op, ["a", "b"]) is False
        pending = Op(100, "pending", log)
        assert purgatory.try_complete_else_watch(pending, ["a"]) is False
        for op in ops:
            assert op.force_complete() is True
        assert purgatory._scan_all and len(purgatory._candidates) <= 2
        purgatory._check()
        purgatory.advance_clock(0)
        assert not purgatory._scan_all and purgatory._candidates == {}
        assert (purgatory.watched, purgatory.num_purged) == (1, 8)
        purgatory._check()


def _live_and_slots(purgatory: DelayedOperationPurgatory[Op], key: str) -> tuple[int, int]:
    """(operations watched on ``key``, the size in bytes of its list's dict)."""
    import sys

    shard = purgatory._shards[abs(hash(key)) % purgatory.shards]
    ops = shard.watchers[key].ops
    return len(ops), sys.getsizeof(ops)


def test_a_hot_list_drained_after_a_burst_is_rebuilt() -> None:
    """A key's list that held 2,000 operations and is back to one is rebuilt (its dict's
    table shrinks), so a snapshot costs O(watched) again, not O(its largest burst): the
    pops counted since the last rebuild never exceed ``2 * len + 64``; the rebuild keeps
    watch order."""
    log: list[str] = []
    with make(purge_interval=10**6) as purgatory:
        keeper = Op(10**6, "keeper", log)
        assert purgatory.try_complete_else_watch(keeper, ["hot"]) is False
        _, small = _live_and_slots(purgatory, "hot")
        burst = [Op(10**6, f"b{index}", log) for index in range(2000)]
        for op in burst:
            assert purgatory.try_complete_else_watch(op, ["hot"]) is False
        _, large = _live_and_slots(purgatory, "hot")
        late = Op(10**6, "late", log)
        assert purgatory.try_complete_else_watch(late, ["hot"]) is False
        for op in burst:
            op.ready = True
        assert purgatory.check_and_complete("hot") == 2000
        live, after = _live_and_slots(purgatory, "hot")
        assert (live, large > 10 * small) == (2, True)
        assert after * 20 < large, (small, large, after)  # at most a 64-pop table left
        shard = purgatory._shards[abs(hash("hot")) % purgatory.shards]
        assert list(shard.watchers["hot"].ops.values()) == [keeper, late]
        assert shard.watchers["hot"].unlinked <= 2 * 2 + 64
        purgatory._check()


def test_r25_a_one_key_operation_unlinked_while_others_wait_leaves_the_candidates() -> None:
    """R25, R61: with another operation unfinished (no idle purge to clear them), a
    completed one-key operation that check_and_complete unlinks leaves the candidates at
    once; a two-key one stays a candidate until a purge (its other key still holds it)."""
    log: list[str] = []
    with make(purge_interval=1000) as purgatory:
        keeper = Op(10**6, "keeper", log)
        assert purgatory.try_complete_else_watch(keeper, ["busy"]) is False
        one, two = Op(100, "one", log), Op(100, "two", log)
        assert purgatory.try_complete_else_watch(one, ["k"]) is False
        assert purgatory.try_complete_else_watch(two, ["k", "j"]) is False
        one.ready = two.ready = True
        assert purgatory.check_and_complete("k") == 2
        assert id(one) not in purgatory._candidates
        assert purgatory._candidates == {id(two): two} and purgatory.watched == 2


@pytest.mark.parametrize(
    ("popped", "unlinked_after"),
    [pytest.param(66, 2 * 1 + 64, id="up_to_the_bound"), pytest.param(67, 0, id="past_it")],
)
def test_r25_the_list_is_rebuilt_only_past_its_bound(popped: int, unlinked_after: int) -> None:
    """R25: ``check_and_complete`` unlinks ``popped`` of a key's ``popped + 1`` operations
    one by one; the list is rebuilt only past ``2 * len + 64`` pops. With 66 pops the one
    operation left sits exactly at that bound: no rebuild yet, and ``_check`` accepts it
    (its bound is the rebuild's, not one less). One pop more, 67, passes the bound, so that
    pop rebuilds the list (its count of pops starts again) and ``_check`` holds."""
    log: list[str] = []
    with make(purge_interval=10**6) as purgatory:
        keeper = Op(10**6, "keeper", log)
        assert purgatory.try_complete_else_watch(keeper, ["k"]) is False
        done = [Op(10**6, f"d{index}", log) for index in range(popped)]
        for op in done:
            assert purgatory.try_complete_else_watch(op, ["k"]) is False
            op.ready = True
        assert purgatory.check_and_complete("k") == popped
        shard = purgatory._shards[abs(hash("k")) % purgatory.shards]
        assert list(shard.watchers["k"].ops.values()) == [keeper]
        assert shard.watchers["k"].unlinked == unlinked_after
        purgatory._check()


def test_check_walks_the_timer_too() -> None:
    """The purgatory's ``_check`` ends with its timer's, so the machines that call it
    see a broken timer too: a counter off by one (no entry behind it) fails it."""
    log: list[str] = []
    with make() as purgatory:
        assert purgatory.try_complete_else_watch(Op(10**6, "a", log), ["k"]) is False
        purgatory._check()
        counter = purgatory.timer._counter
        counter.value += 1
        try:
            purgatory._check()
        except AssertionError:
            pass
        else:
            raise AssertionError("_check accepted a timer whose count has no entry")
        finally:
            counter.value -= 1


def test_check_fails_on_a_list_not_rebuilt() -> None:
    """``_check`` asserts the bound, so a lost ``note_unlinked`` shows in every machine."""
    log: list[str] = []
    with make() as purgatory:
        op = Op(10**6, "a", log)
        assert purgatory.try_complete_else_watch(op, ["k"]) is False
        shard = purgatory._shards[abs(hash("k")) % purgatory.shards]
        shard.watchers["k"].unlinked = 67
        try:
            purgatory._check()
        except AssertionError as exc:
            assert "not rebuilt" in str(exc)
        else:
            raise AssertionError("_check accepted a list due for a rebuild")
        shard.watchers["k"].unlinked = 0
