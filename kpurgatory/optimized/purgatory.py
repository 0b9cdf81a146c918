"""The optimized ``DelayedOperationPurgatory``: watcher lists sharded by key hash (Kafka 2.2+).

Same API and behaviour as ``kpurgatory.reference.purgatory``. Structure
(KAFKA-6431): ``shards`` (default 512) shards, key ``k`` in shard ``abs(hash(k)) %
shards``; each shard has its own lock, a dict key -> ``WatcherList`` and a count of
watched pairs. A watcher list is an insertion-ordered dict ``id(op) -> op``: append and
unlink by identity are O(1) (operations are compared by identity, never by ``==``, so
a subclass's ``__eq__``/``__hash__`` cannot confuse it). An empty list is dropped only
if it is still the instance mapped for its key (Kafka's ``removeKeyIfEmpty``).

Locks: an operation's lock, then at most one shard lock, then (inside the timer) the
task and timer locks (R21, R37). A shard lock is never held while ``try_complete``
runs or while the timer is called. Counters (estimate, completed, expired, purged)
share one small lock, never held together with a shard lock.

Purge candidates (R30 without a scan): a purge must unlink every completed operation
from every watcher list. Kafka (and the reference) scan every list for that, which
costs O(watched) per purge: with 20,000 operations pending on 3 keys and a purge per
1,000 completions, 60 list entries per completion. Here each operation that completes
while it may be watched (its ``force_complete`` wins after its keys were set, or the
submission finds it completed after watching) is recorded in ``_candidates`` (``id ->
op``), and a purge unlinks just those from their keys: O(keys) per completion. A
one-key operation unlinked by ``check_and_complete`` (or ``abandon``) leaves the
candidates at once, so they retain no operation the scan would have freed; what they
may retain longer than the lists would is a multi-key operation whose every key has
already unlinked it: at most ``_candidates_limit`` operations (``2 * purge_interval +
1024``), beyond which the candidates are dropped and the next purge scans every list
as before (``_scan_all``). The candidates are written with single dict operations (each
atomic under the GIL, so no lock). A completion may race a purge: ``force_complete``
records the candidate before it cancels the timer entry, so a purge that took the
candidates too early read a timer size still counting the operation, and its estimate
keeps the next purge due to unlink it, as a scan that had passed its list would (the
slow schedule tier found the other order losing it). ``_check`` asserts that every
completed operation still watched is a candidate unless ``_scan_all`` is set. An
``AsyncPurgatory`` sets ``_let_go_bound`` (R71): a let-go or purge pass then unlinks at
most that many candidates and leaves the rest to ``_let_go_step`` (the driver calls it
in later loop callbacks), and the candidates never overflow into a scan.

Metrics beyond the reference (documented extensions): ``num_expired`` (operations
whose expiry won), ``shards``.

Rules: R21-R35, R37-R41, R53-R56, R61, R64, R66, R67, R71, R73.
"""

from __future__ import annotations

import logging
import threading
import typing
from collections.abc import Hashable, Iterable
from typing import Generic, cast, overload

from kpurgatory import sync
from kpurgatory._checks import (
    require_at_least,
    require_bool,
    require_hashable,
    require_int,
    require_str,
    watch_key_list,
)
from kpurgatory._lifecycle import REAPER_STEP_MS, await_purgatory_termination, run_reaper
from kpurgatory._sweep import KeyFailedError, key_failed_in_purge, keyed, raise_collected
from kpurgatory._typing import BoolArg, IntArg, StrArg, TypeVar
from kpurgatory.clock import ManualClock
from kpurgatory.optimized._mypyc import mypyc_attr
from kpurgatory.optimized.operation import DelayedOperation
from kpurgatory.optimized.timer import SystemTimer, TimerTask
from kpurgatory.spec.protocols import AbstractLock

__all__ = ["DEFAULT_SHARDS", "REAPER_STEP_MS", "DelayedOperationPurgatory", "WatcherList"]

logger = logging.getLogger(__name__)


DEFAULT_SHARDS = 512
"""Kafka's ``Shards``: the number of watcher-list shards."""

T = TypeVar("T", bound=DelayedOperation, default=DelayedOperation)
"""The operations a purgatory holds; ``DelayedOperationPurgatory(...)`` alone means any."""

_TimerArg = typing.TypeVar("_TimerArg", SystemTimer, SystemTimer)
"""The ``timer`` argument's type for callers (see ``kpurgatory._typing``)."""

_KNOWN_OPERATION_TYPES: set[type] = set()
"""Classes already seen to pass ``isinstance(op, DelayedOperation)`` (a class never stops
being a subclass, so the answer is cached; bounded by ``_KNOWN_TYPES_LIMIT``)."""

_KNOWN_TYPES_LIMIT = 256
"""At most this many classes are cached (classes made on the fly would grow it forever)."""

_RESEQUENCEABLE = (list, tuple, set, frozenset)
"""``watch_keys`` types that can be iterated again after a failed fast pass."""


def _watch_keys(watch_keys: Iterable[Hashable]) -> tuple[Hashable, ...]:
    """The distinct keys of ``watch_keys`` in first-occurrence order, validated, as a tuple.

    Same keys and errors as ``kpurgatory._checks.watch_key_list`` (what the reference
    uses; it returns a list), cheaper on the common case: for a list, tuple or set, one
    ``dict.fromkeys`` call hashes and dedups every key in C; only if that fails (an
    unhashable key) or finds no key does the slow path run again on the same collection
    to raise the exact message. A ``tuple`` of distinct keys is returned as it is (the
    operation keeps it for ``abandon``: no copy, no list per operation), a one-key tuple
    after hashing it. Any other iterable (a lone ``str``/``bytes`` included, or a
    one-shot iterator that cannot be read twice) takes the slow path directly. Cost:
    O(keys).
    """
    kind = type(watch_keys)
    if kind is tuple:
        given: tuple[Hashable, ...] = watch_keys  # type: ignore[assignment]  # checked above
        count = len(given)  # not ``len(given) == 1``: mypy would narrow ``given`` to a
        if count == 1:  # 1-tuple, which mypyc unboxes and returns as a fresh tuple
            try:
                hash(given)  # the one key's hash: TypeError if it is unhashable
            except TypeError:
                return tuple(watch_key_list(given))
            return given
    if kind in _RESEQUENCEABLE:
        try:
            distinct = dict.fromkeys(watch_keys)
        except TypeError:
            return tuple(watch_key_list(watch_keys))
        if distinct:
            if kind is tuple and len(distinct) == len(given):
                return given
            return tuple(distinct)
    return tuple(watch_key_list(watch_keys))


def _shard_index(key: Hashable, shards: int) -> int:
    """``abs(hash(key)) % shards``; ``TypeError`` naming ``key`` if it is unhashable.

    Hashes once (reference: ``require_hashable`` then the lookup's own hash). O(1).
    """
    try:
        return abs(hash(key)) % shards
    except TypeError:
        require_hashable("key", key)
        raise


class WatcherList(Generic[T]):
    """The operations watched on one key, in watch order (Kafka's ``Watchers``).

    ``ops`` maps ``id(op)`` to ``op`` (the op is kept, so its id stays unique). Guarded by
    its shard's lock. Reference equivalent: the ``list[T]`` in the reference's map.
    Costs: watch, unlink O(1); snapshot O(n) for n watched: a dict keeps the slots of
    the entries popped from it until it next grows, and iterating it visits them, so a
    list that held 10,000 operations and now holds one would cost a snapshot 10,000
    steps; ``unlinked`` counts the pops since the dict was last rebuilt, and
    ``note_unlinked`` rebuilds it in place (amortized O(1) per pop) before they outgrow
    twice the operations it holds.
    """

    __slots__ = ("key", "ops", "unlinked")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.ops: dict[int, T] = {}
        self.unlinked = 0

    def note_unlinked(self, count: int) -> None:
        """``count`` more operations were popped from ``ops`` (its shard lock is held):
        past ``2 * len(ops) + 64`` pops since the last rebuild, rebuild ``ops`` in place
        (``clear`` frees its table; the survivors go back in watch order). O(len(ops))."""
        unlinked = self.unlinked + count
        ops = self.ops
        if unlinked > 2 * len(ops) + 64:
            survivors = list(ops.items())
            ops.clear()
            ops.update(survivors)
            unlinked = 0
        self.unlinked = unlinked

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self) -> str:
        return f"WatcherList({self.key!r}, {len(self.ops)} ops)"


class _Shard(Generic[T]):
    """One shard: a lock, the watcher lists of its keys, and its number of watched pairs."""

    __slots__ = ("count", "lock", "watchers")

    def __init__(self) -> None:
        self.lock: AbstractLock = sync.new_lock()
        self.watchers: dict[Hashable, WatcherList[T]] = {}
        self.count = 0


@mypyc_attr(allow_interpreted_subclasses=True)
class DelayedOperationPurgatory(Generic[T]):
    """Holds delayed operations until they complete or expire (Kafka's purgatory).

    Reference equivalent: ``kpurgatory.reference.DelayedOperationPurgatory`` (same
    constructor, properties and methods). ``timer`` defaults to
    ``SystemTimer(purgatory_name)`` (optimized); the purgatory owns it and closes it at
    ``shutdown``. With ``reaper_enabled`` a thread named
    ``ExpirationReaper-<broker_id>-<purgatory_name>`` loops ``advance_clock(200)``
    (R31). ``shards`` (keyword-only extension) sets the number of watcher shards.

    Typed signatures: the checked arguments are annotated with the value-restricted
    type variables of ``kpurgatory._typing`` (``StrArg``, ``IntArg``, ``BoolArg``, and
    ``_TimerArg`` here): a user's checker accepts exactly ``str``, ``int``, ``bool``,
    ``SystemTimer``, while mypyc compiles them as ``object`` and leaves the checks to the
    body, whose messages name the argument (R35) in the pure and the compiled build
    alike. ``try_complete_else_watch`` declares its typed signature with one
    ``typing.overload`` over an ``object`` implementation, for the same reason.
    """

    # The reference's parameters (and AsyncPurgatory's), deliberately, plus ``shards``.
    def __init__(
        self,
        purgatory_name: StrArg,
        timer: _TimerArg | None = None,
        broker_id: IntArg = 0,
        purge_interval: IntArg = 1000,
        reaper_enabled: BoolArg = True,
        timer_enabled: BoolArg = True,
        *,
        shards: IntArg = DEFAULT_SHARDS,
    ) -> None:
        self._name = require_str("purgatory_name", purgatory_name)
        if timer is not None and not isinstance(timer, SystemTimer):
            raise TypeError(f"timer must be an optimized SystemTimer, not {type(timer).__name__}")
        self._broker_id = require_int("broker_id", broker_id)
        self._purge_interval = require_at_least("purge_interval", purge_interval, 0)
        self._reaper_enabled = require_bool("reaper_enabled", reaper_enabled)
        self._timer_enabled = require_bool("timer_enabled", timer_enabled)
        self._num_shards = require_at_least("shards", shards, 1)
        if self._reaper_enabled and timer is not None and isinstance(timer.clock, ManualClock):
            raise ValueError(
                "reaper_enabled=True needs a real clock: the reaper would advance the "
                "ManualClock on its own; pass reaper_enabled=False and call advance_clock"
            )
        self._timer = SystemTimer(self._name) if timer is None else timer
        self._shards: tuple[_Shard[T], ...] = tuple(_Shard() for _ in range(self._num_shards))
        self._counters_lock = sync.new_lock()
        self._estimated_total_operations = 0
        self._estimate_resets = 0  # purges and let-gos that set the estimate (R30)
        self._unfinished = 0  # reached the watching step, not finished (R61)
        self._purge_when_idle = True  # R61 (False: Kafka's lazy purge only)
        self._num_purged = 0
        self._num_completed = 0
        self._num_expired = 0
        self._candidates: dict[int, T] = sync.new_shared_dict()  # no lock: single calls
        self._candidates_limit = 2 * self._purge_interval + 1024
        self._scan_all = False
        self._let_go_bound = 0  # R71: candidates unlinked per let-go or purge (0: all)
        self._let_go_owed = False  # R71: a bounded pass left candidates behind
        self._shutdown_lock = sync.new_lock()
        self._shutdown_finished = sync.new_condition(self._shutdown_lock)
        self._is_shut_down = False
        self._shutdown_done = False
        self._stop_reaper = threading.Event()
        self._reaper: threading.Thread | None = None
        if self._reaper_enabled:
            self._reaper = threading.Thread(
                target=self._reap,
                name=f"ExpirationReaper-{self._broker_id}-{self._name}",
                daemon=True,
            )
            self._reaper.start()

    # -- read-only state -------------------------------------------------------------

    @property
    def purgatory_name(self) -> str:
        """The name given at construction."""
        return self._name

    @property
    def timer(self) -> SystemTimer:
        """The timer operations wait in."""
        return self._timer

    @property
    def shards(self) -> int:
        """Number of watcher-list shards (extension; Kafka: 512)."""
        return self._num_shards

    @property
    def watched(self) -> int:
        """(key, operation) pairs in watcher lists, completed ones included (R27).

        O(shards), without locks: each shard keeps its count, and reading one int
        attribute is atomic, so each term is a value the shard really had; like the
        locked version, the sum is not a snapshot across shards taken at one instant.
        Reference: sum of list lengths under its one lock.
        """
        return sum([shard.count for shard in self._shards])

    @property
    def num_delayed(self) -> int:
        """Tasks scheduled in the timer: the pending operations (R28). O(1)."""
        return self._timer.size

    @property
    def watched_keys(self) -> int:
        """Keys that have a watcher list (empty lists are dropped, R26).

        O(shards), without locks, as ``watched`` (``len`` of a dict is atomic).
        """
        return sum([len(shard.watchers) for shard in self._shards])

    @property
    def estimated_total_operations(self) -> int:
        """The purge estimate: operations watched since the last purge, plus the timer size then."""
        with self._counters_lock:
            return self._estimated_total_operations

    @property
    def num_purged(self) -> int:
        """Completed operations removed from watcher lists by purges so far (R30)."""
        with self._counters_lock:
            return self._num_purged

    @property
    def num_completed(self) -> int:
        """Operations completed by this purgatory's own calls (a True from
        ``try_complete_else_watch``, or counted by ``check_and_complete``)."""
        with self._counters_lock:
            return self._num_completed

    @property
    def num_expired(self) -> int:
        """Operations submitted here whose expiry won (extension: ``run``'s
        ``force_complete`` returned True, just before ``on_expiration``)."""
        with self._counters_lock:
            return self._num_expired

    # -- operations ------------------------------------------------------------------

    @overload  # type: ignore[misc]  # callers' signature; see "Typed signatures" above
    def try_complete_else_watch(self, operation: T, watch_keys: Iterable[Hashable]) -> bool: ...

    def try_complete_else_watch(self, operation: object, watch_keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can; otherwise watch it on every key and time it.

        The sequence (R22): holding the operation's lock, ``try_complete``; if that fails,
        watch the operation on each distinct key while it is not completed (each append
        under that key's shard lock), count it once in the purge estimate, and
        ``try_complete`` again. Then, without the lock: if still not completed, add it
        to the timer (when ``timer_enabled``), and cancel that entry if it completed
        meanwhile. Returns True iff this call completed the operation (R23); at most
        once per operation (R34). Cost: O(1) per key plus the timer add. Reference
        equivalent: same sequence on one global lock.
        """
        cls = type(operation)
        if cls not in _KNOWN_OPERATION_TYPES:  # a set lookup before the ABC isinstance
            if not isinstance(operation, DelayedOperation):
                raise TypeError(
                    f"operation must be an optimized DelayedOperation, not {cls.__name__}"
                )
            if len(_KNOWN_OPERATION_TYPES) < _KNOWN_TYPES_LIMIT:
                _KNOWN_OPERATION_TYPES.add(cls)
        operation = cast(T, operation)  # checked above (or its class was)
        keys = _watch_keys(watch_keys)
        if self._is_shut_down:
            raise RuntimeError(f"purgatory {self._name!r} is shut down")
        if not operation._claim_submission(self):
            raise ValueError(
                f"operation {operation!r} was already passed to try_complete_else_watch"
            )
        if self._submit(operation, keys):
            with self._counters_lock:
                self._num_completed += 1
            return True
        return False

    def _submit(self, operation: T, keys: tuple[Hashable, ...]) -> bool:
        """R22 under the operation's lock, step for step as the reference's ``_submit``.

        The reference logs each step's undo in an ``UndoLog``; here that log is inlined as
        what ``_fail`` needs to know (counted as unfinished, keys watched, counted in the
        estimate), so a submission allocates no log, and the reference's two context
        managers are written out as ``try`` blocks. Cost: O(1) per key plus the timer add."""
        watched = 0
        entered = False
        estimated = -1  # the estimate's resets when it counted the operation (R30)
        lock = operation._lock
        try:
            lock.acquire()
        except BaseException:  # the lock failed before anything changed: no claim (R54)
            operation._release_submission()
            raise
        try:
            if operation._abandoned:  # abandoned between the claim and the lock (R40)
                return False
            if operation._try_complete_pending:  # clear (R41); False: no lock round trip
                with operation._flags:
                    operation._try_complete_pending = False
            if operation.try_complete():
                return True
            entered = self._enter(operation, keys)
            watched = self._watch(operation, keys)
            with self._counters_lock:
                self._estimated_total_operations += 1
                estimated = self._estimate_resets
            if operation.try_complete():
                return True
            self._time(operation)
        except BaseException as exc:
            self._fail(operation, exc, keys[:watched], estimated, entered)
            raise
        finally:
            lock.release()
        if not operation._try_complete_pending:  # a knock found the lock held: ours (R41)
            return False
        try:  # part of the submission (R54)
            if operation._safe_try_complete_for(self):
                return True
            if self._is_shut_down and not operation._completed:  # by its callback (R64)
                raise RuntimeError(f"purgatory {self._name!r} is shut down")
            return False
        except BaseException as exc:
            with operation._lock:
                self._fail(operation, exc, keys[:watched], estimated, entered)
            raise

    def _fail(
        self,
        operation: T,
        exc: BaseException,
        watched: tuple[Hashable, ...],
        estimated: int,
        entered: bool,
    ) -> None:
        """A step of the submission raised ``exc``; the operation's lock is held. Roll it
        back unless the operation finished (its ``on_complete`` ran, R38) or is no longer
        submitted here; a refusal caused by a shutdown meanwhile says so (R64).
        ``estimated``: the estimate's resets when the submission counted the operation
        (-1: not counted); its one is taken back only if no reset came since (R30).
        Reference equivalent: ``_undone_on_error`` unwinding the ``UndoLog``."""
        if not operation._completed and operation._owner is self:
            self._unwatch_keys(operation, watched)
            if estimated >= 0:
                with self._counters_lock:
                    if self._estimate_resets == estimated:
                        self._estimated_total_operations -= 1
            TimerTask.cancel(operation)
            operation._release_submission()
            if entered:
                self._left_watching(operation)
        if isinstance(exc, RuntimeError) and self._is_shut_down:
            raise RuntimeError(f"purgatory {self._name!r} is shut down") from exc

    def _enter(self, operation: T, keys: tuple[Hashable, ...]) -> bool:
        """Count the operation as unfinished if it is (R61), then give it its keys (a
        ``force_complete`` reads them to know it is watched); True iff counted.
        Reference equivalent: ``_enter``."""
        if operation._completed:
            operation._watch_keys = keys
            return False
        with self._counters_lock:  # before its keys are set: a finish sees it
            self._unfinished += 1
            operation._counted = True
        operation._watch_keys = keys
        if operation._completed:  # finished while being counted: nobody else saw it
            self._left_watching(operation)
        return True

    def _watch(self, operation: T, keys: tuple[Hashable, ...]) -> int:
        """Watch the operation on each key while it is unfinished (R24, KAFKA-18027);
        return how many keys it was watched on. Reference equivalent: ``_watch``."""
        shards = self._shards
        num_shards = self._num_shards
        op_id = id(operation)
        watched = 0
        for key in keys:
            if operation._completed:
                break
            shard = shards[abs(hash(key)) % num_shards]
            with shard.lock:
                watchers = shard.watchers.get(key)
                if watchers is None:
                    watchers = shard.watchers[key] = WatcherList(key)
                watchers.ops[op_id] = operation
                shard.count += 1
            watched += 1
        if watched and operation._completed:  # completed meanwhile by a lock-free caller,
            self._note_completed(operation)  # maybe before its last watch: its finisher's
            self._let_go_if_idle()  # let-go (R61) may have missed a watch
        return watched

    def _time(self, operation: T) -> None:
        """Add the operation to the timer unless it finished, timers are off (R33) or
        ``cancel_for_key`` took it out from its own callback (R66). Reference
        equivalent: ``_time``."""
        if operation._completed:
            return
        if self._timer_enabled and not operation._untimed:
            self._timer.add(operation)
            if operation._completed:  # completed meanwhile (lock-free, or run inline)
                TimerTask.cancel(operation)
                return
        if self._is_shut_down:  # by its own callback, or the add's hand-over (R64)
            raise RuntimeError(f"purgatory {self._name!r} is shut down")

    def _left_watching(self, operation: T) -> None:
        """``operation`` no longer counts as unfinished, if it did (a watched operation's
        winning ``force_complete``, an abandon, a rollback, a submission that finds it
        finished; its flag, under the counters lock, makes them agree on who uncounts
        it). At none left, unlink every finished one at once (R61): O(keys) per
        candidate, amortized O(1) per operation. Reference equivalent: ``_left_watching``
        (a scan of every list)."""
        with self._counters_lock:
            if not operation._counted:
                return
            operation._counted = False
            self._unfinished -= 1
            if not self._idle():
                return
        self._let_go()

    def _let_go_if_idle(self) -> None:
        """R61 for a submission whose operation finished while it was being watched: its
        finisher's let-go may have run before the last watch, so with no unfinished
        operation left, let go again. Reference equivalent: same."""
        with self._counters_lock:
            if not self._idle():
                return
        self._let_go()

    def _idle(self) -> bool:
        """Counters lock held: if no operation is unfinished (and R61 is on), reset the
        estimate as a purge does (R30) and return True: the caller lets go."""
        if self._unfinished or not self._purge_when_idle:
            return False
        self._estimated_total_operations = self._timer.size
        self._estimate_resets += 1
        return True

    def _let_go(self) -> None:
        """Unlink every finished operation (R61), as a purge pass."""
        purged = self._purge_pass()
        if purged:
            with self._counters_lock:
                self._num_purged += purged

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete every operation watched on ``key``; return how many this call completed.

        Snapshot the key's list under its shard lock (no key is created), then visit the
        snapshot in watch order with no purgatory lock held: an operation already
        completed is unlinked and not counted; otherwise ``safe_try_complete``, and if it
        returns True it is unlinked and counted (R25). The list is dropped if it empties
        and is still the mapped one (R26). Cost: O(n) for n watched ops plus their
        ``try_complete``. Reference equivalent: same on one lock, unlink by list scan.
        """
        shard = self._shards[_shard_index(key, self._num_shards)]
        with shard.lock:
            watchers = shard.watchers.get(key)
            if watchers is None:
                return 0
            snapshot = list(watchers.ops.values())
        completed = 0
        errors: list[BaseException] | None = None
        for operation in snapshot:
            try:
                if operation._completed:
                    self._unwatch(shard, watchers, operation)
                elif operation._safe_try_complete_for(self):
                    completed += 1
                    self._unwatch(shard, watchers, operation)
            except BaseException as exc:  # the other operations are tried first (R53)
                if errors is None:
                    errors = []
                errors.append(exc)
                if operation._completed:  # its on_complete raised: unlinked as completed
                    self._unwatch(shard, watchers, operation)
        if completed:
            with self._counters_lock:
                self._num_completed += completed
        if errors is not None:
            raise_collected(errors, f"check_and_complete({key!r})")
        return completed

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching ``key``: cancel each operation's timer entry and return them (R29).

        The operations are neither completed nor expired and stay on their other keys;
        the list is in watch order and includes completed ones. Each timer entry is
        cancelled under the operation's lock, so a submission still under way has added
        its entry first (R29, R22). O(n). Reference equivalent: ``cancel_for_key``.
        """
        shard = self._shards[_shard_index(key, self._num_shards)]
        with shard.lock:
            watchers = shard.watchers.pop(key, None)
            if watchers is None:
                return []
            operations = list(watchers.ops.values())
            watchers.ops.clear()
            shard.count -= len(operations)
        errors: list[BaseException] | None = None
        for operation in operations:
            try:
                with operation._lock:
                    TimerTask.cancel(operation)
                    operation._untimed = True  # its submission, if under way, adds none (R66)
                # A maybe_try_complete that found the lock held left its attempt here (R55).
                if operation._try_complete_pending and not operation._completed:
                    operation._safe_try_complete_for(self)
            except BaseException as exc:  # the other operations are handled first (R53)
                if errors is None:
                    errors = []
                errors.append(exc)
        if errors is not None:
            raise_collected(errors, f"cancel_for_key({key!r})")
        return operations

    @overload  # type: ignore[misc]  # callers' signature; see "Typed signatures" above
    def abandon(self, operation: T) -> bool: ...

    def abandon(self, operation: object) -> bool:
        """Give up on a submitted operation: it will never complete or expire (R40).

        Holding the operation's lock, mark it finished without ``on_complete`` or
        ``on_expiration``, cancel its timer entry (O(1)) and unlink it from each of its
        keys (O(1) per key). True iff this call abandoned a pending operation; False if
        it had completed, expired or been abandoned already. ``ValueError`` if it was
        never submitted here, ``TypeError`` if it is not an optimized operation.
        ``operation.cancel()`` on a submitted operation calls this. Reference
        equivalent: ``DelayedOperationPurgatory.abandon`` (unlink by list scan).
        """
        if not isinstance(operation, DelayedOperation):
            raise TypeError(
                f"operation must be an optimized DelayedOperation, not {type(operation).__name__}"
            )
        operation = cast(T, operation)  # checked above
        if operation._owner is not self:
            raise ValueError(f"operation {operation!r} was not submitted to {self._name!r}")
        return self._abandon_submitted(operation)

    def _abandon_submitted(self, operation: T) -> bool:
        """``abandon`` without the argument checks (``cancel`` calls it, R56): False if the
        operation is finished or, by the time its lock is held, not submitted here."""
        with operation._lock:
            if operation._owner is not self or not operation._abandon():
                return False
            keys = operation._watch_keys
            if keys is not None:
                self._unwatch_keys(operation, keys)
                self._left_watching(operation)
        return True

    def advance_clock(self, timeout_ms: IntArg, max_entries: IntArg | None = None) -> None:
        """One reaper step: ``timer.advance_clock(timeout_ms)``, then purge if due (R30).

        ``max_entries``: a bounded drain (R73), ``timer.advance_clock(timeout_ms,
        max_entries)``; the timer's ``drain_pending`` says whether it left work due.

        ``RuntimeError`` after ``shutdown``.
        """
        if max_entries is not None:
            require_at_least("max_entries", max_entries, 1)
        require_at_least("timeout_ms", timeout_ms, 0)
        if self._is_shut_down:
            raise RuntimeError(f"purgatory {self._name!r} is shut down")
        if max_entries is None:
            self._timer.advance_clock(timeout_ms)
        else:
            self._timer.advance_clock(timeout_ms, max_entries)
        self._purge_if_due()

    def shutdown(self) -> None:
        """Refuse new calls, stop the reaper and close the timer (R32, R39): idempotent.

        Returns once the purgatory is shut down (later submissions and advances raise
        ``RuntimeError``, the timer hands nothing more over, the reaper starts no further
        step); a concurrent caller returns only then too. It does not wait for a task
        already handed over, which may need a lock the caller holds:
        ``await_termination`` does. Pending operations are neither completed nor expired.
        Reference equivalent: ``DelayedOperationPurgatory.shutdown``.
        """
        # Deliberately the reference's shutdown, line for line (one protocol, R31, R39): the
        # implementations share no class, and this is the part where no structure differs.
        with self._shutdown_lock:
            if self._is_shut_down:
                while not self._shutdown_done:
                    self._shutdown_finished.wait()
                return
            self._is_shut_down = True
        try:
            self._stop_reaper.set()
            self._timer.wakeup()
            self._timer.close()
        finally:
            with self._shutdown_lock:
                self._shutdown_done = True
                self._shutdown_finished.notify_all()

    def await_termination(self, timeout: float | None = None) -> bool:
        """After ``shutdown``, wait up to ``timeout`` seconds (None: no limit) for the
        reaper thread to exit and the timer's own executor to finish (R39).

        True iff both have; False at once before ``shutdown``, and from the reaper or
        executor thread itself. Reference equivalent: same.
        """
        return await_purgatory_termination(self._is_shut_down, self._reaper, self._timer, timeout)

    # Deliberately alike the optimized timer's and _lifecycle.StopOnExit's (the reference's)
    # context manager: one API, and a mypyc-compiled class cannot derive from StopOnExit.
    def __enter__(self) -> DelayedOperationPurgatory[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Shut down, then wait for the reaper and executor (``await_termination``)."""
        self.shutdown()
        self.await_termination()

    def __repr__(self) -> str:
        return (
            f"DelayedOperationPurgatory({self._name!r}, watched={self.watched}, "
            f"num_delayed={self.num_delayed})"
        )

    # -- invariants ------------------------------------------------------------------

    def _check(self) -> None:
        """Assert the purgatory's representation invariants, then the timer's.

        Every key lies in the shard its hash selects, is mapped to a list for that key,
        no mapped list is empty or due for a rebuild, each list's dict keys are the ids of
        its operations,
        each shard's count equals its watched pairs, every completed operation still
        watched is a purge candidate (unless the next purge scans everything), and the
        counters are non-negative.
        """
        for index, shard in enumerate(self._shards):
            with shard.lock:
                pairs = 0
                for key, watchers in shard.watchers.items():
                    if abs(hash(key)) % self._num_shards != index:
                        raise AssertionError(f"key {key!r} is in shard {index}, not its own")
                    if watchers.key is not key and watchers.key != key:
                        raise AssertionError(f"key {key!r} maps to the list of {watchers.key!r}")
                    if not watchers.ops:
                        raise AssertionError(f"key {key!r} maps to an empty watcher list")
                    if watchers.unlinked > 2 * len(watchers.ops) + 64:
                        raise AssertionError(f"key {key!r}'s list was not rebuilt after pops")
                    for op_id, operation in watchers.ops.items():
                        if op_id != id(operation):
                            raise AssertionError(f"{operation!r} is filed under a wrong id")
                        if (
                            operation._completed
                            and not operation._abandoned
                            and not self._scan_all
                            and op_id not in self._candidates
                        ):
                            raise AssertionError(
                                f"completed {operation!r} is watched but not a purge candidate"
                            )
                    pairs += len(watchers.ops)
                if pairs != shard.count:
                    raise AssertionError(f"shard {index} counts {shard.count}, holds {pairs}")
        with self._counters_lock:
            if min(self._estimated_total_operations, self._num_purged, self._num_completed) < 0:
                raise AssertionError("a purgatory counter is negative")
        self._timer._check()

    # -- internals -------------------------------------------------------------------

    def _count_expired(self) -> None:
        """One more expiry won by an operation submitted here (its ``run`` calls this)."""
        with self._counters_lock:
            self._num_expired += 1

    def _unwatch_keys(self, operation: T, keys: tuple[Hashable, ...]) -> None:
        """Unlink ``operation`` from the watcher list of each key in ``keys`` (if there)."""
        for key in keys:
            shard = self._shards[abs(hash(key)) % self._num_shards]
            with shard.lock:
                watchers = shard.watchers.get(key)
            if watchers is not None:
                self._unwatch(shard, watchers, operation)

    def _unwatch(self, shard: _Shard[T], watchers: WatcherList[T], operation: T) -> None:
        """Unlink ``operation`` from ``watchers``; drop the list if empty and still mapped.

        A completed one-key operation is then watched nowhere: it leaves the purge
        candidates too (they must not keep it alive)."""
        op_id = id(operation)
        with shard.lock:
            if watchers.ops.pop(op_id, None) is not None:
                shard.count -= 1
                watchers.note_unlinked(1)
            if not watchers.ops and shard.watchers.get(watchers.key) is watchers:
                del shard.watchers[watchers.key]
        keys = operation._watch_keys
        if operation._completed and keys is not None and len(keys) == 1:
            self._candidates.pop(op_id, None)

    def _note_completed(self, operation: T) -> None:
        """Record a completed operation that may still be watched (its ``force_complete``
        calls this): a purge candidate. Over the limit, drop them all and scan next time."""
        candidates = self._candidates
        candidates[id(operation)] = operation
        if len(candidates) > self._candidates_limit and not self._let_go_bound:
            self._scan_all = True  # set before clearing: no candidate is lost unscanned
            candidates.clear()

    def _purge_if_due(self) -> None:
        with self._counters_lock:
            delayed = self._timer.size
            if self._estimated_total_operations - delayed <= self._purge_interval:
                return
            self._estimated_total_operations = delayed
            self._estimate_resets += 1
        purged = self._purge_pass()
        if purged:
            with self._counters_lock:
                self._num_purged += purged
            logger.debug("purgatory %r purged %d completed operations", self._name, purged)

    def _purge_pass(self) -> int:
        """One purge or let-go pass (R30, R61): a scan of every list if the candidates
        overflowed or a key failed, else the candidates; with ``_let_go_bound`` set (an
        ``AsyncPurgatory``'s, R71) at most that many candidates, the rest left for
        ``_let_go_step`` (``_let_go_owed``). Returns the pairs unlinked."""
        bound = self._let_go_bound
        purged = self._purge_scan() if self._scan_all else self._purge_candidates(bound)
        if bound:  # a scan took every candidate: owed only if more came meanwhile
            self._let_go_owed = bool(self._candidates)
        return purged

    def _let_go_step(self) -> bool:
        """Continue a bounded pass that left candidates (R71): one more pass of at most
        ``_let_go_bound`` candidates; True iff some are still left. O(bound x keys)."""
        if not self._let_go_owed:
            return False
        purged = self._purge_pass()
        if purged:
            with self._counters_lock:
                self._num_purged += purged
        return self._let_go_owed

    def _purge_candidates(self, limit: int = 0) -> int:
        """Unlink each purge candidate from the lists of its keys; return the pairs unlinked.

        Takes the candidates one ``popitem`` at a time (each one atomic C call, so two
        concurrent passes, or a pass and an ``_unwatch``, never take the same record), at
        most as many as there were on entry: a candidate recorded meanwhile may stay for
        the next purge, and a steady stream of completions cannot keep this loop going
        (and at most ``limit``, if given, R71). One pass may still pop the same operation
        twice: a submission or a completing call may record it again after this pass took
        it (R61's let-go runs inside ``force_complete``, while the submission that watches
        the operation notes it after its last watch). The pass unlinks it once: every key
        is unlinked after the last pop, so after every watch either record speaks for.
        Not a
        ``copy()``: copying a dict costs O(its table), which keeps the size of its largest
        burst after pops emptied it (9 us per purge on a free-threaded 3.13 for a dict
        holding one entry), while ``popitem`` takes from the end and shrinks what later
        calls look at. The candidates' ids are grouped by key first, so each key's shard
        lock is taken once per purge (operations share keys: Kafka's requests on a few
        partitions). O(keys) per candidate. A key that raises is skipped (R67,
        ``_key_failed``)."""
        candidates = self._candidates
        taken: dict[int, T] = {}  # keeps the operations alive: their ids stay theirs
        by_key: dict[Hashable, list[int]] = {}
        interrupt: BaseException | None = None
        count = len(candidates)
        for _ in range(count if not limit or limit > count else limit):
            try:
                op_id, operation = candidates.popitem()
            except KeyError:  # emptied meanwhile by an _unwatch or another purge
                break
            if op_id in taken:  # recorded again after this pass took it: grouped already
                continue
            taken[op_id] = operation
            keys = operation._watch_keys
            if keys is not None:
                for key in keys:
                    try:  # a local dict: only the key can raise here
                        ids = by_key.get(key)
                        if ids is None:
                            by_key[key] = [op_id]
                        else:
                            ids.append(op_id)
                    except BaseException as exc:
                        interrupt = self._key_failed(key, exc) or interrupt
        purged = 0
        for key, ids in by_key.items():
            try:
                purged += self._unlink_ids(key, ids)
            except KeyFailedError as failed:
                interrupt = self._key_failed(key, failed.error) or interrupt
        if interrupt is not None:
            raise interrupt
        return purged

    def _unlink_ids(self, key: Hashable, ids: list[int]) -> int:
        """Unlink the operations ``ids`` from ``key``'s list; drop it if that empties it.
        The key is hashed and compared before anything changes (``KeyFailedError``, R67)."""
        try:  # ``_sweep.keyed`` inlined (no call per key): the key's own hash
            shard = self._shards[abs(hash(key)) % self._num_shards]
        except BaseException as exc:
            raise KeyFailedError(exc) from exc
        with shard.lock:
            try:  # ... and its equality with the keys of the shard
                watchers = shard.watchers.get(key)
                if watchers is None:
                    return 0
                ops = watchers.ops
                present = [op_id for op_id in ids if op_id in ops]
                if len(present) == len(ops):
                    shard.watchers.pop(key, None)
            except BaseException as exc:
                raise KeyFailedError(exc) from exc
            for op_id in present:
                del ops[op_id]
            shard.count -= len(present)
            if present and ops:
                watchers.note_unlinked(len(present))
            return len(present)

    def _key_failed(self, key: Hashable, exc: BaseException) -> BaseException | None:
        """A key's ``__hash__``/``__eq__`` raised in a purge (R67): its list stays as it
        was and the next purge scans every list; log it. Returns ``exc`` if it must still
        propagate (not an ``Exception``), after the rest of the purge."""
        self._scan_all = True
        return key_failed_in_purge(logger, self._name, key, exc)

    def _purge_scan(self) -> int:
        """Unlink every completed operation from every list (Kafka's scan, after the
        candidates overflowed or a key failed); return the pairs unlinked. O(watched)."""
        self._scan_all = False  # cleared first: an overflow meanwhile asks for another scan
        self._candidates.clear()
        purged = 0
        interrupt: BaseException | None = None
        for shard in self._shards:
            with shard.lock:  # no ``continue`` inside a ``with``: mypyc rejects it
                for key, watchers in list(shard.watchers.items()):
                    ops = watchers.ops
                    done = [op_id for op_id, op in ops.items() if op._completed]
                    try:
                        if len(done) == len(ops):
                            keyed(shard.watchers.pop, key, None)
                    except KeyFailedError as failed:
                        interrupt = self._key_failed(key, failed.error) or interrupt
                        done = []
                    for op_id in done:
                        del ops[op_id]
                    purged += len(done)
                    shard.count -= len(done)
                    if done and ops:
                        watchers.note_unlinked(len(done))
        if interrupt is not None:
            raise interrupt
        return purged

    def _reap(self) -> None:
        run_reaper(self._stop_reaper, self._timer, self._reaper_step, self._name, logger)

    def _reaper_step(self) -> None:
        """One iteration of the reaper loop (R31): wait up to 200 ms for due tasks, then
        purge. Reference equivalent: ``_reaper_step``."""
        self._timer.advance_clock(REAPER_STEP_MS)
        self._purge_if_due()
