"""Buckets of the timing wheel: Kafka's ``TimerTaskList`` and ``TimerTaskEntry``.

A bucket is a circular doubly linked list with a sentinel ``root``: ``root.next`` is
the head, ``root.prev`` the tail, and an empty bucket has ``root.next is root``. Every
entry knows the list it is linked into (``entry.list``), so removing it is O(1) with no
search (reference equivalent: ``dict.pop`` on the timer's pending dict).

Every bucket of a timer shares one ``TaskCounter``: the number of entries linked into
any bucket at any level, i.e. the timer's ``size`` (R12).

Locking: a bucket has no lock of its own. Every method here is called with the owning
timer's lock held, and that lock is re-entrant (``threading.RLock``), so a ``flush``
callback may touch the same list (remove from it, or add to it) exactly as Kafka's
re-entrant monitors allow. See ``kpurgatory.optimized.timer`` for the whole scheme.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kpurgatory.optimized.timer import TimerTask
    from kpurgatory.spec.protocols import AbstractLock

__all__ = ["NO_EXPIRATION", "TaskCounter", "TimerTaskEntry", "TimerTaskList"]

NO_EXPIRATION: None = None
"""A bucket's expiration while it is not in the delay queue.

Kafka uses ``-1``; here clock readings may be negative (floor semantics, R1), so -1 is a
real slot start and ``None`` marks "not queued" instead."""


class TaskCounter:
    """The number of entries linked into a timer's buckets (Kafka's shared ``AtomicInteger``).

    Only mutated under the owning timer's lock; read without it (an int read is atomic).
    """

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def __repr__(self) -> str:
        return f"TaskCounter({self.value})"


class TimerTaskEntry:
    """One scheduling of a task in one timer (Kafka's ``TimerTaskEntry``).

    ``due`` is the due time (R1: the expiration rounded down to the timer's tick; the
    wheel places and cascades by it). ``lock`` is the owning timer's lock: an entry
    never changes timer, only bucket (cascades stay inside the timer). ``list``,
    ``next`` and ``prev`` are the links, guarded by that lock. The entry is *current*
    while ``task._entry is entry``; a re-add or cancel makes it stale, and a stale
    entry is never linked (it was unlinked by the same re-add or cancel). ``task`` is
    None only on a bucket's sentinel root, which is never collected or handed over.

    Reference equivalent: ``kpurgatory.reference.timer._Entry``. Cost: one small
    object with ``__slots__`` per scheduled ``add``.
    """

    __slots__ = ("due", "list", "lock", "next", "prev", "task")

    def __init__(self, task: TimerTask | None, due: int, lock: AbstractLock) -> None:
        self.task = task
        self.due = due
        self.lock = lock
        self.list: TimerTaskList | None = None
        self.next: TimerTaskEntry = self
        self.prev: TimerTaskEntry = self

    def __repr__(self) -> str:
        linked = "linked" if self.list is not None else "unlinked"
        return f"TimerTaskEntry({self.task!r}, due={self.due}, {linked})"


def _sentinel(lock: AbstractLock) -> TimerTaskEntry:
    """The root of an empty circular list: an entry with no task that links to itself."""
    return TimerTaskEntry(None, 0, lock)


class TimerTaskList:
    """A bucket of the wheel (Kafka's ``TimerTaskList``): a circular list with a sentinel.

    ``expiration`` is the start of the bucket's slot while the bucket is in the delay
    queue, and ``NO_EXPIRATION`` (None) otherwise; ``flush`` resets it. ``slot`` is the
    bucket's index in its wheel and ``tick_ms`` the tick of that wheel (only used by
    ``_check`` and ``min_due``).

    Reference equivalent: none (the reference keeps one flat dict per timer).
    """

    __slots__ = ("counter", "expiration", "root", "slot", "tick_ms")

    def __init__(self, counter: TaskCounter, lock: AbstractLock, slot: int, tick_ms: int) -> None:
        self.counter = counter
        self.root = _sentinel(lock)
        self.expiration: int | None = NO_EXPIRATION
        self.slot = slot
        self.tick_ms = tick_ms

    def set_expiration(self, expiration_ms: int) -> bool:
        """Store ``expiration_ms``; return True iff it differs from the previous value.

        The wheel offers the bucket to the delay queue only when this returns True, so
        a bucket is never queued twice (Kafka's ``setExpiration``'s ``getAndSet``). O(1).
        """
        if self.expiration == expiration_ms:
            return False
        self.expiration = expiration_ms
        return True

    def is_empty(self) -> bool:
        """Whether no entry is linked here. O(1)."""
        return self.root.next is self.root

    def add(self, entry: TimerTaskEntry) -> None:
        """Append ``entry`` at the tail and count it. O(1).

        An entry still linked elsewhere is unlinked first (Kafka's ``add`` calls
        ``entry.remove()`` first), so an entry is in at most one list.
        Reference equivalent: ``self._pending[entry] = None``.
        """
        current = entry.list
        if current is not None:
            current.remove(entry)
        root = self.root
        tail = root.prev
        entry.next = root
        entry.prev = tail
        entry.list = self
        tail.next = entry
        root.prev = entry
        self.counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> bool:
        """Unlink ``entry`` if it is linked *here* (Kafka's ``list eq this`` check). O(1).

        Returns whether it was unlinked. Reference equivalent: ``_pending.pop(entry)``.
        """
        if entry.list is not self:
            return False
        prev = entry.prev
        nxt = entry.next
        prev.next = nxt
        nxt.prev = prev
        entry.next = entry
        entry.prev = entry
        entry.list = None
        self.counter.value -= 1
        return True

    def flush(self, f: Callable[[TimerTaskEntry], None]) -> None:
        """Unlink every entry, head first, calling ``f`` on each; then reset the expiration.

        ``f`` runs after its entry is unlinked and may touch this list (Kafka's
        re-entrant ``flush``): an entry it adds here is flushed too. O(n + cost of f).
        """
        root = self.root
        remove = self.remove
        head = root.next
        while head is not root:
            remove(head)
            f(head)
            head = root.next
        self.expiration = NO_EXPIRATION

    def entries(self) -> list[TimerTaskEntry]:
        """The linked entries, head to tail (a copy). O(n)."""
        found: list[TimerTaskEntry] = []
        root = self.root
        node = root.next
        while node is not root:
            found.append(node)
            node = node.next
        return found

    def min_due(self) -> int | None:
        """The earliest due time linked here, or None if empty.

        Stops early at an entry due at the bucket's expiration (the least possible), so
        it is O(1) on the lowest wheel and O(n) at worst on a higher one.
        """
        root = self.root
        node = root.next
        best: int | None = None
        floor = self.expiration
        while node is not root:
            due = node.due
            if due == floor:
                return due
            if best is None or due < best:
                best = due
            node = node.next
        return best

    def __len__(self) -> int:
        """Number of linked entries (O(n): the counter is shared by all buckets)."""
        return len(self.entries())

    def _check(self) -> int:
        """Assert the list's representation invariants; return its number of entries.

        Links are consistent both ways, every entry's ``list`` is this bucket and it has
        a task, the root carries no task, and an empty bucket is exactly a root linked
        to itself.
        """
        root = self.root
        if root.task is not None:
            raise AssertionError(f"bucket {self.slot}: the sentinel carries a task")
        if root.list is not None:
            raise AssertionError(f"bucket {self.slot}: the sentinel is linked into a list")
        count = 0
        node = root
        limit = self.counter.value + 1
        while True:
            nxt = node.next
            if nxt.prev is not node:
                raise AssertionError(f"bucket {self.slot}: next/prev links disagree at {node!r}")
            if nxt is root:
                break
            if nxt.list is not self:
                raise AssertionError(f"bucket {self.slot}: {nxt!r} points at another list")
            if nxt.task is None:
                raise AssertionError(f"bucket {self.slot}: an entry without a task is linked")
            count += 1
            if count > limit:
                raise AssertionError(f"bucket {self.slot}: more entries than the shared counter")
            node = nxt
        return count

    def __repr__(self) -> str:
        return (
            f"TimerTaskList(slot={self.slot}, tick_ms={self.tick_ms}, expiration={self.expiration})"
        )
