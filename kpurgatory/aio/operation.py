"""Awaitable delayed operations (each implementation's ``DelayedOperation``) and ``Waiter``.

``DelayedOperation`` (on the optimized wheel, the default) and
``ReferenceDelayedOperation`` (on the reference implementation) behave exactly as their
bases (R16-R21) and in addition deliver the operation's ``Outcome`` to its ``Waiter``
(R46): once a ``force_complete`` has won and ``on_complete`` has returned, the waiter
resolves to ``EXPIRED`` when the win came from the timer's ``run`` (in the thread
running it), else ``COMPLETED``; an ``on_complete`` that raises anything hands that
exception to the waiter as well as to the caller (R48); an abandon, however it is made,
resolves it to ``ABANDONED`` (R47, R58). The optimized operation does this natively (its
``_waiter`` slot); the reference operation has no such slot, so
``ReferenceDelayedOperation`` overrides ``force_complete``, ``run`` and the abandon
hook. A waiter is settled directly on the loop thread, through
``call_soon_threadsafe`` from any other thread, and dropped if the loop is closed (R50).

Subclass one of these exactly as you would subclass ``kpurgatory.DelayedOperation``:
implement ``try_complete``, ``on_complete`` and ``on_expiration``.
"""

from __future__ import annotations

import asyncio
import contextlib
from threading import get_ident
from typing import TYPE_CHECKING, Any, Protocol

from kpurgatory import optimized, reference
from kpurgatory.aio.outcome import Outcome
from kpurgatory.spec.protocols import AbstractLock

__all__ = ["DelayedOperation", "ReferenceDelayedOperation", "Waiter"]

_COMPLETED = Outcome.COMPLETED
_EXPIRED = Outcome.EXPIRED
_ABANDONED = Outcome.ABANDONED


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, or None (``asyncio.get_running_loop``)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Registry(Protocol):
    """What a waiter reports to: its ``AsyncPurgatory``."""

    def _forget(self, waiter: Waiter) -> None: ...

    def _give_up(self, operation: Any) -> None: ...


class Waiter(asyncio.Future[Outcome]):
    """The future of one submitted operation's ``Outcome`` (R46).

    ``AsyncPurgatory.submit`` returns one; ``AsyncPurgatory.wait`` awaits one. A plain
    ``asyncio.Future`` of the purgatory's loop in every respect (await it, pass it to
    ``asyncio.wait``, ``wait_for``, ``gather`` or ``shield``, add done callbacks) but one:
    cancelling it abandons its operation at once, inside the ``cancel`` call (R47).
    ``Task.cancel`` calls ``cancel`` on the future its task awaits, and so do a
    ``wait_for`` or ``asyncio.timeout`` expiry and a ``TaskGroup`` through the task, so no
    completion can slip in between the cancellation and the abandon (a done callback
    would run one loop iteration later). Cost over a plain loop future: two slots (24
    bytes), and a task awaiting it takes asyncio's path for future subclasses (measured
    in docs/performance.md).
    """

    __slots__ = ("_operation", "_registry")

    def __init__(
        self, registry: _Registry, operation: Any, loop: asyncio.AbstractEventLoop
    ) -> None:
        super().__init__(loop=loop)
        self._registry = registry
        self._operation = operation

    def cancel(self, msg: Any | None = None) -> bool:
        """Cancel the future (``Future.cancel``), then abandon its operation (R47).

        Returns what ``Future.cancel`` returns: False, abandoning nothing, if the outcome
        had already been set (an operation that finished first stays finished).
        """
        if not super().cancel(msg=msg):
            return False
        self._registry._forget(self)
        self._registry._give_up(self._operation)
        return True

    # -- told by the operation (kpurgatory.optimized.operation._Waiter), once ----------

    def _completed(self, expired: bool) -> None:
        """A ``force_complete`` won and ``on_complete`` returned: ``EXPIRED`` if the win
        came from ``run``, else ``COMPLETED`` (R46)."""
        outcome = _EXPIRED if expired else _COMPLETED
        if running_loop() is self.get_loop():  # _settle inlined: the common case
            self._registry._forget(self)
            if not self.done():  # cancelled by its task meanwhile (R47)
                self.set_result(outcome)
            return
        self._settle(outcome)

    def _raised(self, exc: BaseException) -> None:
        """``on_complete`` raised ``exc`` (anything, R48): the waiter raises it too."""
        self._settle(exc)

    def _abandoned(self) -> None:
        """Abandoned (R40, R47): ``ABANDONED``."""
        self._settle(_ABANDONED)

    def _settle(self, outcome: Outcome | BaseException) -> None:
        """Deliver ``outcome`` from whichever thread is finishing the operation (R59).

        On the loop's own thread (the loop running here): at once. From any other
        thread: ``call_soon_threadsafe``; if the loop is closed, dropped (R50).
        """
        loop = self.get_loop()
        if running_loop() is loop:
            self._deliver(outcome)
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody left to wake
            loop.call_soon_threadsafe(self._deliver, outcome)

    def _deliver(self, outcome: Outcome | BaseException) -> None:
        """On the loop: leave the registry, set ``outcome`` unless already cancelled."""
        self._registry._forget(self)
        if self.done():  # cancelled by its task meanwhile (R47)
            return
        if isinstance(outcome, BaseException):
            self.set_exception(outcome)
        else:
            self.set_result(outcome)


class DelayedOperation(optimized.DelayedOperation):
    """An optimized ``DelayedOperation`` that ``AsyncPurgatory.wait`` can await.

    Same constructor and rules as ``kpurgatory.DelayedOperation`` (R16-R21). Nothing
    is overridden: the optimized operation tells its waiter natively (slot ``_waiter``,
    set by ``submit``) how it finished, so awaiting costs no Python-level override per
    operation; this class is what ``AsyncPurgatory`` accepts as awaitable.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        # The inherited constructor, as users' checkers should see it: ``delay_ms`` is an
        # ``int``. (The compiled base annotates it with ``kpurgatory._typing.IntArg`` so
        # that mypyc leaves the R35 checks to its body; a checker would name that type
        # variable in its error.) Declared for checkers only: no extra call at run time.
        def __init__(self, delay_ms: int, lock: AbstractLock | None = None) -> None: ...


class ReferenceDelayedOperation(reference.DelayedOperation):
    """A reference ``DelayedOperation`` that ``AsyncPurgatory.wait`` can await.

    Same as ``DelayedOperation`` of this module, on ``kpurgatory.reference`` (use it
    with ``AsyncPurgatory(..., implementation="reference")``). The reference operation
    has no waiter of its own, so this class adds it: ``force_complete``, ``run`` and the
    abandon that ``purgatory.abandon`` and ``cancel`` make tell the waiter, as the
    optimized operation does natively.
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
        except BaseException as exc:  # raised by on_complete (anything): this call won
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

    def _abandon(self) -> bool:
        """The abandon hook (R40; lock held): an abandoned waiter gets ``ABANDONED``
        however the abandon was made (``purgatory.abandon``, ``cancel``, R58)."""
        if not super()._abandon():
            return False
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter._abandoned()
        return True
