"""``AsyncPurgatory``: the purgatory on an asyncio event loop, with no thread (R45-R51, R57-R59).

Wraps a ``DelayedOperationPurgatory`` of either implementation (default: optimized)
whose timer runs due tasks inline on the loop (``LoopExecutor``) and has no reaper; a
``LoopTimerDriver`` advances that timer on the loop with one ``call_at`` (R45).
``await purgatory.wait(op, keys)`` submits the operation when its coroutine first runs
(exactly as ``try_complete_else_watch``, R22) and returns its ``Outcome`` (R46);
``submit`` submits at the call and returns the ``Waiter`` future. Giving up on the wait
(cancelling the task or the waiter) abandons the operation (R47, R57). Every call is made
on the loop, in its thread (R50, R59); ``try_complete``, ``on_complete`` and
``on_expiration`` run there too, so they must not block. The purgatory's own counters
(``watched``, ``num_delayed``, ...) are read through ``purgatory``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable
from typing import Any, Generic, Literal

from kpurgatory import optimized, reference
from kpurgatory._checks import require_at_least, require_str
from kpurgatory._sweep import raise_collected
from kpurgatory._typing import TypeVar
from kpurgatory.aio.driver import DEFAULT_MAX_HAND_OVERS, LoopTimerDriver
from kpurgatory.aio.executor import LoopExecutor
from kpurgatory.aio.operation import (
    DelayedOperation,
    ReferenceDelayedOperation,
    Waiter,
    running_loop,
)
from kpurgatory.aio.outcome import Outcome
from kpurgatory.aio.virtual import VirtualTimeLoop
from kpurgatory.aio.wrapped import WrappedPurgatory, WrappedTimer
from kpurgatory.clock import ManualClock, MonotonicClock, deadline_reader
from kpurgatory.spec.protocols import Clock

__all__ = ["AsyncPurgatory", "PurgatoryImplementation"]

T = TypeVar("T", bound="DelayedOperation | ReferenceDelayedOperation", default=DelayedOperation)
"""The operations awaited: a bare ``AsyncPurgatory("name")`` holds any aio
``DelayedOperation`` (the PEP 696 default); ``AsyncPurgatory[ReferenceDelayedOperation]``
(or a subclass) with ``implementation="reference"``."""

_KNOWN_TYPES_LIMIT = 256
"""Operation classes remembered as checked (classes made on the fly would grow it)."""

PurgatoryImplementation = Literal["optimized", "reference"]
"""Which implementation an ``AsyncPurgatory`` wraps."""

_OPERATION_TYPES: dict[str, type[Any]] = {
    "optimized": DelayedOperation,
    "reference": ReferenceDelayedOperation,
}


class AsyncPurgatory(Generic[T]):
    """Delayed operations awaited on an asyncio loop, expired by the loop itself.

    Build it inside a running loop (or pass ``loop``). ``clock`` defaults to the
    loop's ``ManualClock`` on a ``VirtualTimeLoop`` and to a ``MonotonicClock``
    otherwise; a ``ManualClock`` needs a ``VirtualTimeLoop`` on that same clock
    (``ValueError`` otherwise). ``tick_ms``, ``wheel_size``, ``purge_interval`` and
    ``timer_enabled`` are those of ``SystemTimer`` and ``DelayedOperationPurgatory``.
    ``max_hand_overs``: the most expiries one firing of the driver runs before it yields
    to the loop (R70; default ``kpurgatory.aio.driver.DEFAULT_MAX_HAND_OVERS``); with the
    optimized implementation, times ``LET_GO_PER_HAND_OVER``, also the most finished
    operations one let-go or purge pass unlinks, the rest in later passes (R71).
    ``implementation`` picks the wrapped purgatory: ``"optimized"`` (operations are
    ``kpurgatory.aio.DelayedOperation``) or ``"reference"`` (operations are
    ``kpurgatory.aio.ReferenceDelayedOperation``).
    """

    # The wrapped purgatories' parameters, deliberately (one API), with the timer's own
    # (clock, tick, wheel size) instead of a timer object.
    def __init__(
        self,
        purgatory_name: str,
        *,
        clock: Clock | None = None,
        tick_ms: int = 1,
        wheel_size: int = 20,
        purge_interval: int = 1000,
        timer_enabled: bool = True,
        implementation: PurgatoryImplementation = "optimized",
        loop: asyncio.AbstractEventLoop | None = None,
        max_hand_overs: int = DEFAULT_MAX_HAND_OVERS,
    ) -> None:
        name = require_str("purgatory_name", purgatory_name)
        max_hand_overs = require_at_least("max_hand_overs", max_hand_overs, 1)
        if implementation not in _OPERATION_TYPES:
            raise ValueError(
                f"implementation must be 'optimized' or 'reference', not {implementation!r}"
            )
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                raise RuntimeError(
                    "AsyncPurgatory needs an event loop: build it in a coroutine or pass loop="
                ) from None
        elif not isinstance(loop, asyncio.AbstractEventLoop):
            raise TypeError(f"loop must be an asyncio event loop, not {type(loop).__name__}")
        virtual = isinstance(loop, VirtualTimeLoop)
        if clock is None:
            clock = loop.clock if isinstance(loop, VirtualTimeLoop) else MonotonicClock()
        if isinstance(clock, ManualClock) != virtual or (
            isinstance(loop, VirtualTimeLoop) and clock is not loop.clock
        ):
            raise ValueError(
                "clock must be the loop's own: a ManualClock only with a VirtualTimeLoop on "
                "that clock, and a VirtualTimeLoop only with its clock"
            )
        impl: Any = optimized if implementation == "optimized" else reference
        executor = LoopExecutor()
        timer = impl.SystemTimer(name, tick_ms, wheel_size, clock=clock, executor=executor)
        self._purgatory: Any = impl.DelayedOperationPurgatory(
            name,
            timer,
            purge_interval=purge_interval,
            reaper_enabled=False,
            timer_enabled=timer_enabled,
        )
        self._operation_type = _OPERATION_TYPES[implementation]
        self._base_type: type[Any] = impl.DelayedOperation
        self._implementation: PurgatoryImplementation = implementation
        self._loop = loop
        self._clock = clock
        self._tick_ms: int = timer.tick_ms
        self._timer_enabled = timer_enabled
        direct = virtual or isinstance(clock, MonotonicClock)
        self._driver = LoopTimerDriver(
            loop,
            timer,
            clock,
            self._advance,
            direct=direct,
            executor=executor,
            max_hand_overs=max_hand_overs,
            let_go=self._purgatory if implementation == "optimized" else None,
        )
        self._waiting: dict[int, Waiter] = {}
        """The waiters not settled yet, by ``id``: what ``shutdown`` abandons (R49)."""
        self._closed = False
        self._known_types: set[type] = set()
        """Operation classes checked to be awaitable (``wait``)."""
        self._known_any_types: set[type] = set()
        """Operation classes checked for ``try_complete_else_watch`` (any of the wrapped
        implementation)."""
        self._try_complete_else_watch = self._purgatory.try_complete_else_watch
        self._now_ms = deadline_reader(clock)  # as the timer counts a deadline (R60)
        self._timer: Any = timer

    # -- read-only state -------------------------------------------------------------

    purgatory = WrappedPurgatory("_purgatory")
    """The wrapped ``DelayedOperationPurgatory`` (for its counters and metrics): typed
    ``kpurgatory.optimized.DelayedOperationPurgatory[T]`` for aio ``DelayedOperation``s,
    ``kpurgatory.reference.DelayedOperationPurgatory[T]`` for
    ``ReferenceDelayedOperation``s."""

    timer = WrappedTimer("_timer")
    """The wrapped purgatory's ``SystemTimer`` (of the same implementation)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop this purgatory runs on."""
        return self._loop

    @property
    def implementation(self) -> PurgatoryImplementation:
        """``"optimized"`` or ``"reference"``."""
        return self._implementation

    @property
    def driver(self) -> LoopTimerDriver:
        """The ``call_at`` driver that advances the timer (R45)."""
        return self._driver

    @property
    def waiting(self) -> int:
        """How many operations submitted with ``wait`` or ``submit`` are still awaited
        (their waiter not settled): a count, not a collection."""
        return len(self._waiting)

    @property
    def closed(self) -> bool:
        """Whether ``shutdown`` has been called."""
        return self._closed

    # -- operations ------------------------------------------------------------------

    async def wait(self, operation: T, watch_keys: Iterable[Hashable]) -> Outcome:
        """Submit ``operation`` on ``watch_keys`` and return how it finished (R46).

        ``outcome = await purgatory.wait(op, keys)``: when this coroutine first runs it
        submits the operation (``submit``: ``try_complete_else_watch``, R22), then waits
        for its ``Outcome``: ``COMPLETED``, ``EXPIRED`` or ``ABANDONED`` (by ``abandon`` or
        ``shutdown``). Giving up abandons the operation (R47, R57): cancelled before its
        first step, the coroutine never submitted it; cancelled while waiting (the task,
        a ``wait_for`` or ``asyncio.timeout`` expiry, a ``TaskGroup``), it is abandoned in
        that ``cancel`` call and the ``CancelledError`` propagates; closed while waiting,
        it is abandoned too. If ``on_complete`` raises, so does this (R48). Raises as
        ``submit`` does on bad arguments, off the loop or after ``shutdown``.
        """
        waiter = self._submit(operation, watch_keys, "wait")
        try:
            return await waiter
        finally:
            if not waiter.done():  # closed while suspended (GeneratorExit): give up (R57)
                self._forget(waiter)  # the future itself is left alone: its loop may be
                self._give_up(operation)  # closed, and nobody awaits it any more

    def submit(self, operation: T, watch_keys: Iterable[Hashable]) -> Waiter:
        """Submit ``operation`` on ``watch_keys`` now; return its ``Waiter`` future (R46).

        For code that submits many operations without a task each: the ``Waiter`` is an
        ``asyncio.Future`` of the ``Outcome``; cancelling it abandons the operation
        (R47). The submission is ``try_complete_else_watch`` (R22). If ``on_complete``
        raises when the operation completes at once, this call raises it (R48). Raises as
        ``try_complete_else_watch`` on bad arguments (R34-R36, leaving no trace),
        ``ValueError`` if the operation is already awaited, ``RuntimeError`` after
        ``shutdown`` or when not called on the purgatory's loop in its thread (R50).
        Cost over ``try_complete_else_watch``: the waiter, a dict entry until it is
        settled, and at most one ``call_at``.
        """
        return self._submit(operation, watch_keys, "submit")

    def _submit(self, operation: T, watch_keys: Iterable[Hashable], method: str) -> Waiter:
        # Deliberate repeats: this test stands again in try_complete_else_watch, and
        # check_and_complete, cancel_for_key and abandon each write out one check, call,
        # let-go wrapper; as a shared method either would cost a Python call more on a wait's
        # submission or completion.
        if (
            type(operation) not in self._known_types
            or running_loop() is not self._loop
            or self._closed
            or self._timer.closed
        ):  # the checks of _check_call, skipped on the common path (a known class, here)
            self._check_call(operation, method)
        if operation._waiter is not None:
            raise ValueError(f"operation {operation!r} is already awaited")
        waiter = Waiter(self, operation, self._loop)
        operation._waiter = waiter
        waiting = self._waiting
        waiting[id(waiter)] = waiter  # before the submission: a shutdown from one of its
        try:  # callbacks abandons this waiter too (R49, R58)
            self._try_complete_else_watch(operation, watch_keys)
        except BaseException:
            operation._waiter = None
            waiting.pop(id(waiter), None)
            if waiter.done() and not waiter.cancelled():
                waiter.exception()  # on_complete raised: the caller gets it from here (R48)
            self._driver.let_go_soon()  # R71: a completion that raised may owe one too
            raise
        if waiter.done():  # finished at once: it may have started a let-go (R71)
            self._driver.let_go_soon()
        elif self._timer_enabled:  # _arm_for's first test inlined
            armed = self._driver.armed_due
            if armed is None:
                self._arm_for(operation)
            else:
                floor = self._timer.current_time + operation.delay_ms
                if armed > floor - floor % self._tick_ms:
                    self._arm_for(operation)
        return waiter

    def try_complete_else_watch(
        self,
        operation: optimized.DelayedOperation | reference.DelayedOperation,
        watch_keys: Iterable[Hashable],
    ) -> bool:
        """``try_complete_else_watch`` of the wrapped purgatory (R22, R23), on the loop.

        Kafka's own call: no waiter, the outcome is whatever ``on_complete`` and
        ``on_expiration`` do; the driver is armed for the operation's due time (R45).
        ``operation`` may be any operation of the wrapped implementation (the aio
        ``DelayedOperation`` included; one that is awaited elsewhere is refused with
        ``ValueError``). ``shutdown`` leaves such an operation as the wrapped
        purgatory's ``shutdown`` does (R32): nobody awaits it. Same errors as ``submit``.
        Cost: the wrapped call plus the driver check (one clock reading).
        """
        if (
            type(operation) not in self._known_any_types
            or running_loop() is not self._loop
            or self._closed
            or self._timer.closed
        ):  # the checks of _check_call, skipped on the common path (a known class, here)
            self._check_call(operation, "try_complete_else_watch", any_operation=True)
        if getattr(operation, "_waiter", None) is not None:
            raise ValueError(f"operation {operation!r} is already awaited")
        completed: bool = self._try_complete_else_watch(operation, watch_keys)
        if not completed and self._timer_enabled:  # armed for nothing at worst: harmless
            self._arm_for(operation)
        self._driver.let_go_soon()  # R71
        return completed

    def check_and_complete(self, key: Hashable) -> int:
        """``check_and_complete`` (R25) on the loop: completes (and wakes) every ready
        waiter on ``key``; if callbacks raise, every operation is tried first (R53).
        ``RuntimeError`` off the loop or after ``shutdown`` (R62)."""
        self._check_open("check_and_complete")
        try:
            completed: int = self._purgatory.check_and_complete(key)
        finally:
            self._driver.let_go_soon()  # R71
        return completed

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """``cancel_for_key`` (R29, R55): the operations stop waiting on ``key`` and in the timer.

        They are neither completed nor expired, so their waiters keep waiting for a
        completion through another key or a ``force_complete``.
        """
        self._check_open("cancel_for_key")
        try:
            operations: list[T] = self._purgatory.cancel_for_key(key)
        finally:
            self._driver.let_go_soon()  # R71: a pending attempt it made may complete one
        return operations

    def abandon(self, operation: T) -> bool:
        """Abandon a submitted operation; its waiter gets ``ABANDONED`` (R47).

        True iff this call abandoned a pending operation (``abandon`` of the wrapped
        purgatory: unwatched, out of the timer, never completed later).
        """
        self._check_open("abandon")
        try:
            abandoned: bool = self._purgatory.abandon(operation)
        finally:
            self._driver.let_go_soon()  # R71
        return abandoned

    def shutdown(self) -> None:
        """Stop the driver, abandon every awaited operation, shut the purgatory down (R49).

        Idempotent, and callable from any callback running on the loop, or from a thread
        with no running loop once the loop has stopped or closed (R50). Each awaited
        operation still pending (submitted with ``wait`` or ``submit``, its waiter not
        settled) is abandoned and its waiter resolves to ``ABANDONED``, every one even if
        an abandon raises (a supplied lock: R53, raised at the end); pending operations
        nobody awaits (``try_complete_else_watch``) are left as
        ``DelayedOperationPurgatory.shutdown`` leaves them (R32). Later calls raise
        ``RuntimeError``.
        """
        if self._closed:
            return
        running = running_loop()
        if running is not self._loop:
            if self._loop.is_running():
                raise RuntimeError(
                    "AsyncPurgatory.shutdown must be called on its event loop's thread while "
                    "that loop runs (from another thread: loop.call_soon_threadsafe)"
                )
            if running is not None:
                raise RuntimeError(
                    "AsyncPurgatory.shutdown was called from another running event loop; its "
                    "own loop has stopped: call it from a thread with no running loop (R50)"
                )
        self._closed = True
        self._driver.stop()
        errors: list[BaseException] = []
        for waiter in list(self._waiting.values()):
            try:
                self._purgatory.abandon(waiter._operation)  # tells the waiter (R58)
            except BaseException as exc:  # the other waiters are settled first (R53)
                errors.append(exc)
            else:  # told: off the loop its outcome is queued (or dropped with a closed
                self._forget(waiter)  # loop), so it is no longer awaited here (R50)
        try:
            self._purgatory.shutdown()
        except BaseException as exc:
            errors.append(exc)
        raise_collected(errors, f"the shutdown of {self._purgatory.purgatory_name!r}")

    async def __aenter__(self) -> AsyncPurgatory[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (
            f"AsyncPurgatory({self._purgatory.purgatory_name!r}, {self._implementation}, "
            f"waiting={len(self._waiting)}{', closed' if self._closed else ''})"
        )

    # -- internals -------------------------------------------------------------------

    def _check_loop(self, method: str) -> None:
        """``RuntimeError`` unless called on the purgatory's loop, in its thread (R50).

        The check holds for the whole synchronous call (R59): the loop cannot start or
        move to another thread before the call returns."""
        if running_loop() is not self._loop:
            raise RuntimeError(
                f"AsyncPurgatory.{method} must be called on the purgatory's loop, in the thread "
                "running it (from another thread: loop.call_soon_threadsafe)"
            )

    def _check_open(self, method: str) -> None:
        """The one misuse rule of every call (R62): ``RuntimeError`` off the loop's thread
        (R50, R59), then ``RuntimeError`` once shut down (a wrapped purgatory shut down
        directly shuts this one down first, R58)."""
        self._check_loop(method)
        if not self._closed and self._timer.closed:
            self.shutdown()
        if self._closed:
            raise RuntimeError(f"purgatory {self._purgatory.purgatory_name!r} is shut down")

    def _check_call(self, operation: Any, method: str, *, any_operation: bool = False) -> None:
        """Refuse a submission with the wrong operation type, off the loop, or after
        shutdown (R35, R50). ``any_operation``: also accept an operation of the wrapped
        implementation that is not awaitable. A wrapped purgatory shut down directly
        shuts this one down first (R58)."""
        cls = type(operation)
        known = self._known_any_types if any_operation else self._known_types
        if cls not in known:  # one set lookup instead of an ABC isinstance
            allowed = self._base_type if any_operation else self._operation_type
            if not isinstance(operation, allowed):
                wanted = (
                    f"kpurgatory.{self._implementation}.DelayedOperation"
                    if any_operation
                    else f"kpurgatory.aio.{self._operation_type.__name__}"
                )
                raise TypeError(f"operation must be a {wanted}, not {cls.__name__}")
            if len(known) < _KNOWN_TYPES_LIMIT:
                known.add(cls)
        self._check_open(method)

    def _arm_for(self, operation: Any) -> None:
        """Make sure the driver wakes by ``operation``'s due time (R45).

        Its due time is at least that of a delay counted from the timer's current time
        (R2: never ahead of the clock), so a driver armed no later than that needs no
        clock reading."""
        delay: int = operation.delay_ms
        armed = self._driver.armed_due
        if armed is not None:
            floor = self._timer.current_time + delay
            if armed <= floor - floor % self._tick_ms:
                return
        expiration = self._now_ms() + delay
        due = expiration - expiration % self._tick_ms
        if armed is None or due < armed:
            self._driver.schedule(due)

    def _forget(self, waiter: Waiter) -> None:
        """A waiter settled or cancelled: no longer one ``shutdown`` must abandon."""
        self._waiting.pop(id(waiter), None)

    def _give_up(self, operation: Any) -> None:
        """A waiter was cancelled (R47): abandon its operation, inside that ``cancel``.

        False from the abandon means the operation finished first; it stays finished. An
        error (a supplied lock failing) cannot propagate through ``Task.cancel`` without
        breaking asyncio's own bookkeeping: it goes to the loop's exception handler, as
        an error in a loop callback does, except ``KeyboardInterrupt``/``SystemExit``."""
        try:
            self._purgatory.abandon(operation)
            self._driver.let_go_soon()  # R71
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            self._loop.call_exception_handler(
                {
                    "message": f"abandoning {operation!r} for a cancelled wait raised",
                    "exception": exc,
                }
            )

    def _advance(self) -> None:
        """One firing of the driver: drain what is due, then purge if due (R30, R45).

        A wrapped purgatory shut down directly shuts this one down instead (R58): its
        closed timer still reports its tasks as due, and re-arming for them would spin."""
        if self._closed:
            return
        if self._timer.closed:
            self.shutdown()
            return
        self._purgatory.advance_clock(0)
