"""Sweeps that finish before they raise (R53).

A call that runs user code for several operations or tasks (``check_and_complete``, the
hand-over of a drain, ``cancel_for_key``'s knock attempts, an asyncio shutdown) handles
every one of them, collecting what they raise, and raises once at the end: one error as
it is, several as one ``BaseExceptionGroup`` (an ``ExceptionGroup`` when all are
``Exception``s). Both implementations and the aio layer use these two functions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

R = TypeVar("R")

__all__ = ["KeyFailedError", "key_failed_in_purge", "keyed", "not_handed_over", "raise_collected"]


def raise_collected(errors: list[BaseException] | None, what: str) -> None:
    """Raise what a sweep collected: nothing if ``errors`` is empty or None, the one error
    as it is, or a ``BaseExceptionGroup`` of all of them in the order raised."""
    if not errors:
        return
    if len(errors) == 1:
        raise errors[0]
    raise BaseExceptionGroup(f"{len(errors)} callbacks raised during {what}", errors)


def not_handed_over(exc: BaseException, task: object) -> BaseException:
    """``exc`` raised by an executor's ``submit`` (not by the task: ``run_logged`` keeps a
    task's ``Exception`` to itself), with a note naming the task that did not run."""
    if isinstance(exc, Exception):
        exc.add_note(f"the executor's submit raised: timer task {task!r} was not handed over")
    return exc


class KeyFailedError(Exception):
    """A key's own ``__hash__`` or ``__eq__`` raised ``error`` during a purge (R67)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def keyed(call: Callable[..., R], *args: object) -> R:
    """``call(*args)``, a dict operation that hashes or compares a user's key, with what
    the key raises wrapped in ``KeyFailedError``: a purge tells the key's errors from its own."""
    try:
        return call(*args)
    except BaseException as exc:
        raise KeyFailedError(exc) from exc


def key_failed_in_purge(
    logger: logging.Logger, name: str, key: object, exc: BaseException
) -> BaseException | None:
    """A key's ``__hash__``/``__eq__`` raised ``exc`` during a purge of purgatory ``name``
    (R67): log it with the key; return ``exc`` if it must still propagate after the rest
    of the purge (it is not an ``Exception``), else None."""
    logger.error("purgatory %r skipped key %r in a purge", name, key, exc_info=exc)
    return None if isinstance(exc, Exception) else exc
