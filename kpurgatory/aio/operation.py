"""Awaitable delayed operations (each implementation's ``DelayedOperation``) and ``Waiter``.

``DelayedOperation`` (on the optimized wheel, the default) and
``ReferenceDelayedOperation`` (on the reference implementation) behave exactly as their
bases (R16-R21) and in addition deliver the operation's ``Outcome`` to its ``Waiter``,
the future ``AsyncPurgatory.wait`` returns (R46): once a ``force_complete`` has won and
``on_complete`` has returned, the waiter resolves to ``EXPIRED`` when the win came from
the timer's ``run`` (in the thread running it), else ``COMPLETED``; an ``on_complete``
that raises hands its exception to the waiter as well as to the caller (R48); an
abandon resolves it to ``ABANDONED`` (R47). The optimized operation does this natively
(its ``_waiter`` slot), so ``DelayedOperation`` here overrides nothing; the reference
operation has no such slot, so ``ReferenceDelayedOperation`` overrides
``force_complete``, ``run`` and ``cancel``. A waiter is settled directly on the loop
thread, through ``call_soon_threadsafe`` from any other thread, and dropped if the loop
is closed (R50).

Subclass one of these exactly as you would subclass ``kpurgatory.DelayedOperation``:
implement ``try_complete``, ``on_complete`` and ``on_expiration``.
"""

from __future__ import annotations

import asyncio
import contextlib
from _thread import get_ident
from asyncio import _get_running_loop
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from kpurgatory import optimized, reference
from kpurgatory.aio.outcome import Outcome
from kpurgatory.spec.protocols import AbstractLock

__all__ = ["DelayedOperation", "ReferenceDelayedOperation", "Waiter"]

_COMPLETED = Outcome.COMPLETED
_EXPIRED = Outcome.EXPIRED
_ABANDONED = Outcome.ABANDONED


class _Registry(Protocol):
    """What a waiter reports to: its ``AsyncPurgatory`` (the awaited operations)."""

    _waiting: dict[int, Waiter]

    def _abandon(self, operation: Any) -> bool: ...


class Waiter(asyncio.Future[Outcome], Coroutine[Any, Any, Outcome]):
    """The future ``AsyncPurgatory.wait`` returns for one operation: its ``Outcome``.

    An ``asyncio.Future`` of the purgatory's loop, and also a one-step coroutine
    (``send``/``throw``/``close``), so it can be awaited directly, or handed to
    ``create_task``, ``TaskGroup.create_task``, ``wait_for`` and ``gather`` exactly as
    the coroutine of an ``async def wait`` could: ``wait`` is a plain method, with no
    coroutine frame per call (each one a garbage-collector-tracked object).

    Cancelling it abandons the operation at once (R47): ``cancel`` is what
    ``Task.cancel`` calls on the future a task awaits, and what a ``wait_for`` timeout
    or a ``TaskGroup`` calls through that task, so the override here runs the abandon
    synchronously, before the cancelled task resumes. (A done-callback would cost a
    callback object per wait and a loop callback per completion.) Cost over a plain
    loop future: two slots, and a task awaiting it takes asyncio's generic path for
    future-likes instead of the exact-``Future`` fast path (measured about 0.3 us).
    """

    __slots__ = ("_operation", "_registry")

    __name__ = "AsyncPurgatory.wait"
    """How a task running this waiter names its coroutine in its ``repr``."""

    _operation: Any
    _registry: _Registry

    # No __init__ of its own (one Python frame less per wait): the creator calls
    # ``Waiter(loop=loop)`` and sets both slots (``AsyncPurgatory.wait``).

    def cancel(self, msg: Any | None = None) -> bool:
        """Cancel the future (``Future.cancel``), then abandon its operation (R47).

        False, abandoning nothing, if the outcome had already been set: an operation
        that finished before the cancellation landed stays finished.
        """
        if not super().cancel(msg=msg):
            return False
        self._registry._waiting.pop(id(self), None)
        self._registry._abandon(self._operation)  # False if it finished meanwhile
        return True

    def send(self, value: None) -> Any:
        """One step as a coroutine (``Task.__step``): yield this future until it is done,
        then return its result (raise its exception, or ``CancelledError``)."""
        if self.done():
            raise StopIteration(self.result())
        self._asyncio_future_blocking = True
        return self

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> NoReturn:
        """Raise what the task throws in (its ``CancelledError``): no step is left to run."""
        exc = typ if val is None else val
        if isinstance(exc, type):
            exc = exc()
        raise exc

    def close(self) -> None:
        """Nothing to close: the waiter holds no frame."""

    # -- told by the operation (kpurgatory.optimized.operation._Waiter), once ----------

    def _completed(self, expired: bool) -> None:
        """A ``force_complete`` won and ``on_complete`` returned: ``EXPIRED`` if the win
        came from ``run``, else ``COMPLETED`` (R46). The loop-thread path is inlined."""
        outcome = _EXPIRED if expired else _COMPLETED
        if _get_running_loop() is self._loop:
            self._registry._waiting.pop(id(self), None)
            if not self.done():  # else cancelled by its task meanwhile (R47)
                self.set_result(outcome)
        else:
            self._settle(outcome)

    def _raised(self, exc: Exception) -> None:
        """``on_complete`` raised ``exc``: the waiter raises it too (R48)."""
        self._settle(exc)

    def _abandoned(self) -> None:
        """Abandoned (R40, R47): ``ABANDONED``."""
        self._settle(_ABANDONED)

    def _settle(self, outcome: Outcome | Exception) -> None:
        """Deliver ``outcome`` from whichever thread is finishing the operation.

        On the loop's thread (this loop running here): at once. From another thread:
        ``call_soon_threadsafe``; if that loop is closed, the outcome is dropped (R50).
        """
        if _get_running_loop() is self._loop:
            self._deliver(outcome)
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to wake
            self._loop.call_soon_threadsafe(self._deliver, outcome)

    def _deliver(self, outcome: Outcome | Exception) -> None:
        """On the loop: leave the registry, set ``outcome`` unless already cancelled."""
        self._registry._waiting.pop(id(self), None)
        if self.done():  # cancelled by its task meanwhile (R47)
            return
        if isinstance(outcome, Exception):
            self.set_exception(outcome)
        else:
            self.set_result(outcome)

    if TYPE_CHECKING:

        @property
        def _loop(self) -> asyncio.AbstractEventLoop: ...


class DelayedOperation(optimized.DelayedOperation):
    """An optimized ``DelayedOperation`` that ``AsyncPurgatory.wait`` can await.

    Same constructor and rules as ``kpurgatory.DelayedOperation`` (R16-R21). Nothing
    is overridden: the optimized operation tells its waiter natively (slot ``_waiter``,
    set by ``wait``) how it finished, so awaiting costs no Python-level override per
    operation; this class is what ``AsyncPurgatory`` accepts as awaitable.
    """

    __slots__ = ()


class ReferenceDelayedOperation(reference.DelayedOperation):
    """A reference ``DelayedOperation`` that ``AsyncPurgatory.wait`` can await.

    Same as ``DelayedOperation`` of this module, on ``kpurgatory.reference`` (use it
    with ``AsyncPurgatory(..., implementation="reference")``). The reference operation
    has no waiter of its own, so this class adds it: ``force_complete``, ``run`` and
    ``cancel`` tell the waiter as the optimized operation does natively.
    """

    _waiter: Waiter | None
    _expiring: int

    def __init__(self, delay_ms: int, lock: AbstractLock | None = None) -> None:
        super().__init__(delay_ms, lock)
        self._waiter = None
        self._expiring = 0  # the thread running ``run`` (its id), as the optimized one

    def force_complete(self) -> bool:
        """``force_complete`` (R16), then tell the waiter how it finished (R46, R48)."""
        try:
            won: bool = super().force_complete()
        except Exception as exc:  # raised by on_complete: this call won (R48)
            waiter, self._waiter = self._waiter, None
            if waiter is not None:
                waiter._raised(exc)
            raise
        if won:
            waiter = self._waiter
            if waiter is not None:
                self._waiter = None
                waiter._completed(self._expiring == get_ident())
        return won

    def run(self) -> None:
        """Expire (R17): a ``force_complete`` won here tells the waiter ``EXPIRED``."""
        self._expiring = get_ident()
        super().run()

    def cancel(self) -> None:
        """``cancel`` (an abandon once submitted); an abandoned waiter gets ``ABANDONED``."""
        super().cancel()
        waiter = self._waiter
        if waiter is not None and self.is_abandoned:
            self._waiter = None
            waiter._abandoned()
