"""Upstream Kafka's documented differences as behaviour: the reference with them switched on.

``kafka_model(ids)`` returns an implementation module equal to the reference except that
it behaves like upstream Kafka where each named difference
(``kpurgatory.spec.known_differences``) says Kafka differs. ``--allow`` compares a port
against these models (``kpurgatory.conformance.differences``), so an allowance excuses
exactly what that behaviour causes and everything else is still checked:

- ``kafka-stale-current-time``: the current time moves only to the expiration of the
  buckets an ``advance_clock`` dequeued, never to the drain reading;
- ``kafka-flush-current-time``: the drain goes bucket by bucket, as Kafka's
  ``SystemTimer.advanceClock``: it dequeues one bucket, moves the wheels to that bucket's
  expiration, flushes it (each entry, in the bucket's order, is handed over if due on
  the level it reaches, else put back in a finer bucket), then dequeues the next. While
  a bucket is flushed the current time is its expiration: a task added meanwhile (by a
  task running inline) is judged against it, bucketed, and handed over later in the same
  call as a unit of its own;
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
- ``kafka-truncating-division``: due and current times round toward zero, and "due at
  once" is judged on every wheel level ``add`` walks through (with a negative start or
  clock an upper level, rounded toward zero, can be past an expiration the lowest is not);
- ``kafka-lazy-purge``: finished operations stay linked until a check of their key or
  the periodic purge (R30) unlinks them (``cancel_for_key`` returns them too).

Kafka's wheel is modelled whole (``kpurgatory.conformance.kafka_wheel``): every level,
every bucket in insertion order, the delay queue. The model's scheduled tasks are still
the reference's (its pending entries, its ``size``, ``next_due_time`` and hand-over);
the wheel decides when and in which order they are handed over where a difference says
Kafka's buckets do. The model subclasses the reference and uses its internals (it lives
beside it, in the kit, for that reason); it is a model for comparisons, not an
implementation to use. The classes below read the differences switched on from their
class attribute ``kafka_on``; ``kafka_model`` makes one set of subclasses per set.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Hashable, Iterable
from typing import Any, ClassVar

from kpurgatory import reference
from kpurgatory._checks import watch_key_list
from kpurgatory._sweep import raise_collected
from kpurgatory.conformance.kafka_wheel import Bucket, KafkaWheel, WheelEntry, trunc_down
from kpurgatory.reference import timer as reference_timer
from kpurgatory.spec.arithmetic import expiration_ms, is_due, round_down
from kpurgatory.spec.known_differences import KNOWN_DIFFERENCES, resolve

__all__ = [
    "KafkaLikeOperation",
    "KafkaLikePurgatory",
    "KafkaLikeTimer",
    "kafka_like",
    "kafka_model",
]

_LOCK = reference_timer._STATE_LOCK
_Entry = reference_timer._Entry


class KafkaLikeTimer(reference.SystemTimer):
    """The reference timer with the timer differences in ``kafka_on`` (module docstring)."""

    kafka_on: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        truncating = "kafka-truncating-division" in self.kafka_on
        if truncating:
            start = args[3] if len(args) > 3 else kwargs.get("start_ms")
            start = self.clock.now_ms() if start is None else start
            self._current_time = trunc_down(start, self.tick_ms)
        self._wheel: KafkaWheel[_Entry] = KafkaWheel(
            self.tick_ms, self.wheel_size, self._current_time, truncating=truncating
        )

    # -- scheduling ------------------------------------------------------------------

    def add(self, task: reference.TimerTask) -> None:
        if not isinstance(task, reference.TimerTask):
            raise TypeError(f"task must be a reference TimerTask, not {type(task).__name__}")
        on = self.kafka_on
        with _LOCK:
            if self.closed and "kafka-after-close" not in on:
                raise RuntimeError(f"timer is closed; cannot add {task!r}")
            expiration = expiration_ms(self._deadline_base(), task.delay_ms)
            old = task._entry
            if old is not None:
                old.timer._pending.pop(old, None)
                task._entry = None
            entry = _Entry(self, task, self._floor(expiration))
            if self._wheel.add(WheelEntry(entry, expiration), self._current_time):
                task._entry = entry
                self._pending[entry] = None
                self._condition.notify_all()
                return
        if self.closed:  # Kafka: RejectedExecutionException out of add, as out of a drain
            raise RuntimeError(f"executor is shut down; cannot run {task!r}")
        self._hand_over(task)

    def advance_clock(self, timeout_ms: int, max_entries: int | None = None) -> bool:
        if max_entries is not None:  # Kafka's advanceClock has no bounded form (R73)
            raise TypeError("the Kafka model has no bounded drain: max_entries must be None")
        on = self.kafka_on
        if "kafka-negative-timeout" in on and isinstance(timeout_ms, int) and timeout_ms < 0:
            timeout_ms = 0
        if self.closed and "kafka-after-close" not in on:
            return super().advance_clock(timeout_ms)
        if timeout_ms < 0:
            return super().advance_clock(timeout_ms)  # the reference's ValueError
        with _LOCK:
            now = self.clock.wait(self._condition, timeout_ms, self._next_due)
            before = self._current_time
        dequeued: list[int] = []
        try:
            if "kafka-flush-current-time" in on or self.closed:
                handed = self._drain_by_bucket(now, dequeued)
            else:
                handed = self._drain_at_once(now, dequeued)
        finally:
            with _LOCK:
                if "kafka-stale-current-time" in on:  # only to the dequeued buckets' expirations
                    self._current_time = max(before, self._wheel.current_ms)
                else:
                    self._current_time = max(self._current_time, self._floor(now))
                    self._wheel.advance(self._current_time)
        if "kafka-advance-result" in on:
            return bool(dequeued)
        return handed

    # -- the two drains --------------------------------------------------------------

    def _drain_by_bucket(self, now: int, dequeued: list[int]) -> bool:
        """Kafka's ``advanceClock``: poll a bucket expired by ``now``, move the wheels to its
        expiration, flush it, poll the next at the clock's reading then (a task of the
        drain may have moved the clock). A flushed entry still scheduled is put back in
        the wheel (a finer bucket) or, if due on the level it reaches, handed over at
        once, before the rest of its bucket. On a closed timer (``kafka-after-close``)
        the first hand-over is refused: ``RuntimeError``; that entry is gone, the rest of
        its bucket stays in the bucket, which is no longer queued (stranded, as in Kafka),
        and the buckets not yet dequeued stay queued."""
        handed = False
        errors: list[BaseException] = []
        reading = now
        while True:
            with _LOCK:
                bucket = self._wheel.poll(reading)
                if bucket is None:
                    break
                if bucket.expiration is not None:
                    dequeued.append(bucket.expiration)
                    self._wheel.advance(bucket.expiration)
                self._current_time = max(self._current_time, self._wheel.current_ms)
            while True:
                entry = self._flush_next(bucket)
                if entry is None:
                    break
                if self.closed and "kafka-after-close" not in self.kafka_on:
                    return handed  # closed by a task of this drain: nothing more (R64)
                try:
                    self._hand_over(entry.task)
                except BaseException as exc:  # the other tasks are handed over first (R53)
                    if self.closed and isinstance(exc, RuntimeError):
                        raise  # the shut-down executor refused it: out of the drain, as Kafka
                    errors.append(exc)
                handed = True
            # Kafka's next ``delayQueue.poll()`` reads the clock again: a task of this
            # drain that moved it (a nested advance, R74) makes later buckets due now.
            reading = max(reading, self.clock.now_ms())
        raise_collected(errors, f"the drain of timer {self._name!r}")
        return handed

    def _flush_next(self, bucket: Bucket[_Entry]) -> _Entry | None:
        """Take ``bucket``'s entries out in order until one is due (returned, out of the
        schedule; ``RuntimeError`` on a timer closed with ``kafka-after-close``, as its
        executor refuses it) or none is left (the bucket is reset: None)."""
        with _LOCK:
            while bucket.entries:
                wheel_entry = bucket.entries.pop(0)
                entry = wheel_entry.item
                if not self._live(entry) or self._wheel.add(wheel_entry):
                    continue
                del self._pending[entry]
                entry.task._entry = None
                if self.closed and "kafka-after-close" in self.kafka_on:
                    raise RuntimeError(f"executor is shut down; cannot run {entry.task!r}")
                return entry
            self._wheel.reset(bucket)
            return None

    def _drain_at_once(self, now: int, dequeued: list[int]) -> bool:
        """The spec's drain (R2, R6, R11) over Kafka's buckets: every bucket expired by ``now``
        is dequeued and its live entries put back (a cascade, or dropped when due), then
        every task due leaves the schedule, the current time moves to the drain reading,
        and the tasks are handed over in due order."""
        with _LOCK:
            while (bucket := self._wheel.poll(now)) is not None:
                if bucket.expiration is not None:
                    dequeued.append(bucket.expiration)
                    self._wheel.advance(bucket.expiration)
                for wheel_entry in bucket.entries:
                    if self._live(wheel_entry.item):
                        self._wheel.add(wheel_entry)
                bucket.entries.clear()
                self._wheel.reset(bucket)
            due_entries = sorted(
                (entry for entry in self._pending if is_due(entry.due, now)),
                key=lambda entry: entry.due,
            )
            for entry in due_entries:
                del self._pending[entry]
            self._current_time = max(self._current_time, self._floor(now))  # R2
        return self._hand_over_drained(due_entries)

    # -- internals -------------------------------------------------------------------

    def _live(self, entry: _Entry) -> bool:
        return entry.task._entry is entry and entry in entry.timer._pending

    def _floor(self, ms: int) -> int:
        if "kafka-truncating-division" in self.kafka_on:
            return trunc_down(ms, self.tick_ms)
        return round_down(ms, self.tick_ms)


class KafkaLikePurgatory(reference.DelayedOperationPurgatory[reference.DelayedOperation]):
    """The reference purgatory with the purgatory differences in ``kafka_on``."""

    kafka_on: ClassVar[frozenset[str]] = frozenset()
    _timer_type: ClassVar[type[reference.SystemTimer]] = KafkaLikeTimer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "kafka-lazy-purge" in self.kafka_on:
            self._purge_when_idle = False  # only R30's periodic purge, as Kafka

    def try_complete_else_watch(
        self, operation: reference.DelayedOperation, watch_keys: Iterable[Hashable]
    ) -> bool:
        on = self.kafka_on
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
        return self._submit(operation, tuple(distinct), claimed=True)  # R22's sequence

    def _time(self, operation: Any, undo: Any) -> None:
        try:
            super()._time(operation, undo)
        except RuntimeError:
            if "kafka-after-close" in self.kafka_on and self._timer.closed:
                # Kafka undoes nothing: the executor refused an operation due at once,
                # which stays watched and counted in the estimate
                undo.clear()
            raise

    def _refuse_if_shut_down(self) -> None:
        if "kafka-after-shutdown" not in self.kafka_on:  # Kafka refuses nothing after shutdown
            super()._refuse_if_shut_down()

    def advance_clock(self, timeout_ms: int, max_entries: int | None = None) -> None:
        if max_entries is not None:  # Kafka's advanceClock has no bounded form (R73)
            raise TypeError("the Kafka model has no bounded drain: max_entries must be None")
        on = self.kafka_on
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

    kafka_on: ClassVar[frozenset[str]] = frozenset()

    def cancel(self) -> None:
        if "kafka-cancel-keeps-watch" in self.kafka_on:
            self._unschedule()  # TimerTask.cancel: the watcher lists keep it
            return
        super().cancel()


def kafka_like(names: str = "kafka") -> types.ModuleType:
    """``kafka_model`` of the differences ``names`` resolves to (``kafka`` or comma-separated
    ids; ``ValueError`` naming an unknown one)."""
    return kafka_model(frozenset(difference.id for difference in resolve(names)))


@functools.cache
def kafka_model(on: frozenset[str]) -> types.ModuleType:
    """The reference with the Kafka behaviours ``on`` (ids; see the module docstring): a
    module exporting subclasses of the classes above that read ``on``.

    Cached: one module (and one set of classes) per combination."""
    unknown = on - {difference.id for difference in KNOWN_DIFFERENCES}
    if unknown:
        raise ValueError(f"kafka_model: unknown known differences {sorted(unknown)}")
    timer = type("KafkaLikeTimer", (KafkaLikeTimer,), {"kafka_on": on})
    purgatory = type(
        "KafkaLikePurgatory", (KafkaLikePurgatory,), {"kafka_on": on, "_timer_type": timer}
    )
    operation = type("KafkaLikeOperation", (KafkaLikeOperation,), {"kafka_on": on})
    module = types.ModuleType("kafka_model:" + ",".join(sorted(on)))
    module.TimerTask = reference.TimerTask  # type: ignore[attr-defined]
    module.DelayedOperation = operation  # type: ignore[attr-defined]
    module.SystemTimer = timer  # type: ignore[attr-defined]
    module.DelayedOperationPurgatory = purgatory  # type: ignore[attr-defined]
    return module
