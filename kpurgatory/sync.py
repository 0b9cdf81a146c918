"""The synchronization primitives the timer and purgatory are built from.

Every lock and flag that matters for correctness is created through this module's
factories (``new_lock``, ``new_flag``) and used only through ``acquire``/``release``
and the ``AtomicFlag`` methods. Tests of the concurrent paths replace the factories
with instrumented versions that yield to a scheduler at each of these points, so the
exact interleavings that broke Kafka (KAFKA-6653, KAFKA-8334, ...) can be replayed on
the real code.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kpurgatory.spec.protocols import AbstractLock

__all__ = ["AtomicFlag", "flag_factory", "lock_factory", "new_flag", "new_lock"]


class AtomicFlag:
    """A boolean with atomic ``compare_and_set`` and ``get_and_set`` (Java's AtomicBoolean)."""

    __slots__ = ("_guard", "_value")

    def __init__(self, value: bool = False) -> None:
        self._value = value
        self._guard = threading.Lock()

    def get(self) -> bool:
        """The current value."""
        return self._value

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


def _default_lock() -> AbstractLock:
    return threading.RLock()


def _default_flag(value: bool) -> AtomicFlag:
    return AtomicFlag(value)


lock_factory: Callable[[], AbstractLock] = _default_lock
"""Creates every operation lock; tests may rebind it to an instrumented lock."""

flag_factory: Callable[[bool], AtomicFlag] = _default_flag
"""Creates every atomic flag; tests may rebind it to an instrumented flag."""


def new_lock() -> AbstractLock:
    """A fresh re-entrant lock (Kafka's ``ReentrantLock``) from ``lock_factory``."""
    return lock_factory()


def new_flag(value: bool = False) -> AtomicFlag:
    """A fresh atomic flag from ``flag_factory``."""
    return flag_factory(value)
