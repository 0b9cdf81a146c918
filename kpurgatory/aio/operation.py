"""Awaitable delayed operations: each implementation's ``DelayedOperation`` plus a waiter.

``DelayedOperation`` (on the optimized wheel, the default) and
``ReferenceDelayedOperation`` (on the reference implementation) behave exactly as their
bases (R16-R21) and in addition deliver the operation's ``Outcome`` to the coroutine
awaiting it in ``AsyncPurgatory.wait`` (R46): ``force_complete`` settles the waiter once
it has won and ``on_complete`` has returned (``EXPIRED`` when the win came from the
timer's ``run``, else ``COMPLETED``); an ``on_complete`` that raises hands its exception
to the waiter as well as to the caller (R48). The waiter is an ``asyncio.Future`` of the
purgatory's loop: settled directly on the loop thread, through
``call_soon_threadsafe`` from any other thread, and dropped if the loop is closed (R50).

Subclass one of these exactly as you would subclass ``kpurgatory.DelayedOperation``:
implement ``try_complete``, ``on_complete`` and ``on_expiration``.
"""

from __future__ import annotations

import asyncio
import contextlib
from asyncio import _get_running_loop
from typing import TYPE_CHECKING, TypeAlias

from kpurgatory import optimized, reference
from kpurgatory.aio.outcome import Outcome
from kpurgatory.spec.protocols import AbstractLock

__all__ = ["DelayedOperation", "ReferenceDelayedOperation", "Waiter"]

_COMPLETED = Outcome.COMPLETED
_EXPIRED = Outcome.EXPIRED

Waiter: TypeAlias = "asyncio.Future[Outcome]"
"""The future ``AsyncPurgatory.wait`` awaits for one operation."""


def _deliver(future: Waiter, outcome: Outcome | Exception) -> None:
    """Set ``outcome`` (a result or an exception) unless the future is already done."""
    if future.done():  # cancelled by the awaiting task meanwhile (R47)
        return
    if isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def settle(future: Waiter | None, outcome: Outcome | Exception) -> None:
    """Deliver ``outcome`` to ``future`` from whichever thread is finishing the operation.

    On the future's loop thread (the loop running here): at once. From another thread:
    ``call_soon_threadsafe``; if that loop is closed, the outcome is dropped (R50).
    """
    if future is None:
        return
    loop = future.get_loop()
    if _get_running_loop() is loop:
        _deliver(future, outcome)
        return
    with contextlib.suppress(RuntimeError):  # RuntimeError: the loop is closed, nobody to wake
        loop.call_soon_threadsafe(_deliver, future, outcome)


class _Awaitable:
    """What makes an operation awaitable, on either implementation's ``DelayedOperation``.

    A mixin ahead of the implementation's class in the MRO (no slots of its own, so an
    optimized subclass keeps its ``__slots__``): every ``super()`` call reaches the
    implementation's method.
    """

    if not TYPE_CHECKING:  # no layout of its own; the two slots are the subclasses'
        __slots__ = ()
    _waiter: Waiter | None
    _expiring: bool

    def force_complete(self) -> bool:
        """``force_complete`` (R16), then settle the waiter with the outcome (R46, R48)."""
        try:
            won: bool = super().force_complete()  # type: ignore[misc]
        except Exception as exc:  # raised by on_complete: this call won (R48)
            waiter, self._waiter = self._waiter, None
            settle(waiter, exc)
            raise
        if won:
            waiter = self._waiter
            if waiter is not None:
                self._waiter = None
                settle(waiter, _EXPIRED if self._expiring else _COMPLETED)
        return won

    def run(self) -> None:
        """Expire (R17): a ``force_complete`` won here settles the waiter ``EXPIRED``."""
        self._expiring = True
        super().run()  # type: ignore[misc]

    def cancel(self) -> None:
        """``cancel`` (an abandon once submitted); an abandoned waiter gets ``ABANDONED``."""
        super().cancel()  # type: ignore[misc]
        if self._waiter is not None and self.is_abandoned:
            waiter, self._waiter = self._waiter, None
            settle(waiter, Outcome.ABANDONED)

    if TYPE_CHECKING:  # provided by the implementation's class, after this one in the MRO

        @property
        def is_abandoned(self) -> bool: ...


class DelayedOperation(_Awaitable, optimized.DelayedOperation):
    """An optimized ``DelayedOperation`` that ``AsyncPurgatory.wait`` can await.

    Same constructor and rules as ``kpurgatory.DelayedOperation`` (R16-R21). Extra cost
    per operation: two slots, one Python-level ``force_complete`` and ``run`` override.
    """

    __slots__ = ("_expiring", "_waiter")

    def __init__(self, delay_ms: int, lock: AbstractLock | None = None) -> None:
        super().__init__(delay_ms, lock)
        self._waiter = None
        self._expiring = False


class ReferenceDelayedOperation(_Awaitable, reference.DelayedOperation):
    """A reference ``DelayedOperation`` that ``AsyncPurgatory.wait`` can await.

    Same as ``DelayedOperation`` of this module, on ``kpurgatory.reference`` (use it
    with ``AsyncPurgatory(..., implementation="reference")``).
    """

    def __init__(self, delay_ms: int, lock: AbstractLock | None = None) -> None:
        super().__init__(delay_ms, lock)
        self._waiter = None
        self._expiring = False
