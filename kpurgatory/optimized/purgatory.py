"""The optimized ``DelayedOperationPurgatory``: watcher lists sharded by key hash (Kafka 2.2+).

Same API and behaviour as ``kpurgatory.reference.purgatory``: both are the protocol of
``kpurgatory.protocol.Purgatory`` (R22's submission and its undo log, the sweeps,
abandon, purge and let-go, shutdown) over a watcher store; this module is the sharded
store (reference equivalent: a dict of lists under one lock), plus cheaper argument
checks, ``_check`` and the purge candidates. Structure
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

Rules: R21-R23, R26, R27, R30, R31, R34, R35, R37, R40, R61, R67, R71.
"""

from __future__ import annotations

import logging
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
from kpurgatory._lifecycle import REAPER_STEP_MS
from kpurgatory._sweep import KeyFailedError, key_failed_in_purge, keyed
from kpurgatory._typing import BoolArg, IntArg, StrArg, TypeVar
from kpurgatory.clock import ManualClock
from kpurgatory.optimized._mypyc import mypyc_attr
from kpurgatory.optimized.operation import DelayedOperation
from kpurgatory.optimized.timer import SystemTimer
from kpurgatory.protocol import COMPLETED, FINISHED, Purgatory
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
class DelayedOperationPurgatory(Purgatory[T, tuple[_Shard[T], WatcherList[T]]]):
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
        name = require_str("purgatory_name", purgatory_name)
        if timer is not None and not isinstance(timer, SystemTimer):
            raise TypeError(f"timer must be an optimized SystemTimer, not {type(timer).__name__}")
        broker = require_int("broker_id", broker_id)
        interval = require_at_least("purge_interval", purge_interval, 0)
        reaper = require_bool("reaper_enabled", reaper_enabled)
        timed = require_bool("timer_enabled", timer_enabled)
        self._num_shards = require_at_least("shards", shards, 1)
        if reaper and timer is not None and isinstance(timer.clock, ManualClock):
            raise ValueError(
                "reaper_enabled=True needs a real clock: the reaper would advance the "
                "ManualClock on its own; pass reaper_enabled=False and call advance_clock"
            )
        self._shards: tuple[_Shard[T], ...] = tuple(_Shard() for _ in range(self._num_shards))
        self._num_expired = 0
        self._candidates: dict[int, T] = sync.new_shared_dict()  # no lock: single calls
        self._candidates_limit = 2 * interval + 1024
        self._scan_all = False
        self._let_go_bound = 0  # R71: candidates unlinked per let-go or purge (0: all)
        self._let_go_owed = False  # R71: a bounded pass left candidates behind
        shutdown_lock = sync.new_lock()
        super().__init__(
            name, SystemTimer(name) if timer is None else timer, broker, interval, reaper,
            timed, sync.new_lock(), shutdown_lock, sync.new_condition(shutdown_lock),
        )  # fmt: skip

    # -- read-only state -------------------------------------------------------------

    @property
    def timer(self) -> SystemTimer:
        """The timer operations wait in."""
        return cast(SystemTimer, self._timer)  # the one given or made in __init__

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
    def watched_keys(self) -> int:
        """Keys that have a watcher list (empty lists are dropped, R26).

        O(shards), without locks, as ``watched`` (``len`` of a dict is atomic).
        """
        return sum([len(shard.watchers) for shard in self._shards])

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

        The sequence is the protocol's (R22, ``kpurgatory.protocol.Purgatory._submit``),
        all under the operation's lock, the timer add included: ``try_complete``; if that
        fails, watch the operation on each distinct key while it is not completed (each
        append under that key's shard lock), count it once in the purge estimate,
        ``try_complete`` again, and if still not completed add it to the timer (when
        ``timer_enabled``). Returns True iff this call completed the operation (R23); at
        most once per operation (R34). Reference equivalent: the same method; here the
        operation's class check is cached per class and the keys are checked in one C
        call. Cost: O(1) per key plus the wheel's O(1) add.
        """
        cls = type(operation)
        if cls not in _KNOWN_OPERATION_TYPES:  # a set lookup before the ABC isinstance
            if not isinstance(operation, DelayedOperation):
                raise TypeError(
                    f"operation must be an optimized DelayedOperation, not {cls.__name__}"
                )
            if len(_KNOWN_OPERATION_TYPES) < _KNOWN_TYPES_LIMIT:
                _KNOWN_OPERATION_TYPES.add(cls)
        return self._submit(cast(T, operation), _watch_keys(watch_keys))  # checked above

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
        owner: object = operation._owner
        if owner is not self:
            raise ValueError(f"operation {operation!r} was not submitted to {self._name!r}")
        return self._abandon_submitted(cast(T, operation))  # checked above

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
                            operation._state & COMPLETED
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
        self.timer._check()

    # -- internals -------------------------------------------------------------------

    def _count_expired(self) -> None:
        """One more expiry won by an operation submitted here (its ``run`` calls this)."""
        with self._counters_lock:
            self._num_expired += 1

    # -- the store: sharded watcher lists and purge candidates ----------------------

    def _watch_key(self, key: Hashable, operation: T) -> None:
        """Append ``operation`` to ``key``'s list under its shard lock. O(1).
        Reference equivalent: ``_watch_key`` (one lock for every list)."""
        shard = self._shards[abs(hash(key)) % self._num_shards]
        with shard.lock:
            watchers = shard.watchers.get(key)
            if watchers is None:
                watchers = shard.watchers[key] = WatcherList(key)
            watchers.ops[id(operation)] = operation
            shard.count += 1

    def _unwatch_key(self, key: Hashable, operation: T) -> None:
        """Unlink ``operation`` from ``key``'s watcher list (if there). O(1)."""
        shard = self._shards[abs(hash(key)) % self._num_shards]
        with shard.lock:
            watchers = shard.watchers.get(key)
        if watchers is not None:
            self._unlink((shard, watchers), operation)

    def _snapshot(self, key: Hashable) -> tuple[tuple[_Shard[T], WatcherList[T]], list[T]] | None:
        """``key``'s shard and list, and its operations in watch order; None if none.
        O(n) for n watched. Reference equivalent: a copy of the key's list."""
        shard = self._shards[_shard_index(key, self._num_shards)]
        with shard.lock:
            watchers = shard.watchers.get(key)
            if watchers is None:
                return None
            return (shard, watchers), list(watchers.ops.values())

    def _take_key(self, key: Hashable) -> list[T]:
        """Drop ``key``'s list and return its operations in watch order. O(n)."""
        shard = self._shards[_shard_index(key, self._num_shards)]
        with shard.lock:
            watchers = shard.watchers.pop(key, None)
            if watchers is None:
                return []
            operations = list(watchers.ops.values())
            watchers.ops.clear()
            shard.count -= len(operations)
        return operations

    def _unlink(self, handle: tuple[_Shard[T], WatcherList[T]], operation: T) -> None:
        """Unlink ``operation`` from the list ``handle`` names (its shard and the list
        ``_snapshot`` found); drop the list if empty and still mapped (R26). O(1).

        A completed one-key operation is then watched nowhere: it leaves the purge
        candidates too (they must not keep it alive)."""
        shard, watchers = handle
        op_id = id(operation)
        with shard.lock:
            if watchers.ops.pop(op_id, None) is not None:
                shard.count -= 1
                watchers.note_unlinked(1)
            if not watchers.ops and shard.watchers.get(watchers.key) is watchers:
                del shard.watchers[watchers.key]
        keys = operation._watch_keys
        if operation._state >= FINISHED and len(keys) == 1:
            self._candidates.pop(op_id, None)

    def _note_completed(self, operation: T) -> None:
        """Record a completed operation that may still be watched (its ``force_complete``
        calls this): a purge candidate. Over the limit, drop them all and scan next time."""
        candidates = self._candidates
        candidates[id(operation)] = operation
        if len(candidates) > self._candidates_limit and not self._let_go_bound:
            self._scan_all = True  # set before clearing: no candidate is lost unscanned
            candidates.clear()

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
                    done = [op_id for op_id, op in ops.items() if op._state >= FINISHED]
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
