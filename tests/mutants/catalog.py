"""Seeded mutants: deliberate one-line bugs in ``kpurgatory.optimized``, applied by patching.

Each ``Mutant`` names a function or method of the optimized package, an exact fragment of
its source, and the fragment's replacement. ``applied(mutant)`` rebuilds the function
from its source with that one change (``inspect.getsource`` + text replacement +
``compile``/``exec`` in the defining module's namespace, so globals resolve as in the
original), swaps it in for the duration of a ``with`` block, and restores the original
afterwards. A target the named class inherits (the shared protocol's methods) is
planted on that class alone. It raises ``MutantError`` if the target is gone or the
fragment does not occur exactly once, so a refactor of the optimized code cannot
silently disarm a mutant: the test that checks every mutant is armed fails instead, and
the catalog must be adapted to the new code.

``tests/mutants/test_mutants_caught.py`` asserts that the equivalence machines fail on
every mutant and pass on the unmutated code. A mutant the machines miss means the
machines are too weak; strengthen them rather than dropping the mutant.
"""

from __future__ import annotations
import __future__

import ast
import importlib
import inspect
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FunctionType, ModuleType
from typing import Any, Literal

__all__ = ["MUTANTS", "Mutant", "MutantError", "applied", "mutated_source"]

MachineName = Literal["timer", "purgatory"]


class MutantError(Exception):
    """A mutant cannot be applied: its target or its source fragment is not there."""


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: replace ``old`` by ``new`` (exactly once) in ``module.target``.

    ``target`` is ``"function"`` or ``"Class.method"`` (a property's getter is patched
    through the property). ``machines`` lists the equivalence machines run against it,
    in order; the first to fail catches it.
    """

    name: str
    module: str
    target: str
    old: str
    new: str
    description: str
    machines: tuple[MachineName, ...] = ("timer", "purgatory")


def _resolve(mutant: Mutant) -> tuple[ModuleType, Any, str, Any, bool]:
    """(module, owner, attribute name, raw attribute, inherited) of the mutant's target.

    A method the named class inherits (the purgatory protocol of ``kpurgatory.protocol``,
    which both purgatories derive from) is found in the class that defines it: the
    module is that class's (its globals), and the mutant is planted on the named class
    alone, so the other implementation keeps the correct code (``inherited``)."""
    try:
        module = importlib.import_module(mutant.module)
    except ImportError as exc:
        raise MutantError(f"{mutant.name}: module {mutant.module} not importable: {exc}") from exc
    owner: Any = module
    parts = mutant.target.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            raise MutantError(f"{mutant.name}: {mutant.module}.{mutant.target} not found")
    attr = parts[-1]
    namespace = vars(owner)
    if attr in namespace:
        return module, owner, attr, namespace[attr], False
    for base in owner.__mro__[1:] if isinstance(owner, type) else ():
        if attr in vars(base):
            defining = importlib.import_module(base.__module__)
            return defining, owner, attr, vars(base)[attr], True
    raise MutantError(
        f"{mutant.name}: {mutant.module}.{mutant.target} not found (not defined there)"
    )


def _function_of(raw: Any, mutant: Mutant) -> FunctionType:
    """The plain function behind a function, method, static/class method or property."""
    if isinstance(raw, property):
        raw = raw.fget
    elif isinstance(raw, (staticmethod, classmethod)):
        raw = raw.__func__
    if not isinstance(raw, FunctionType):
        raise MutantError(
            f"{mutant.name}: {mutant.target} is a {type(raw).__name__}, not a Python "
            "function (a compiled build cannot be mutated)"
        )
    return raw


def mutated_source(mutant: Mutant) -> tuple[str, str]:
    """(original source, mutated source) of the target; ``MutantError`` unless the
    fragment occurs exactly once."""
    _, _, _, raw, _ = _resolve(mutant)
    function = _function_of(raw, mutant)
    source = textwrap.dedent(inspect.getsource(function))
    count = source.count(mutant.old)
    if count != 1:
        raise MutantError(
            f"{mutant.name}: fragment {mutant.old!r} occurs {count} times in "
            f"{mutant.module}.{mutant.target}, expected exactly once"
        )
    return source, source.replace(mutant.old, mutant.new)


def _build(mutant: Mutant, module: ModuleType, owner: Any, raw: Any, source: str) -> Any:
    """Compile ``source`` (one def) into a replacement for ``raw``.

    The def is wrapped in a factory taking ``__class__``, so zero-argument ``super()``
    inside a method still finds its class; the function's globals are the defining
    module's namespace; decorators are dropped and the original wrapper (property,
    staticmethod, classmethod) is rebuilt around the new function.
    """
    tree = ast.parse(source)
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        raise MutantError(f"{mutant.name}: {mutant.target} is not a single def")
    function_def = tree.body[0]
    function_def.decorator_list = []
    factory = ast.FunctionDef(
        name="__mutant_factory__",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg="__class__")],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=[function_def, ast.Return(value=ast.Name(id=function_def.name, ctx=ast.Load()))],
        decorator_list=[],
        returns=None,
    )
    wrapper = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(wrapper)
    code = compile(
        wrapper,
        f"<mutant {mutant.name}: {mutant.module}.{mutant.target}>",
        "exec",
        flags=__future__.annotations.compiler_flag,  # annotations stay strings, as in the module
        dont_inherit=True,
    )
    scope: dict[str, Any] = {}
    exec(code, vars(module), scope)
    original = _function_of(raw, mutant)
    new_function = scope["__mutant_factory__"](owner if isinstance(owner, type) else None)
    new_function.__qualname__ = original.__qualname__
    new_function.__module__ = original.__module__
    new_function.__defaults__ = original.__defaults__
    new_function.__kwdefaults__ = original.__kwdefaults__
    if isinstance(raw, property):
        return property(new_function, raw.fset, raw.fdel, raw.__doc__)
    if isinstance(raw, staticmethod):
        return staticmethod(new_function)
    if isinstance(raw, classmethod):
        return classmethod(new_function)
    return new_function


@contextmanager
def applied(mutant: Mutant) -> Iterator[Any]:
    """Swap the mutated function in for the ``with`` block; yields the replacement.

    The original attribute is restored on exit, even if the block raised.
    """
    module, owner, attr, raw, inherited = _resolve(mutant)
    _, new_source = mutated_source(mutant)
    replacement = _build(mutant, module, owner, raw, new_source)
    setattr(owner, attr, replacement)
    try:
        yield replacement
    finally:
        if inherited:
            delattr(owner, attr)  # the named class inherits the original again
        else:
            setattr(owner, attr, raw)


_BUCKET = "kpurgatory.optimized.bucket"
_WHEEL = "kpurgatory.optimized.wheel"
_QUEUE = "kpurgatory.optimized.delay_queue"
_TIMER = "kpurgatory.optimized.timer"
_OPERATION = "kpurgatory.optimized.operation"
_PURGATORY = "kpurgatory.optimized.purgatory"
_TIMER_FIRST: tuple[MachineName, ...] = ("timer", "purgatory")
_PURGATORY_ONLY: tuple[MachineName, ...] = ("purgatory",)

MUTANTS: tuple[Mutant, ...] = (
    # ---- timer: the list ---------------------------------------------------
    Mutant(
        "expiry-test-off-by-one",
        _WHEEL,
        "expired_at_level",
        "return due < current_time + tick_ms",
        "return due <= current_time + tick_ms",
        "Kafka's 'already expired' test with <= : a task due one tick after the current "
        "time is handed over at once (R3), and a drain collects it a tick early (R5).",
        _TIMER_FIRST,
    ),
    Mutant(
        "poll-off-by-one",
        _QUEUE,
        "DelayQueue.poll",
        "if heap and heap[0][0] <= now:",
        "if heap and heap[0][0] < now:",
        "The delay queue releases a bucket only strictly after its expiration: tasks due "
        "exactly at the drain reading are late (R5).",
        _TIMER_FIRST,
    ),
    Mutant(
        "bucket-not-reoffered",
        _WHEEL,
        "TimingWheel.add",
        "wheel.queue.offer(bucket)",
        "pass",
        "A bucket whose expiration changed is not offered to the delay queue: its tasks "
        "never run (R5).",
        _TIMER_FIRST,
    ),
    Mutant(
        "flush-keeps-expiration",
        _BUCKET,
        "TimerTaskList.flush",
        "self.expiration = NO_EXPIRATION",
        "pass",
        "The flush of a bucket does not reset the bucket's expiration. Invisible from "
        "outside in this design (the drain advances the wheel to a bucket's expiration "
        "before flushing it, so that slot never gets the same expiration again); caught by "
        "_check(), which the machines run after every step.",
        _TIMER_FIRST,
    ),
    Mutant(
        "wrong-overflow-tick",
        _WHEEL,
        "TimingWheel.add_overflow_wheel",
        "self.interval,",
        "self.interval * self.wheel_size,",
        "The overflow wheel's tick is wheel_size times too coarse: its 'already expired' "
        "test fires early for tasks more than one level up.",
        _TIMER_FIRST,
    ),
    Mutant(
        "cancel-skips-unlink",
        _TIMER,
        "TimerTask.cancel",
        "holder.remove(self)",
        "pass",
        "cancel leaves the task linked in its bucket: it still runs, and size stays up (R9, R12).",
        _TIMER_FIRST,
    ),
    # ---- timer: more ---------------------------------------------------------------
    Mutant(
        "no-r11-recheck",
        _TIMER,
        "SystemTimer._hand_over_collected",
        "if entry._entry_list is not drain:",
        "if False:",
        "The drain hands over a task cancelled or re-added after it left the schedule but "
        "before its turn (R11).",
        _TIMER_FIRST,
    ),
    Mutant(
        "current-time-not-advanced",
        _TIMER,
        "SystemTimer._drain",
        "wheel.advance_clock(now)\n    self._current_time",
        "self._current_time",
        "The wheel's current time is not moved to the drain reading at the end of the "
        "drain, only to dequeued bucket expirations (Kafka's stale current time, R2).",
        _TIMER_FIRST,
    ),
    Mutant(
        "overflow-starts-late",
        _WHEEL,
        "TimingWheel.add_overflow_wheel",
        "self.current_time,",
        "self.current_time + self.tick_ms,",
        "The overflow wheel starts one lower tick ahead of the wheel below it.",
        _TIMER_FIRST,
    ),
    Mutant(
        "bucket-expires-at-slot-end",
        _WHEEL,
        "bucket_expiration",
        "return vid * tick_ms",
        "return (vid + 1) * tick_ms",
        "A bucket's expiration is the end of its slot instead of the start: its tasks run "
        "a tick late (R5).",
        _TIMER_FIRST,
    ),
    Mutant(
        "readd-keeps-old-entry",
        _TIMER,
        "SystemTimer.add",
        "if old.lock is lock:\n                old.remove(checked)",
        "if old.lock is lock:\n                pass",
        "Re-adding a task skips the unlink of its old scheduling. A re-add that schedules "
        "it again still moves it (linking detaches it first), but one due at once leaves "
        "it linked in the old bucket (R10): size stays up and it runs a second time.",
        _TIMER_FIRST,
    ),
    # ---- timer: the bucket and wheel operations, each defined once ------------------
    Mutant(
        "drain-skips-wheel-advance",
        _TIMER,
        "Drain.flush",
        "wheel.advance_clock(expiration)",
        "pass",
        "The drain flushes a bucket without first moving the wheel to its expiration: "
        "its entries cascade back into the same level (caught by the drain's own check).",
        _TIMER_FIRST,
    ),
    Mutant(
        "bucket-remove-keeps-links",
        _BUCKET,
        "TimerTaskList.remove",
        "nxt._entry_prev = prev",
        "pass",
        "Unlinking an entry (cancel, re-add, flush) leaves the next entry's back link on "
        "the removed one: the bucket is corrupt (caught by _check()).",
        _TIMER_FIRST,
    ),
    Mutant(
        "bucket-add-forgets-counter",
        _BUCKET,
        "TimerTaskList.add",
        "self.counter.value += 1",
        "pass",
        "Linking an entry does not count it: size too low (R12).",
        _TIMER_FIRST,
    ),
    Mutant(
        "expiration-always-changed",
        _BUCKET,
        "TimerTaskList.set_expiration",
        "if current is not None and current == expiration_ms:",
        "if False:",
        "Every add re-offers its bucket: a bucket is queued twice (caught by the delay "
        "queue's _check()).",
        _TIMER_FIRST,
    ),
    Mutant(
        "wheel-advance-late",
        _WHEEL,
        "advanced_time",
        "if time_ms >= current_time + tick_ms:",
        "if time_ms > current_time + tick_ms:",
        "A level moves one tick late: the current time lags the drain reading (R2), so an "
        "add after it judges 'due at once' against a stale time (R3).",
        _TIMER_FIRST,
    ),
    Mutant(
        "fits-window-off-by-one",
        _WHEEL,
        "fits_level",
        "return due < current_time + interval",
        "return due <= current_time + interval",
        "A task due exactly at a level's window end stays on that level, in the slot of "
        "the level's current tick: it runs a whole round early (R5).",
        _TIMER_FIRST,
    ),
    Mutant(
        "bucket-remove-forgets-counter",
        _BUCKET,
        "TimerTaskList.remove",
        "self.counter.value -= 1",
        "pass",
        "Unlinking an entry from a bucket (a cancel, a re-add, a flush) leaves the shared "
        "counter up: size too high (R9, R10, R12).",
        _TIMER_FIRST,
    ),
    # ---- operation and purgatory: the list -----------------------------------
    Mutant(
        "list-dropped-while-mapped",
        _PURGATORY,
        "DelayedOperationPurgatory._unlink",
        "if not watchers.ops and shard.watchers.get(watchers.key) is watchers:",
        "if not watchers.ops and watchers.key in shard.watchers:",
        "An emptied watcher list drops whatever list is mapped for its key now, even a "
        "newer one (Kafka's removeKeyIfEmpty without its identity check, R26).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "nonempty-list-dropped",
        _PURGATORY,
        "DelayedOperationPurgatory._unlink",
        "if not watchers.ops and shard.watchers.get(watchers.key) is watchers:",
        "if shard.watchers.get(watchers.key) is watchers:",
        "A watcher list is dropped from the map while operations are still on it (R26, R27).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "purge-skips-estimate-reset",
        _PURGATORY,
        "DelayedOperationPurgatory._purge_if_due",
        "self._estimated_total_operations = delayed",
        "pass",
        "The purge does not reset the estimate to num_delayed first, so it purges on every "
        "later step (R30).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "check-counts-completed",
        _PURGATORY,
        "DelayedOperationPurgatory.check_and_complete",
        "self._unlink(handle, operation)\n            elif",
        "self._unlink(handle, operation); completed += 1\n            elif",
        "check_and_complete counts operations that were already completed (R25).",
        _PURGATORY_ONLY,
    ),
    # ---- operation and purgatory: more ---------------------------------------------
    Mutant(
        "purge-not-strict",
        _PURGATORY,
        "DelayedOperationPurgatory._purge_if_due",
        "- delayed <= self._purge_interval:",
        "- delayed < self._purge_interval:",
        "The purge rule with >= instead of the strict > (R30).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "estimate-per-key",
        _PURGATORY,
        "DelayedOperationPurgatory._watch_key",
        "shard.count += 1",
        "shard.count += 1; self._estimated_total_operations += 1",
        "The purge estimate grows once per watch key as well as once per operation (R22).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "cancel-for-key-keeps-timer",
        _PURGATORY,
        "DelayedOperationPurgatory.cancel_for_key",
        "operation._unschedule()",
        "pass",
        "cancel_for_key does not cancel the operations' timer entries: they still expire (R29).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "force-complete-keeps-timer",
        _OPERATION,
        "DelayedOperation.force_complete",
        "TimerTask.cancel(self)",
        "pass",
        "force_complete does not cancel the timer entry: num_delayed stays up until the "
        "entry's due time (R16, R28).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "safe-try-ignores-completed",
        _OPERATION,
        "DelayedOperation._safe_try_complete_for",
        "if self._state >= FINISHED or (",
        "if False or (",
        "safe_try_complete calls try_complete on an operation already completed (R18).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "unwatch-forgets-count",
        _PURGATORY,
        "DelayedOperationPurgatory._unlink",
        "shard.count -= 1",
        "pass",
        "Unlinking an operation leaves the shard's watched count up (R27).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "negative-hash-shard",
        _PURGATORY,
        "DelayedOperationPurgatory._watch_key",
        "shard = self._shards[abs(hash(key)) % self._num_shards]",
        "shard = self._shards[hash(key) % self._num_shards]",
        "Watching files a key with a negative hash in another shard than lookups use, so "
        "check_and_complete and cancel_for_key miss it (R25).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "abandon-keeps-watch",
        _PURGATORY,
        "DelayedOperationPurgatory._abandon_submitted",
        "self._unwatch_key(key, operation)",
        "pass",
        "abandon leaves the operation in its watcher lists: every abandoned wait leaks (R40).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "rollback-keeps-watch",
        _PURGATORY,
        "DelayedOperationPurgatory._undo",
        "self._unwatch_key(argument, operation)",
        "pass",
        "A submission that raises leaves its watches behind (R38).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "timer-enabled-ignored",
        _PURGATORY,
        "DelayedOperationPurgatory._time",
        "if self._timer_enabled and not operation._untimed:",
        "if not operation._untimed:",
        "timer_enabled=False still adds operations to the timer (R33).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "next-due-is-bucket-expiration",
        _QUEUE,
        "DelayQueue.earliest_due",
        "due = heap[index][2].min_due()",
        "due = expiration",
        "next_due_time reports the least bucket expiration (Kafka's delay-queue head): too "
        "early for a higher-level bucket, and a bucket emptied by cancels still counts (R44).",
        _TIMER_FIRST,
    ),
)
"""Every seeded mutant; names are unique and stable (tests are parametrized by them)."""
