"""Upstream Kafka's documented differences as behaviour: the reference with them switched on.

``kafka_model(ids)`` returns an implementation module equal to the reference except that
it behaves like upstream Kafka where each named difference
(``kpurgatory.spec.known_differences``) says Kafka differs. ``--allow`` compares a port
against these models (``kpurgatory.conformance.differences``), so an allowance excuses
exactly what that behaviour causes and everything else is still checked:

- ``kafka-stale-current-time``: the current time moves only to the due time of the
  latest "bucket" an ``advance_clock`` dequeued, never to the drain reading;
- ``kafka-flush-current-time``: while the tasks due at ``E`` are handed over the current
  time is ``E``; tasks they add that are due by the drain reading are drained later in
  the same call, as units of their own;
- ``kafka-advance-result``: ``advance_clock`` is True iff a bucket was dequeued (a due
  time reached by anything scheduled since the last drain, cancelled or moved included);
- ``kafka-negative-timeout``: a negative timeout drains without moving the clock;
- ``kafka-after-close``: a closed timer still schedules and advances; handing a task over
  raises ``RuntimeError`` (Kafka's ``RejectedExecutionException``) out of ``add`` or
  ``advance_clock``, and the rest of a bucket whose flush raised stays counted, never run;
- ``kafka-duplicate-keys``: an operation is watched once per occurrence of a key;
- ``kafka-after-shutdown``: a shut-down purgatory still watches, times and advances (an
  operation due at once, refused by the closed timer's executor, stays watched);
- ``kafka-resubmission``: a second submission is not refused (and is timed again, even
  after ``cancel_for_key``);
- ``kafka-cancel-keeps-watch``: ``cancel()`` on a submitted operation removes only its
  timer entry; it stays watched, and later checks may complete it;
- ``kafka-truncating-division``: due and current times round toward zero;
- ``kafka-lazy-purge``: finished operations stay linked until a check of their key or
  the periodic purge (R30) unlinks them (``cancel_for_key`` returns them too).

Kafka's buckets are modelled at the lowest level only (one bucket per due time, no
cascades): the due time of every task and the order of hand-overs are what a cascade
preserves, so no observation needs more. The model subclasses the reference and uses
its internals (it lives beside it, in the kit, for that reason); it is a model for
comparisons, not an implementation to use.
"""

from __future__ import annotations

import functools
import heapq
import types
from collections.abc import Hashable, Iterable
from typing import Any

from kpurgatory import reference
from kpurgatory._checks import watch_key_list
from kpurgatory.reference import timer as reference_timer
from kpurgatory.spec.arithmetic import expiration_ms, is_due, round_down
from kpurgatory.spec.known_differences import KNOWN_DIFFERENCES, resolve

__all__ = ["kafka_like", "kafka_model"]


def _trunc_down(ms: int, tick: int) -> int:
    """Java's ``ms - ms % tick``: rounds toward zero (up, for a negative ``ms``)."""
    return ms - (abs(ms) % tick) * (1 if ms >= 0 else -1)


class _KafkaBuckets:
    """Kafka's buckets for one timer: which bucket expirations sit in its delay queue.

    Kafka's ``TimingWheel`` puts an entry due at ``d`` into the lowest level whose span
    from that level's current time covers it, in the bucket of expiration ``d`` rounded
    down to the level's tick; a bucket enters the delay queue when its expiration is set.
    ``advanceClock`` dequeues every bucket expired by the drain reading, moves the wheels
    to each one's expiration and re-adds its entries (a cascade to a finer level, or due
    now). This is what ``advance_clock``'s result and Kafka's stale current time depend
    on, so the model keeps it beside the entries (which stay the reference's). Entries
    are the model's, identified by object; ``live(entry)`` says whether one is still
    scheduled (a cancelled or re-added entry leaves its bucket queued, as in Kafka).
    """

    def __init__(self, tick_ms: int, wheel_size: int, current_ms: int, floor: Any) -> None:
        self.wheel_size = wheel_size
        self.floor = floor  # (ms, tick) -> ms rounded as the port's arithmetic rounds
        self.levels: list[list[int]] = [[tick_ms, current_ms]]  # [tick, current time]
        self.buckets: dict[tuple[int, int], tuple[int, list[Any]]] = {}
        self.queue: list[tuple[int, int, int]] = []  # (expiration, level, slot), a heap

    @property
    def current_ms(self) -> int:
        """The lowest wheel's current time."""
        return self.levels[0][1]

    def add(self, entry: Any, due: int, *, force: bool = False) -> bool:
        """``TimingWheel.add``: False if due now (unless ``force``: the model bucketed it)."""
        level = 0
        while True:
            tick, current = self.levels[level]
            if due < current + tick and not force:
                return False
            if due < current + tick * self.wheel_size:
                expiration = self.floor(due, tick)
                key = (level, (expiration // tick) % self.wheel_size)
                old = self.buckets.get(key)
                if old is not None and old[0] == expiration:
                    old[1].append(entry)
                else:
                    entries = [entry] if old is None else [*old[1], entry]
                    self.buckets[key] = (expiration, entries)
                    heapq.heappush(self.queue, (expiration, *key))
                return True
            if level + 1 == len(self.levels):
                interval = tick * self.wheel_size
                self.levels.append([interval, self.floor(current, interval)])
            level += 1

    def advance(self, ms: int) -> None:
        """``TimingWheel.advanceClock``: each level moves once a whole tick of its own passed."""
        for level in self.levels:
            tick, current = level
            if ms < current + tick:
                return
            level[1] = ms = self.floor(ms, tick)

    def _due_buckets(self, now: int, dequeued: list[int]) -> Any:
        """Dequeue every bucket expired by ``now``, in expiration order, advancing the
        wheels to each; yield ``(key, expiration, entries)`` of the buckets still current
        (a stale queue entry is skipped). Each expiration dequeued goes to ``dequeued``."""
        while self.queue and self.queue[0][0] <= now:
            expiration, *where = heapq.heappop(self.queue)
            key = (where[0], where[1])
            bucket = self.buckets.pop(key, None)
            dequeued.append(expiration)
            self.advance(expiration)
            if bucket is None or bucket[0] != expiration:
                if bucket is not None:
                    self.buckets[key] = bucket
                continue
            yield key, expiration, bucket[1]

    def drain(self, now: int, live: Any) -> list[int]:
        """Dequeue every bucket expired by ``now`` and re-add its live entries; the
        expirations dequeued."""
        dequeued: list[int] = []
        for _, _, entries in self._due_buckets(now, dequeued):
            for entry in entries:
                if live(entry):
                    self.add(entry, entry.due)
        return dequeued

    def flush_until_due(self, now: int, live: Any) -> tuple[Any, list[int]]:
        """``drain`` on a closed timer: the first live entry a flush finds due is refused by
        the executor, so the flush stops there. Returns that entry (or None) and the
        expirations dequeued. The rest of its bucket stays in the bucket, which is no
        longer queued (a later entry of the same expiration joins it unqueued, as in
        Kafka); the buckets not yet dequeued stay queued."""
        dequeued: list[int] = []
        for key, expiration, entries in self._due_buckets(now, dequeued):
            for index, entry in enumerate(entries):
                if live(entry) and not self.add(entry, entry.due):
                    rest = [other for other in entries[index + 1 :] if live(other)]
                    if rest:
                        self.buckets[key] = (expiration, rest)
                    return entry, dequeued
        return None, dequeued


def kafka_like(names: str = "kafka") -> types.ModuleType:
    """``kafka_model`` of the differences ``names`` resolves to (``kafka`` or comma-separated
    ids; ``ValueError`` naming an unknown one)."""
    return kafka_model(frozenset(difference.id for difference in resolve(names)))


@functools.cache
def kafka_model(on: frozenset[str]) -> types.ModuleType:
    """The reference with the Kafka behaviours ``on`` (ids; see the module docstring).

    Cached: one module (and one set of classes) per combination."""
    unknown = on - {difference.id for difference in KNOWN_DIFFERENCES}
    if unknown:
        raise ValueError(f"kafka_model: unknown known differences {sorted(unknown)}")
    lock = reference_timer._STATE_LOCK

    class KafkaLikeTimer(reference.SystemTimer):
        """The reference timer with the timer differences in ``on``."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            if "kafka-truncating-division" in on:
                start = args[3] if len(args) > 3 else kwargs.get("start_ms")
                if isinstance(start, int):
                    self._current_time = _trunc_down(start, self.tick_ms)
            self._buckets = _KafkaBuckets(
                self.tick_ms, self.wheel_size, self._current_time, self._floor_to
            )

        def _due(self, delay_ms: int) -> int:
            expiration = expiration_ms(self.clock.now_ms(), delay_ms)
            if "kafka-truncating-division" in on:
                return _trunc_down(expiration, self.tick_ms)
            return round_down(expiration, self.tick_ms)

        def add(self, task: reference.TimerTask) -> None:
            if not isinstance(task, reference.TimerTask):
                raise TypeError(f"task must be a reference TimerTask, not {type(task).__name__}")
            with lock:
                if self.closed and "kafka-after-close" not in on:
                    raise RuntimeError(f"timer is closed; cannot add {task!r}")
                due = self._due(task.delay_ms)
                old = task._entry
                if old is not None:
                    old.timer._pending.pop(old, None)
                    task._entry = None
                if not is_due(due, self._current_time):
                    entry = reference_timer._Entry(self, task, due)
                    task._entry = entry
                    self._pending[entry] = None
                    self._buckets.add(entry, due, force=True)
                    return
            if self.closed:  # Kafka: RejectedExecutionException out of add, as out of a drain
                raise RuntimeError(f"executor is shut down; cannot run {task!r}")
            self._hand_over(task)

        def advance_clock(self, timeout_ms: int, max_entries: int | None = None) -> bool:
            if max_entries is not None:  # Kafka's advanceClock has no bounded form (R73)
                raise TypeError("the Kafka model has no bounded drain: max_entries must be None")
            if "kafka-negative-timeout" in on and isinstance(timeout_ms, int) and timeout_ms < 0:
                timeout_ms = 0
            if self.closed and "kafka-after-close" not in on:
                return super().advance_clock(timeout_ms)
            if timeout_ms < 0:
                return super().advance_clock(timeout_ms)  # the reference's ValueError
            with lock:
                now = self.clock.wait(self._condition, timeout_ms, self._next_due)
                before = self._current_time
            if self.closed:
                return self._drain_closed(now, before)
            handed = False
            dequeued: list[int] = []
            while True:
                with lock:
                    dequeued += self._buckets.drain(now, self._live)
                    due_entries = sorted(
                        (entry for entry in self._pending if is_due(entry.due, now)),
                        key=lambda entry: entry.due,
                    )
                    if not due_entries:
                        break
                    if "kafka-flush-current-time" in on:
                        first = due_entries[0].due
                        due_entries = [entry for entry in due_entries if entry.due == first]
                        self._current_time = max(self._current_time, first)
                    for entry in due_entries:
                        del self._pending[entry]
                    if "kafka-flush-current-time" not in on:  # the drain reading, as R2 says
                        self._current_time = max(self._current_time, self._floor(now))
                for entry in due_entries:
                    with lock:
                        if entry.task._entry is not entry:
                            continue
                        entry.task._entry = None
                    self._hand_over(entry.task)
                    handed = True
                if "kafka-flush-current-time" not in on:
                    break
            with lock:
                if "kafka-stale-current-time" in on:  # only to the dequeued buckets' expirations
                    self._current_time = max(before, self._buckets.current_ms)
                else:
                    self._current_time = max(self._current_time, self._floor(now))
                    self._buckets.advance(self._current_time)
            if "kafka-advance-result" in on:
                return bool(dequeued)
            return handed

        def _drain_closed(self, now: int, before: int) -> bool:
            """Kafka's ``advanceClock`` on a closed timer (``kafka-after-close``): buckets are
            dequeued and flushed as usual until an entry is due, whose hand-over the shut-
            down executor refuses (``RejectedExecutionException``, here ``RuntimeError``).
            That entry is gone; the rest of its bucket stays linked and counted but left the
            delay queue (stranded), and later buckets stay queued."""
            with lock:
                failed, dequeued = self._buckets.flush_until_due(now, self._live)
                if "kafka-stale-current-time" in on:
                    self._current_time = max(before, self._buckets.current_ms)
                else:
                    self._current_time = max(self._current_time, self._floor(now))
                    self._buckets.advance(self._current_time)
                if failed is not None:
                    del self._pending[failed]
                    failed.task._entry = None
            if failed is not None:
                raise RuntimeError(f"executor is shut down; cannot run {failed.task!r}")
            return "kafka-advance-result" in on and bool(dequeued)

        def _live(self, entry: Any) -> bool:
            return entry in self._pending and entry.task._entry is entry

        def _floor(self, ms: int) -> int:
            return self._floor_to(ms, self.tick_ms)

        @staticmethod
        def _floor_to(ms: int, tick: int) -> int:
            if "kafka-truncating-division" in on:
                return _trunc_down(ms, tick)
            return round_down(ms, tick)

    class KafkaLikePurgatory(reference.DelayedOperationPurgatory[reference.DelayedOperation]):
        """The reference purgatory with the purgatory differences in ``on``."""

        _timer_type = KafkaLikeTimer

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if "kafka-lazy-purge" in on:
                self._purge_when_idle = False  # only R30's periodic purge, as Kafka

        def try_complete_else_watch(
            self, operation: reference.DelayedOperation, watch_keys: Iterable[Hashable]
        ) -> bool:
            keys = list(watch_keys) if not isinstance(watch_keys, str | bytes) else None
            distinct = watch_key_list(watch_keys if keys is None else keys)
            if "kafka-duplicate-keys" in on and keys is not None:
                distinct = keys
            if self._is_shut_down and "kafka-after-shutdown" not in on:
                raise RuntimeError("purgatory is shut down")
            claimed = operation._claim_submission(self)
            if not claimed and "kafka-resubmission" not in on:
                raise ValueError(f"operation {operation!r} was already submitted")
            if not claimed:  # Kafka times a resubmission again, after a cancel_for_key too
                operation._untimed = False
            return self._submit(operation, tuple(distinct))  # the protocol's R22 sequence

        def _time(self, operation: Any, undo: Any) -> None:
            try:
                super()._time(operation, undo)
            except RuntimeError:
                if "kafka-after-close" in on and self._timer.closed:
                    # Kafka undoes nothing: the executor refused an operation due at once,
                    # which stays watched and counted in the estimate
                    undo.clear()
                raise

        def _refuse_if_shut_down(self) -> None:
            if "kafka-after-shutdown" not in on:  # Kafka refuses nothing after shutdown
                super()._refuse_if_shut_down()

        def advance_clock(self, timeout_ms: int, max_entries: int | None = None) -> None:
            if max_entries is not None:  # Kafka's advanceClock has no bounded form (R73)
                raise TypeError("the Kafka model has no bounded drain: max_entries must be None")
            negative = isinstance(timeout_ms, int) and timeout_ms < 0
            if negative and "kafka-negative-timeout" in on:
                timeout_ms = 0
            if self._is_shut_down and "kafka-after-shutdown" in on and timeout_ms >= 0:
                self._timer.advance_clock(timeout_ms)
                self._purge_if_due()
                return
            super().advance_clock(timeout_ms)

    class KafkaLikeOperation(reference.DelayedOperation):
        """The reference operation with Kafka's cancel when ``kafka-cancel-keeps-watch`` is on."""

        def cancel(self) -> None:
            if "kafka-cancel-keeps-watch" in on:
                self._unschedule()  # TimerTask.cancel: the watcher lists keep it
                return
            super().cancel()

    module = types.ModuleType("kafka_model:" + ",".join(sorted(on)))
    module.TimerTask = reference.TimerTask  # type: ignore[attr-defined]
    module.DelayedOperation = KafkaLikeOperation  # type: ignore[attr-defined]
    module.SystemTimer = KafkaLikeTimer  # type: ignore[attr-defined]
    module.DelayedOperationPurgatory = KafkaLikePurgatory  # type: ignore[attr-defined]
    return module
