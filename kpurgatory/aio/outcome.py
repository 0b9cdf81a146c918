"""``Outcome``: how an awaited operation left the purgatory (rules R46-R49).

Kafka has no such value: a broker learns the outcome inside ``onComplete`` (by reading
its own state) and in ``onExpiration``. An awaiting coroutine needs it as a return
value, so ``AsyncPurgatory.wait`` returns one of these.
"""

from __future__ import annotations

import enum

__all__ = ["Outcome"]


class Outcome(enum.Enum):
    """How an operation awaited with ``AsyncPurgatory.wait`` finished."""

    COMPLETED = "completed"
    """Its condition held (``try_complete``) or someone called ``force_complete`` (R46)."""

    EXPIRED = "expired"
    """Its delay ran out first: the timer's expiry won (R17, R46)."""

    ABANDONED = "abandoned"
    """Taken out unfinished by ``AsyncPurgatory.abandon``, ``cancel()`` or ``shutdown``:
    neither ``on_complete`` nor ``on_expiration`` ran (R47, R49)."""
