"""The synchronization primitives the timer and purgatory are built from.

Every lock, condition and flag that matters for correctness is created through this
module's factories (``new_lock``, ``new_condition``, ``new_flag``) and used only through
``acquire``/``release``, the condition's ``wait``/``notify_all`` and the ``AtomicFlag``
methods; so is every dict that threads share without a lock (``new_shared_dict``: each
of its single operations is atomic, Java's ``ConcurrentHashMap``). Tests of the
concurrent paths replace the factories with instrumented versions that yield to a
scheduler at each of these points, so the exact interleavings that broke Kafka
(KAFKA-6653, KAFKA-8334, ...) can be replayed on the real code.
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kpurgatory.spec.protocols import AbstractLock

__all__ = [
    "AtomicFlag",
    "condition_factory",
    "flag_factory",
    "lock_factory",
    "new_condition",
    "new_flag",
    "new_lock",
    "new_shared_dict",
    "override",
    "shared_dict_factory",
]


class AtomicFlag:
    """A boolean with atomic ``compare_and_set`` and ``get_and_set`` (Java's AtomicBoolean)."""

    __slots__ = ("_guard", "_value")

    def __init__(self, value: bool = False) -> None:
        self._value = value
        self._guard = threading.Lock()

    def get(self) -> bool:
        """The current value."""
        return self._value

    def __bool__(self) -> bool:
        """The current value (``get``), so a flag reads as the boolean it holds."""
        return self.get()

    def set(self, value: bool) -> None:
        """Store ``value``."""
        with self._guard:
            self._value = value

    def compare_and_set(self, expect: bool, update: bool) -> bool:
        """Store ``update`` iff the value is ``expect``; return whether it was stored."""
        with self._guard:
            if self._value is not expect:
                return False
            self._value = update
            return True

    def get_and_set(self, value: bool) -> bool:
        """Store ``value`` and return the previous value."""
        with self._guard:
            previous = self._value
            self._value = value
            return previous

    def __repr__(self) -> str:
        return f"AtomicFlag({self._value})"


def _default_flag(value: bool) -> AtomicFlag:
    return AtomicFlag(value)


def _default_condition(lock: AbstractLock) -> threading.Condition:
    # threading.Condition accepts any lock with acquire/release (and uses an RLock's
    # ownership helpers when present); typeshed only lists the threading lock types.
    held: Any = lock
    return threading.Condition(held)


lock_factory: Callable[[], AbstractLock] = _thread.RLock
"""Creates every operation lock; tests may rebind it to an instrumented lock.

The default is the C re-entrant lock type itself (what ``threading.RLock()`` returns),
so creating the two locks of every operation costs no Python-level call beyond
``new_lock`` (measured: about a tenth of the compiled replay's CPU went into the
wrapper functions)."""

flag_factory: Callable[[bool], AtomicFlag] = _default_flag
"""Creates every atomic flag; tests may rebind it to an instrumented flag."""

condition_factory: Callable[[AbstractLock], threading.Condition] = _default_condition
"""Creates every condition variable over a given lock; tests may rebind it."""

shared_dict_factory: Callable[[], dict[Any, Any]] = dict
"""Creates every dict that threads share without a lock; tests may rebind it to a dict
subclass whose operations yield to a scheduler (a plain ``dict`` by default: each of its
single operations is atomic under the GIL, and under a per-object lock with it off)."""


def new_lock() -> AbstractLock:
    """A fresh re-entrant lock (Kafka's ``ReentrantLock``) from ``lock_factory``."""
    return lock_factory()


def new_flag(value: bool = False) -> AtomicFlag:
    """A fresh atomic flag from ``flag_factory``."""
    return flag_factory(value)


def new_condition(lock: AbstractLock) -> threading.Condition:
    """A fresh condition variable over ``lock`` from ``condition_factory``."""
    return condition_factory(lock)


def new_shared_dict() -> dict[Any, Any]:
    """A fresh dict for threads to share without a lock, from ``shared_dict_factory``.

    Its users make no assumption beyond the atomicity of each single call (``d[k] = v``,
    ``pop``, ``popitem``, ``clear``, ``len``): a sequence of calls may interleave with
    other threads' calls anywhere, and the controlled schedules switch threads there."""
    return shared_dict_factory()


@contextmanager
def override(
    *,
    lock: Callable[[], AbstractLock] | None = None,
    flag: Callable[[bool], AtomicFlag] | None = None,
    condition: Callable[[AbstractLock], threading.Condition] | None = None,
    shared_dict: Callable[[], dict[Any, Any]] | None = None,
) -> Iterator[None]:
    """Rebind the given factories for the duration of a ``with`` block, then restore them.

    Only objects created inside the block get the substitutes; the controlled-schedule
    tests (tests/concurrency) create the timer, purgatory and operations inside it so
    that every synchronization point of theirs yields to a scheduler. Not thread-safe:
    call it from the test's main thread while no other thread creates primitives.
    """
    global lock_factory, flag_factory, condition_factory, shared_dict_factory
    saved = (lock_factory, flag_factory, condition_factory, shared_dict_factory)
    if shared_dict is not None:
        shared_dict_factory = shared_dict
    if lock is not None:
        lock_factory = lock
    if flag is not None:
        flag_factory = flag
    if condition is not None:
        condition_factory = condition
    try:
        yield
    finally:
        lock_factory, flag_factory, condition_factory, shared_dict_factory = saved
