"""Lock discipline as a checked property (Eraser's lockset idea, with the locks declared).

The controlled schedules only switch threads at synchronization points, so a planted
bug that *removes* a lock also removes the switch points around the state it guarded:
no schedule can then interleave inside the unguarded section, and the bug passes.
Eraser (Savage et al., 1997) answers this by checking, at every access of shared
state, that some lock consistently protects it. Here the protecting lock is not
inferred but declared: ``GUARDS`` is a table of (class, attribute or mutator method,
guarding lock), and inside ``Lockset.installed()`` every write of a listed field, every
mutation (and every iteration) of a listed container and every call of a listed
mutator first asserts that the calling thread holds the guarding lock. A violation is
recorded (``Lockset.violations``) and raised as ``LocksetViolationError`` before the
mutation happens, so the structure stays consistent; the record survives code that
swallows exceptions (the executor's ``run_logged``, the reaper loop).

How it is attached, so the normal build pays nothing: the core modules are not
touched. For the duration of the block the table's classes get, on the class, a data
descriptor per listed field (a ``__slots__`` member descriptor is wrapped, a plain
attribute is kept in the instance ``__dict__``), and a wrapper per listed method; a
listed container is swapped, when the field is first assigned, for a ``GuardedDict`` /
``GuardedList`` that checks before mutating. Everything is restored at exit. Only the
pure (interpreted) build can be patched this way: the rows of a mypyc-compiled module
are skipped and listed in ``Lockset.unchecked``.

What is exempt: the first write of a field (initialisation, before the object is
shared: Eraser's "virgin" state) and single reads (``len``, ``get``, an attribute
read), which the implementations do without locks on purpose (atomic under the GIL,
documented at each place). Iterating a guarded container is a multi-step read and is
checked.

Whose lock: a guard is a function of the owning object returning the lock object
(``SchedLock`` in the schedules, ``_thread.RLock`` with real threads); ownership is
asked of the lock itself (``_is_owned``), so the check works with the scheduler and
with real threads alike, and it needs no race to happen: a mutation without its lock is
reported on the first run that reaches it, whatever the interleaving.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, SupportsIndex

__all__ = [
    "GUARDS",
    "UNGUARDED",
    "Guard",
    "GuardedDict",
    "GuardedList",
    "Lockset",
    "LocksetViolationError",
    "holds",
    "is_pure",
]

Kind = Literal["field", "dict", "list", "method"]

_UNSET = object()


class LocksetViolationError(AssertionError):
    """A guarded field, container or mutator touched without its guarding lock."""


def holds(lock: object) -> bool:
    """Whether the calling thread holds ``lock`` (an RLock or a scheduler lock)."""
    is_owned = getattr(lock, "_is_owned", None)
    if is_owned is None:
        raise TypeError(f"cannot tell which thread holds {lock!r} (no _is_owned)")
    return bool(is_owned())


def module_lock(module: str, attribute: str) -> Callable[[object], object]:
    """A guard: the module's process-wide lock, read at check time (tests rebind it)."""

    def guard(_obj: object) -> object:
        return getattr(importlib.import_module(module), attribute)

    guard.__name__ = f"{module}.{attribute}"
    return guard


def attr_lock(attribute: str) -> Callable[[object], object]:
    """A guard: the lock in the owning object's ``attribute``."""

    def guard(obj: object) -> object:
        return getattr(obj, attribute)

    guard.__name__ = f"self.{attribute}"
    return guard


class _Unowned:
    """The guard of an operation no purgatory owns (never submitted, or its submission
    rolled back): no purgatory counts it, so its counted flag is nobody's shared state."""

    def _is_owned(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "<no purgatory: not submitted>"


_UNOWNED = _Unowned()


def owner_lock(owner: str, attribute: str) -> Callable[[object], object]:
    """A guard: the lock in ``attribute`` of the object in the owning object's ``owner``
    field (an operation's ``_owner``, its purgatory); exempt while that field is None."""

    def guard(obj: object) -> object:
        holder = getattr(obj, owner)
        return _UNOWNED if holder is None else getattr(holder, attribute)

    guard.__name__ = f"self.{owner}.{attribute}"
    return guard


@dataclass(frozen=True)
class Guard:
    """One row of the table: ``module.owner.attribute`` is guarded by ``lock(obj)``.

    ``kind``: ``field`` (assignments after the first are checked), ``dict``/``list``
    (the assigned container is swapped for a checking one), ``method`` (each call is
    checked). ``values``: for a ``dict`` row, how to guard each stored value (``list``:
    swap it for a ``GuardedList``; ``attr:NAME``: swap the value's ``NAME`` dict for a
    ``GuardedDict``) under the same lock.
    """

    module: str
    owner: str
    attribute: str
    kind: Kind
    lock: Callable[[object], object]
    values: str | None = None
    free_reads: str | None = None
    """Why the implementations may read this state without its lock (None: every read of
    a shared object's field, or single read of its container, is checked too)."""

    @property
    def label(self) -> str:
        return f"{self.owner}.{self.attribute}"


_OWNER_COUNTERS = owner_lock("_owner", "_counters_lock")
_REF_TIMER = module_lock("kpurgatory.reference.timer", "_STATE_LOCK")
_OPT_TIMER = module_lock("kpurgatory.optimized.timer", "_TIMER_LOCK")
_REF_T = "kpurgatory.reference.timer"
_REF_P = "kpurgatory.reference.purgatory"
_OPT_T = "kpurgatory.optimized.timer"
_OPT_B = "kpurgatory.optimized.bucket"
_OPT_W = "kpurgatory.optimized.wheel"
_OPT_Q = "kpurgatory.optimized.delay_queue"
_OPT_P = "kpurgatory.optimized.purgatory"
_OPT_O = "kpurgatory.optimized.operation"
_REF_O = "kpurgatory.reference.operation"
_PROTO = "kpurgatory.protocol"

# Why some state is read without its lock (the rows' ``free_reads``). Each is one load of
# a reference (an int, a bool, a tuple, a container's length), which CPython performs as a
# whole on the GIL build and on the free-threaded one alike (no torn value); what such a
# read may see is a value already stale, and each reason says why stale is harmless.
_SIZE = "size/num_delayed: a count that may be stale on return, as Kafka's AtomicInteger.get()"
_CLOSED = "is_closed and a fast refusal; close itself, add and the drain re-read it locked"
_SHUT = "the fast refusal of a call after shutdown, re-read under the lock where it decides"
_FLAG = (
    "a one-way flag (False -> True, set by a compare-and-set under the flag lock): a stale "
    "False only sends the reader to the locked path, which decides again"
)
_STATE = (
    "R68's state: its finished bits are one-way (set by a compare-and-set under the flag "
    "lock), so a stale unfinished only sends the reader to the locked path, which decides "
    "again; the submitted bit changes under the operation's lock too, where it is read"
)
_KEYS = "set once under the operation lock before the operation can complete; then constant"
_WATCHED = "watched: the shards' counts summed one at a time, a total that may be stale"
_ENTRY = "the hand-over's linearization point (docs/algorithm.md), re-read under the lock"

GUARDS: list[Guard] = [
    # reference timer: one process-wide lock for every schedule and every task's entry
    Guard(_REF_T, "TimerTask", "_entry", "field", _REF_TIMER),
    Guard(_REF_T, "SystemTimer", "_pending", "dict", _REF_TIMER, free_reads=_SIZE),
    Guard(_REF_T, "SystemTimer", "_current_time", "field", _REF_TIMER),
    Guard(_REF_T, "SystemTimer", "_closed", "field", _REF_TIMER, free_reads=_CLOSED),
    Guard(_REF_T, "SystemTimer", "_wake_requested", "field", _REF_TIMER),
    # reference purgatory's store: one lock for the watcher map and its lists (the same
    # lock object is its counters and shutdown lock: the protocol rows below)
    Guard(_REF_P, "DelayedOperationPurgatory", "_watchers", "dict", attr_lock("_lock"), "list"),
    # reference operation: its state under its flag lock, its keys under its lock; the
    # flag that it counts as unfinished (R61) under its purgatory's counters lock
    Guard(_REF_O, "DelayedOperation", "_state", "field", attr_lock("_flags"), free_reads=_STATE),
    Guard(_REF_O, "DelayedOperation", "_counted", "field", _OWNER_COUNTERS),
    Guard(_REF_O, "DelayedOperation", "_watch_keys", "field", attr_lock("_lock"), free_reads=_KEYS),
    # optimized timer: one process-wide lock for wheels, buckets, delay queue, entries
    Guard(_OPT_B, "TimerTaskEntry", "_entry_due", "field", _OPT_TIMER),
    Guard(_OPT_B, "TimerTaskEntry", "_entry_list", "field", _OPT_TIMER, free_reads=_ENTRY),
    Guard(_OPT_B, "TimerTaskEntry", "_entry_next", "field", _OPT_TIMER),
    Guard(_OPT_B, "TimerTaskEntry", "_entry_prev", "field", _OPT_TIMER),
    Guard(_OPT_B, "TaskCounter", "value", "field", _OPT_TIMER, free_reads=_SIZE),
    Guard(_OPT_B, "TimerTaskList", "add", "method", attr_lock("lock")),
    Guard(_OPT_B, "TimerTaskList", "remove", "method", attr_lock("lock")),
    Guard(_OPT_B, "TimerTaskList", "flush", "method", attr_lock("lock")),
    Guard(_OPT_B, "TimerTaskList", "set_expiration", "method", attr_lock("lock")),
    Guard(_OPT_B, "HandOver", "remove", "method", attr_lock("lock")),
    Guard(_OPT_W, "TimingWheel", "add", "method", attr_lock("lock")),
    Guard(_OPT_W, "TimingWheel", "advance_clock", "method", attr_lock("lock")),
    Guard(_OPT_Q, "DelayQueue", "offer", "method", _OPT_TIMER),
    Guard(_OPT_Q, "DelayQueue", "poll", "method", _OPT_TIMER),
    Guard(_OPT_Q, "DelayQueue", "note_scheduled", "method", _OPT_TIMER),
    Guard(_OPT_Q, "DelayQueue", "waiters", "field", _OPT_TIMER),
    Guard(_OPT_Q, "DelayQueue", "target", "field", _OPT_TIMER),
    Guard(_OPT_W, "TimingWheel", "current_time", "field", attr_lock("lock")),
    Guard(_OPT_T, "SystemTimer", "_current_time", "field", attr_lock("_lock")),
    Guard(_OPT_T, "SystemTimer", "_closed", "field", attr_lock("_lock"), free_reads=_CLOSED),
    Guard(_OPT_T, "SystemTimer", "_wake_requested", "field", attr_lock("_lock")),
    Guard(_OPT_T, "SystemTimer", "_cascades", "field", attr_lock("_lock")),
    # optimized operation: the state and the pending flag are written under the flag lock
    Guard(_OPT_O, "DelayedOperation", "_state", "field", attr_lock("_flags"), free_reads=_STATE),
    Guard(
        _OPT_O,
        "DelayedOperation",
        "_try_complete_pending",
        "field",
        attr_lock("_flags"),
        free_reads=_FLAG,
    ),
    Guard(_OPT_O, "DelayedOperation", "_watch_keys", "field", attr_lock("_lock"), free_reads=_KEYS),
    Guard(_OPT_O, "DelayedOperation", "_counted", "field", _OWNER_COUNTERS),
    # optimized purgatory: each shard's map, lists and count under the shard lock
    Guard(_OPT_P, "_Shard", "watchers", "dict", attr_lock("lock"), "attr:ops"),
    Guard(_OPT_P, "_Shard", "count", "field", attr_lock("lock"), free_reads=_WATCHED),
    Guard(
        _OPT_P, "DelayedOperationPurgatory", "_num_expired", "field", attr_lock("_counters_lock")
    ),
    # the protocol both purgatories run: its counters under the counters lock, the latch
    # under the shutdown lock (the reference's one lock is both)
    *(
        Guard(_PROTO, "Purgatory", name, "field", attr_lock("_counters_lock"))
        for name in (
            "_estimated_total_operations",
            "_estimate_resets",
            "_unfinished",
            "_num_purged",
            "_num_completed",
        )
    ),
    Guard(
        _PROTO, "Purgatory", "_is_shut_down", "field", attr_lock("_shutdown_lock"), free_reads=_SHUT
    ),
    Guard(_PROTO, "Purgatory", "_shutdown_done", "field", attr_lock("_shutdown_lock")),
]
"""What each lock guards, per implementation (docs/verification.md, "Lock discipline").

Keep in step with the implementations: ``Lockset.installed`` fails if a listed class or
attribute no longer exists."""


_CONST = "set at construction (or by a test or driver before the object is shared), never rebound"
_SYNC = "a lock, condition, event, thread or flag object: the synchronization itself"
_GUARDED_INSIDE = "an object set at construction whose own methods or fields have rows"

UNGUARDED: dict[str, str] = {
    **{
        f"Purgatory.{name}": _CONST
        for name in (
            "_name", "_broker_id", "_purge_interval", "_reaper_enabled", "_timer_enabled",
            "_timer", "_reaper", "_purge_when_idle",
        )
    },
    **{
        f"Purgatory.{name}": _SYNC
        for name in ("_counters_lock", "_shutdown_lock", "_shutdown_finished", "_stop_reaper")
    },
    **{
        f"DelayedOperationPurgatory.{name}": _CONST
        for name in ("_num_shards", "_candidates_limit", "_let_go_bound")
    },
    "DelayedOperationPurgatory._lock": _SYNC,
    "DelayedOperationPurgatory._shards": _GUARDED_INSIDE,
    "DelayedOperationPurgatory._candidates": (
        "a sync.new_shared_dict: no lock by design, each call atomic; the schedules switch "
        "threads between its calls (a SchedDict)"
    ),
    "DelayedOperationPurgatory._scan_all": (
        "a request flag any thread may set (set before the candidates are cleared) and the "
        "scan clears first: a stale read only moves the scan to the next pass; _check "
        "asserts every completed watched operation is a candidate or scanned"
    ),
    "DelayedOperationPurgatory._let_go_owed": (
        "written only by bounded passes (R71), which run on the event loop's one thread"
    ),
    **{
        f"SystemTimer.{name}": _CONST
        for name in ("_name", "_tick_ms", "_wheel_size", "_clock", "_deadline_base",
                     "_owns_executor", "_executor", "_next_due")
    },
    **{f"SystemTimer.{name}": _SYNC for name in ("_lock", "_condition")},
    **{f"SystemTimer.{name}": _GUARDED_INSIDE for name in ("_counter", "_queue", "_wheel")},
    "TimerTask._delay_ms": _CONST,
    **{
        f"DelayedOperation.{name}": _SYNC
        for name in ("_lock", "_flags", "_try_complete_pending")
    },
    "DelayedOperation._owner": (
        "written by the claim (the submitted flag's compare-and-set picks one writer) and "
        "by a rollback under the operation's lock"
    ),
    "DelayedOperation._untimed": (
        "written under the operation's lock by cancel_for_key and a rollback (a row would "
        "flag the claim's own rollback when the lock's acquire raised, before it held it)"
    ),
    "DelayedOperation._expiring": "written by run under the operation's lock, read there",
    "DelayedOperation._waiter": (
        "set by kpurgatory.aio before the submission, cleared by the one winner of the "
        "completed flag's compare-and-set"
    ),
}  # fmt: skip
"""The instance fields no row of ``GUARDS`` covers, each with why it needs none
(``Owner.attribute``, by the name of the class that owns it in either implementation).
tests/concurrency/test_lockset.py fails on a field of a timer, purgatory or operation
that is in neither table: a new shared field must be given a lock or a reason."""


def is_pure(module: str) -> bool:
    """Whether ``module`` is interpreted Python (a mypyc build is an extension module,
    whose classes cannot be patched: the lockset checks skip them)."""
    return str(getattr(importlib.import_module(module), "__file__", "")).endswith(".py")


class Lockset:
    """The checks of one ``installed`` block: the violations seen, and whether active.

    ``unchecked`` lists the rows skipped because their module is compiled."""

    def __init__(self) -> None:
        self.violations: list[str] = []
        self.unchecked: list[str] = []
        self.active = False
        self._mutex = threading.Lock()
        self._first_thread: dict[int, int] = {}  # id(owner) -> its one thread so far (0: shared)
        self._seen: list[object] = []  # keeps the owners alive: their ids stay theirs
        self._read_messages: set[str] = set()

    def check_read(self, guard: Guard, obj: object, action: str = "read") -> None:
        """Record (never raise: a read changes nothing) a read of ``guard``'s state of
        ``obj`` without its lock, once ``obj`` is shared: read or written by a second
        thread (Eraser's exclusive state exempts an object still used by one thread only,
        its initialisation included). Rows with ``free_reads`` are not checked."""
        if not self.active or guard.free_reads is not None:
            return
        ident = threading.get_ident()
        with self._mutex:
            first = self._first_thread.get(id(obj))
            if first is None:
                self._first_thread[id(obj)] = ident
                self._seen.append(obj)
                return
            if first == ident:
                return
            if first != 0:
                self._first_thread[id(obj)] = 0
        if holds(guard.lock(obj)):
            return
        message = f"{action} {guard.label} without holding {guard.lock(obj)!r}"
        with self._mutex:
            if message not in self._read_messages:
                self._read_messages.add(message)
                self.violations.append(f"{message} (thread {threading.current_thread().name})")

    def note_write(self, obj: object) -> None:
        """A write of ``obj``'s guarded state: a second thread writing makes it shared."""
        if not self.active:
            return
        ident = threading.get_ident()
        with self._mutex:
            first = self._first_thread.get(id(obj))
            if first is None:
                self._first_thread[id(obj)] = ident
                self._seen.append(obj)
            elif first not in (0, ident):
                self._first_thread[id(obj)] = 0

    def check(self, guard: Guard, obj: object, action: str) -> None:
        """Raise (and record) ``LocksetViolationError`` unless the caller holds ``guard``'s lock."""
        if not self.active:
            return
        lock = guard.lock(obj)
        if holds(lock):
            return
        message = (
            f"{action} {guard.label} without holding {lock!r} "
            f"(thread {threading.current_thread().name})"
        )
        with self._mutex:
            self.violations.append(message)
        raise LocksetViolationError(message)

    def wrap(self, guard: Guard, owner: object, value: object, kind: str | None = None) -> object:
        """``value`` swapped for a checking container (``kind`` defaults to the row's)."""
        kind = guard.kind if kind is None else kind
        if kind == "dict" and type(value) is dict:
            return GuardedDict(value, self, guard, owner)
        if kind == "list" and type(value) is list:
            return GuardedList(value, self, guard, owner)
        return value

    def wrap_value(self, guard: Guard, owner: object, value: object) -> object:
        """A value stored in a guarded dict, guarded per the row's ``values``."""
        if guard.values == "list":
            return self.wrap(guard, owner, value, "list")
        if guard.values is not None and guard.values.startswith("attr:"):
            name = guard.values[len("attr:") :]
            inner = getattr(value, name, None)
            if type(inner) is dict:
                setattr(value, name, GuardedDict(inner, self, guard, owner))
        return value

    @contextmanager
    def installed(self, table: Iterable[Guard] = GUARDS) -> Iterator[Lockset]:
        """Attach the checks of ``table`` for the block's duration, then restore the classes."""
        restore: list[Callable[[], None]] = []
        try:
            for guard in table:
                restore.append(self._attach(guard))
            self.active = True
            yield self
        finally:
            self.active = False
            for undo in reversed(restore):
                undo()

    def _attach(self, guard: Guard) -> Callable[[], None]:
        if not is_pure(guard.module):
            self.unchecked.append(guard.label)
            return lambda: None
        module = importlib.import_module(guard.module)
        cls = getattr(module, guard.owner, None)
        if not isinstance(cls, type):
            raise LookupError(f"lockset table: {guard.module}.{guard.owner} is gone")
        raw = cls.__dict__.get(guard.attribute, _UNSET)
        if guard.kind == "method":
            if not callable(raw):
                raise LookupError(f"lockset table: {guard.label} is not a method of its class")
            replacement: object = _checked_method(self, guard, raw)
        else:
            slot = raw if raw is not _UNSET else _native_field(cls, guard.attribute)
            if slot is not None and type(slot).__name__ not in _FIELD_DESCRIPTORS:
                raise LookupError(f"lockset table: {guard.label} is a {type(slot).__name__}")
            replacement = _CheckedField(self, guard, slot)
        try:
            setattr(cls, guard.attribute, replacement)
        except (TypeError, AttributeError) as exc:
            raise LookupError(
                f"lockset: cannot patch {guard.label} ({exc}); only the pure build can be checked"
            ) from exc

        def undo() -> None:
            if raw is _UNSET:
                delattr(cls, guard.attribute)
            else:
                setattr(cls, guard.attribute, raw)

        return undo


def _checked_method(lockset: Lockset, guard: Guard, method: Any) -> Callable[..., Any]:
    @functools.wraps(method)
    def checked(self: object, *args: Any, **kwargs: Any) -> Any:
        lockset.check(guard, self, "call")
        return method(self, *args, **kwargs)

    return checked


_FIELD_DESCRIPTORS = ("member_descriptor", "getset_descriptor")
"""Slots of a pure class, and the native fields of a compiled one."""


def _native_field(cls: type, name: str) -> Any:
    """The descriptor of field ``name`` if a compiled base of ``cls`` declares it (the
    reference operation's ``WatchableBase`` in the compiled build): the checked field
    reads and writes through it, where compiled code reads the field too. None if the
    field lives in the instance's ``__dict__``."""
    for base in cls.__mro__[1:]:
        found = base.__dict__.get(name)
        if type(found).__name__ == "getset_descriptor":
            return found
    return None


class _CheckedField:
    """A data descriptor for one guarded field: checks writes after the first."""

    def __init__(self, lockset: Lockset, guard: Guard, slot: Any) -> None:
        self._lockset = lockset
        self._guard = guard
        self._slot = slot
        self._name = guard.attribute

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        if self._guard.kind == "field":
            self._lockset.check_read(self._guard, obj)
        if self._slot is not None:
            return self._slot.__get__(obj, objtype)
        try:
            return obj.__dict__[self._name]
        except KeyError:
            raise AttributeError(self._name) from None

    def _is_set(self, obj: object) -> bool:
        if self._slot is not None:
            try:
                self._slot.__get__(obj, type(obj))
            except AttributeError:
                return False
            return True
        return self._name in obj.__dict__

    def __set__(self, obj: object, value: object) -> None:
        self._lockset.note_write(obj)
        if self._is_set(obj):
            self._lockset.check(self._guard, obj, "write")
        if self._guard.kind in ("dict", "list"):
            value = self._lockset.wrap(self._guard, obj, value)
        if self._slot is not None:
            self._slot.__set__(obj, value)
        else:
            obj.__dict__[self._name] = value

    def __delete__(self, obj: object) -> None:
        self._lockset.check(self._guard, obj, "delete")
        if self._slot is not None:
            self._slot.__delete__(obj)
        else:
            del obj.__dict__[self._name]


class GuardedDict(dict[Any, Any]):
    """A dict that checks its guarding lock before each mutation and each iteration."""

    def __init__(self, data: dict[Any, Any], lockset: Lockset, guard: Guard, owner: object):
        self._lockset = lockset
        self._guard = guard
        self._owner = owner
        super().__init__()
        for key, value in data.items():
            super().__setitem__(key, lockset.wrap_value(guard, owner, value))

    def _check(self, action: str) -> None:
        self._lockset.note_write(self._owner)
        self._lockset.check(self._guard, self._owner, action)

    def _read(self, action: str) -> None:
        self._lockset.check_read(self._guard, self._owner, action)

    def __getitem__(self, key: Any) -> Any:
        self._read("read of")
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._read("get from")
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._read("membership test of")
        return super().__contains__(key)

    def __len__(self) -> int:
        self._read("len of")
        return super().__len__()

    def _detach(self, key: Any) -> None:
        # A guarded list taken out of the map belongs to the thread that took it
        # (the reference's cancel_for_key returns it): it is no longer shared state.
        value = super().get(key)
        if isinstance(value, GuardedList):
            value.detached = True

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check("store into")
        self._detach(key)
        super().__setitem__(key, self._lockset.wrap_value(self._guard, self._owner, value))

    def __delitem__(self, key: Any) -> None:
        self._check("delete from")
        self._detach(key)
        super().__delitem__(key)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._check("setdefault on")
        if key not in self:
            super().__setitem__(key, self._lockset.wrap_value(self._guard, self._owner, default))
        return super().__getitem__(key)

    def pop(self, key: Any, *default: Any) -> Any:
        self._check("pop from")
        self._detach(key)
        return super().pop(key, *default)

    def popitem(self) -> tuple[Any, Any]:
        self._check("popitem from")
        key, value = super().popitem()
        if isinstance(value, GuardedList):
            value.detached = True
        return key, value

    def clear(self) -> None:
        self._check("clear")
        for key in list(super().keys()):
            self._detach(key)
        super().clear()

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._check("update")
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __iter__(self) -> Iterator[Any]:
        self._check("iterate")
        return super().__iter__()

    def keys(self) -> Any:
        self._check("iterate")
        return super().keys()

    def values(self) -> Any:
        self._check("iterate")
        return super().values()

    def items(self) -> Any:
        self._check("iterate")
        return super().items()


class GuardedList(list[Any]):
    """A list that checks its guarding lock before each mutation and each iteration."""

    def __init__(self, data: list[Any], lockset: Lockset, guard: Guard, owner: object):
        super().__init__(data)
        self._lockset = lockset
        self._guard = guard
        self._owner = owner
        self.detached = False

    def _check(self, action: str) -> None:
        if not self.detached:
            self._lockset.note_write(self._owner)
            self._lockset.check(self._guard, self._owner, action)

    def _read(self, action: str) -> None:
        if not self.detached:
            self._lockset.check_read(self._guard, self._owner, action)

    def __getitem__(self, index: Any) -> Any:
        self._read("read of")
        return super().__getitem__(index)

    def __contains__(self, value: object) -> bool:
        self._read("membership test of")
        return super().__contains__(value)

    def __len__(self) -> int:
        self._read("len of")
        return super().__len__()

    def append(self, value: Any) -> None:
        self._check("append to")
        super().append(value)

    def extend(self, values: Iterable[Any]) -> None:
        self._check("extend")
        super().extend(values)

    def insert(self, index: SupportsIndex, value: Any) -> None:
        self._check("insert into")
        super().insert(index, value)

    def remove(self, value: Any) -> None:
        self._check("remove from")
        super().remove(value)

    def pop(self, index: SupportsIndex = -1) -> Any:
        self._check("pop from")
        return super().pop(index)

    def clear(self) -> None:
        self._check("clear")
        super().clear()

    def __setitem__(self, index: Any, value: Any) -> None:
        self._check("store into")
        super().__setitem__(index, value)

    def __delitem__(self, index: Any) -> None:
        self._check("delete from")
        super().__delitem__(index)

    def __iadd__(self, values: Iterable[Any]) -> GuardedList:  # type: ignore[misc]
        self._check("extend")
        super().__iadd__(values)
        return self

    def __iter__(self) -> Iterator[Any]:
        self._check("iterate")
        return super().__iter__()
