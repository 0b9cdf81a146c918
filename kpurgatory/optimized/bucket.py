"""Buckets of the timing wheel: Kafka's ``TimerTaskList``, and ``TimerTaskEntry`` folded
into the task.

Rules: R1, R10-R12.

Kafka allocates a ``TimerTaskEntry`` per ``add`` and points the task at it. Here the
task *is* its entry: ``TimerTask`` derives from ``TimerTaskEntry``, whose four slots
(due time, holder, next, prev) carry one scheduling at a time. That saves one object
per pending task (measured in docs/performance.md), and it is safe because a task is
scheduled at most once at a time anyway (R10): re-adding rewrites the same slots.

A bucket is a circular doubly linked list with a sentinel ``root`` (a bare
``TimerTaskEntry``): ``root._entry_next`` is the head, ``root._entry_prev`` the tail,
and an empty bucket has ``root._entry_next is root``. Every entry knows its *holder*
(``_entry_list``), so removing it is O(1) with no search (reference equivalent:
``dict.pop`` on the timer's pending dict). The holder is the bucket it is linked
into, or the ``HandOver`` marker of the drain that collected it (it left the schedule
and waits for its hand-over turn, R11), or None.

Every bucket of a timer shares one ``TaskCounter``: the number of entries linked into
any bucket at any level, i.e. the timer's ``size`` (R12).

The methods of ``TimerTaskList`` are the only definitions of the bucket operations: the
wheel links with ``add`` and ``set_expiration``, ``cancel`` unlinks with ``remove``, and
the drain empties a bucket with ``flush``. (They were once inlined into the timer's hot
paths; docs/performance.md records the measurement that took the copies out.)

Locking: a bucket has no lock of its own. Every method here is called with the owning
timer's lock held (``holder.lock``), and that lock is re-entrant (``threading.RLock``),
so a ``flush`` callback may touch the same list (remove from it, or add to it) exactly
as Kafka's re-entrant monitors allow. See ``kpurgatory.optimized.timer``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from kpurgatory.optimized._mypyc import mypyc_attr
from kpurgatory.spec.protocols import AbstractLock

__all__ = [
    "NO_EXPIRATION",
    "EntryHolder",
    "HandOver",
    "TaskCounter",
    "TimerTaskEntry",
    "UNLINKED",
    "TimerTaskList",
]

NO_EXPIRATION: Final = None
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


@mypyc_attr(allow_interpreted_subclasses=True)
class TimerTaskEntry:
    """The scheduling state of one task in one timer (Kafka's ``TimerTaskEntry``).

    The base class of ``TimerTask``: a task carries its own entry. ``_entry_due`` is the
    due time of the current scheduling (R1: the expiration rounded down to the timer's
    tick; the wheel places and cascades by it). ``_entry_list`` is the holder (see the
    module docstring); ``_entry_next`` and ``_entry_prev`` are the bucket links. All four
    are guarded by the holder's lock. A bare ``TimerTaskEntry`` is only ever a bucket's
    sentinel root (or a test's node): never collected, never handed over.

    Reference equivalent: ``kpurgatory.reference.timer._Entry``, which is a separate
    object per ``add``. Cost: four slots on the task, no allocation per ``add``.
    """

    __slots__ = ("_entry_due", "_entry_list", "_entry_next", "_entry_prev")

    def __init__(self, due: int = 0) -> None:
        self._entry_due = due
        self._entry_list: EntryHolder | None = None
        self._entry_next: TimerTaskEntry = self
        self._entry_prev: TimerTaskEntry = self
        # A bucket's root keeps these self-links; an unlinked task points at UNLINKED
        # instead (see ``TimerTaskList.remove``).

    def __repr__(self) -> str:
        holder = self._entry_list
        where = "unlinked" if holder is None else holder.describe()
        return f"{type(self).__name__}(due={self._entry_due}, {where})"


UNLINKED: Final = TimerTaskEntry()
"""Where an unlinked entry's links point (never followed: an entry with no bucket holder
is never traversed). Not the entry itself: a self-link would make every finished task
cyclic garbage, freed only by the cyclic collector instead of at once by its refcount.
``Final``, as ``NO_EXPIRATION``: the compiled build reads it from a C static instead of
looking it up in the module's dict on every unlink."""


class EntryHolder:
    """What an entry's ``_entry_list`` may point at: a bucket, or a drain's ``HandOver``.

    ``lock`` is the owning timer's lock, which guards the holder and its entries;
    ``cancel`` takes it through the holder. ``remove(entry)`` detaches ``entry`` if this
    is its holder and returns whether it did.
    """

    __slots__ = ("lock",)

    def __init__(self, lock: AbstractLock) -> None:
        self.lock = lock

    def remove(self, entry: TimerTaskEntry) -> bool:
        """Detach ``entry`` if this is its holder; return whether it was detached. O(1)."""
        raise NotImplementedError

    def describe(self) -> str:
        """A short label for reprs and assertion messages."""
        raise NotImplementedError


class HandOver(EntryHolder):
    """The holder of the entries one drain collected, until their hand-over turn.

    A drain of ``advance_clock`` unlinks each due entry and points it at the drain's own
    ``HandOver``; after releasing the timer lock it hands a task over only if the task
    still points at that marker. A ``cancel`` or re-add in between changes the pointer,
    and so does a later drain that collects the task again, so each scheduling is handed
    over at most once and a cancelled one never (R11). The pointer is left in place
    after the hand-over: a later ``cancel`` resets it under the lock, which is harmless.

    Reference equivalent: the reference drain's ``task._entry is entry`` re-check.
    Cost: one small object per drain.
    """

    __slots__ = ()

    def remove(self, entry: TimerTaskEntry) -> bool:
        """Forget ``entry`` if this drain holds it (a cancel or re-add before its turn)."""
        if entry._entry_list is not self:
            return False
        entry._entry_list = None
        return True

    def describe(self) -> str:
        return "collected"


class TimerTaskList(EntryHolder):
    """A bucket of the wheel (Kafka's ``TimerTaskList``): a circular list with a sentinel.

    ``expiration`` is the start of the bucket's slot while the bucket is in the delay
    queue, and ``NO_EXPIRATION`` (None) otherwise; ``flush`` resets it. ``slot`` is the
    bucket's index in its wheel and ``tick_ms`` the tick of that wheel (only used by
    ``_check`` and ``min_due``).

    Reference equivalent: none (the reference keeps one flat dict per timer).
    """

    __slots__ = ("counter", "expiration", "root", "slot", "tick_ms")

    def __init__(self, counter: TaskCounter, lock: AbstractLock, slot: int, tick_ms: int) -> None:
        super().__init__(lock)
        self.counter = counter
        self.root = TimerTaskEntry()
        self.expiration: int | None = NO_EXPIRATION
        self.slot = slot
        self.tick_ms = tick_ms

    def set_expiration(self, expiration_ms: int) -> bool:
        """Store ``expiration_ms``; return True iff it differs from the previous value.

        The wheel offers the bucket to the delay queue only when this returns True, so
        a bucket is never queued twice (Kafka's ``setExpiration``'s ``getAndSet``). O(1).
        (Compared as ints once the stored value is known not to be None: the compiled build
        then boxes no int for the comparison.)
        """
        current = self.expiration
        if current is not None and current == expiration_ms:
            return False
        self.expiration = expiration_ms
        return True

    def is_empty(self) -> bool:
        """Whether no entry is linked here. O(1)."""
        root = self.root
        return root._entry_next is root

    # add and remove are alike in shape only (six link assignments each: linking at the
    # tail and unlinking are different operations on the same four slots).
    def add(self, entry: TimerTaskEntry) -> None:
        """Append ``entry`` at the tail and count it. O(1).

        An entry still held elsewhere is detached first (Kafka's ``add`` calls
        ``entry.remove()`` first), so an entry has at most one holder.
        Reference equivalent: ``self._pending[entry] = None``.
        """
        current = entry._entry_list
        if current is not None:
            current.remove(entry)
        root = self.root
        tail = root._entry_prev
        entry._entry_next = root
        entry._entry_prev = tail
        entry._entry_list = self
        tail._entry_next = entry
        root._entry_prev = entry
        self.counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> bool:
        """Unlink ``entry`` if it is linked *here* (Kafka's ``list eq this`` check). O(1).

        Returns whether it was unlinked. Reference equivalent: ``_pending.pop(entry)``.
        """
        if entry._entry_list is not self:
            return False
        prev = entry._entry_prev
        nxt = entry._entry_next
        prev._entry_next = nxt
        nxt._entry_prev = prev
        entry._entry_next = UNLINKED
        entry._entry_prev = UNLINKED
        entry._entry_list = None
        self.counter.value -= 1
        return True

    def flush(self, f: Callable[[TimerTaskEntry], None]) -> None:
        """Unlink every entry, head first, calling ``f`` on each; then reset the expiration.

        ``f`` runs after its entry is unlinked and may touch this list (Kafka's
        re-entrant ``flush``): an entry it adds here is flushed too. O(n + cost of f).
        """
        root = self.root
        head = root._entry_next
        while head is not root:
            self.remove(head)
            f(head)
            head = root._entry_next
        self.expiration = NO_EXPIRATION

    def entries(self) -> list[TimerTaskEntry]:
        """The linked entries, head to tail (a copy). O(n)."""
        found: list[TimerTaskEntry] = []
        root = self.root
        node = root._entry_next
        while node is not root:
            found.append(node)
            node = node._entry_next
        return found

    def min_due(self) -> int | None:
        """The earliest due time linked here, or None if empty.

        Stops early at an entry due at the bucket's expiration (the least possible), so
        it is O(1) on the lowest wheel and O(n) at worst on a higher one.
        """
        root = self.root
        node = root._entry_next
        best: int | None = None
        floor = self.expiration
        while node is not root:
            due = node._entry_due
            if due == floor:
                return due
            if best is None or due < best:
                best = due
            node = node._entry_next
        return best

    def describe(self) -> str:
        return f"in bucket {self.slot} (tick {self.tick_ms})"

    def __len__(self) -> int:
        """Number of linked entries (O(n): the counter is shared by all buckets)."""
        return len(self.entries())

    def _check(self) -> int:
        """Assert the list's representation invariants; return its number of entries.

        Links are consistent both ways, every linked entry's holder is this bucket and
        it is not a bare ``TimerTaskEntry`` (only a root is), the root is held by nothing,
        and an empty bucket is exactly a root linked to itself.
        """
        root = self.root
        if root._entry_list is not None:
            raise AssertionError(f"bucket {self.slot}: the sentinel is linked into a list")
        count = 0
        node = root
        limit = self.counter.value + 1
        while True:
            nxt = node._entry_next
            if nxt._entry_prev is not node:
                raise AssertionError(f"bucket {self.slot}: next/prev links disagree at {node!r}")
            if nxt is root:
                break
            if nxt._entry_list is not self:
                raise AssertionError(f"bucket {self.slot}: {nxt!r} points at another holder")
            if type(nxt) is TimerTaskEntry:
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
