"""The optimized purgatory's cheaper argument checks agree with the shared ones (R35, R36).

``_watch_keys`` (one ``dict.fromkeys`` pass first) must return what
``kpurgatory._checks.watch_key_list`` returns and raise the same exception with the same
message; ``_shard_index`` must name ``key`` for an unhashable key; the cached operation
type check must still refuse what is not a ``DelayedOperation``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence

import pytest

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory._checks import watch_key_list
from kpurgatory.optimized import DelayedOperationPurgatory, SystemTimer
from kpurgatory.optimized.purgatory import _shard_index, _watch_keys
from tests.optimized.helpers import Task
from tests.support import Recorder, operation_class


def _one_shot(*items: object) -> Iterator[object]:
    return iter(items)


CASES: list[tuple[str, Callable[[], object]]] = [
    ("list", lambda: ["a", "b", "a", 1, 1.0, True]),
    ("tuple", lambda: ("x",)),
    ("tuple of distinct keys", lambda: ("x", "y", 3)),
    ("tuple with duplicates", lambda: ("x", "y", "x", 1, True)),
    ("one unhashable in tuple", lambda: (["u"],)),
    ("set", lambda: {3}),
    ("frozenset", lambda: frozenset({"k"})),
    ("dict", lambda: {"a": 1, "b": 2}),
    ("generator", lambda: (k for k in ["g", "h", "g"])),
    ("empty list", lambda: []),
    ("empty tuple", lambda: ()),
    ("empty set", lambda: set()),
    ("empty iterator", lambda: _one_shot()),
    ("str", lambda: "abc"),
    ("bytes", lambda: b"ab"),
    ("bytearray", lambda: bytearray(b"ab")),
    ("not iterable", lambda: 42),
    ("unhashable in list", lambda: ["ok", ["unhashable"]]),
    ("unhashable in tuple", lambda: ("ok", {"a": 1})),
    ("unhashable first in one-shot", lambda: _one_shot(["u"], "k")),
    ("unhashable last in one-shot", lambda: _one_shot("k", ["u"])),
    ("list subclass", lambda: type("Keys", (list,), {})(["p", "p", "q"])),
]


def _outcome(check: Callable[[Iterable[Hashable]], Sequence[Hashable]], value: object) -> object:
    try:
        return ("ok", list(check(value)))  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize(("name", "make"), CASES, ids=[name for name, _ in CASES])
def test_r36_fast_watch_keys_matches_watch_key_list(name: str, make: Callable[[], object]) -> None:
    """R36: same distinct keys in the same order, or the same error with the same message."""
    assert _outcome(_watch_keys, make()) == _outcome(watch_key_list, make())


def test_watch_keys_keeps_a_tuple_of_distinct_keys_as_it_is() -> None:
    """The operation keeps its keys for ``abandon``: a tuple of distinct keys is not copied
    (no allocation per submission); anything else becomes a fresh tuple."""
    one, several = ("k",), ("a", "b", 3)
    assert _watch_keys(one) is one and _watch_keys(several) is several
    assert _watch_keys(("a", "a")) == ("a",)
    keys = ["a", "b"]
    assert _watch_keys(keys) == ("a", "b") and type(_watch_keys(keys)) is tuple


def test_r36_shard_index_names_the_key_and_spreads_negative_hashes() -> None:
    """R36: an unhashable key is a TypeError naming ``key``; negative hashes use abs."""
    with pytest.raises(TypeError, match="key must be hashable, not list"):
        _shard_index([1], 8)  # type: ignore[arg-type]
    assert _shard_index(-3, 8) == 3 and _shard_index("k", 1) == 0


def test_r35_cached_operation_check_still_refuses_plain_tasks() -> None:
    """R35: a TimerTask that is no DelayedOperation is refused before and after an
    operation class has been cached, and the cached class is still accepted."""
    from typing import Any

    import kpurgatory.optimized as impl

    clock = ManualClock(0)
    timer = SystemTimer("t", clock=clock, executor=InlineExecutor())
    purg: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory(
        "p", timer=timer, reaper_enabled=False
    )
    with purg:
        op_class = operation_class(impl)
        for name in ("a", "b"):
            with pytest.raises(TypeError, match="operation"):
                purg.try_complete_else_watch(Task(10, "t", []), ["k"])
            assert purg.try_complete_else_watch(op_class(10, name, Recorder(clock)), ["k"]) is False
        assert purg.watched == 2
