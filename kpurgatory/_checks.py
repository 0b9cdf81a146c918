"""Argument checks shared by every public constructor and method.

Each check names the offending argument in its message, so a caller who passes
``tick_ms=0`` reads ``tick_ms must be >= 1, got 0`` and not a bare error. ``bool``
is rejected wherever an ``int`` is expected: ``True`` as a delay is a bug, not 1 ms.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable
from concurrent.futures import Executor

from kpurgatory.spec.protocols import AbstractLock, Clock

_NOT_REENTRANT = (type(threading.Lock()), threading.Semaphore)
"""Lock types whose holder cannot take them again (``BoundedSemaphore`` is a ``Semaphore``)."""


def require_int(name: str, value: object) -> int:
    """Return ``value`` if it is an ``int`` (and not a ``bool``), else raise ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def require_at_least(name: str, value: object, minimum: int) -> int:
    """Return ``value`` if it is an ``int`` >= ``minimum``; else ``TypeError``/``ValueError``."""
    number = require_int(name, value)
    if number < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {number}")
    return number


def require_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is a ``bool``, else raise ``TypeError``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


def require_str(name: str, value: object) -> str:
    """Return ``value`` if it is a ``str``, else raise ``TypeError``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def require_clock_and_executor(clock: object, executor: object) -> None:
    """Raise ``TypeError`` unless ``clock`` and ``executor`` (a timer's) are each None or
    a real one: a ``Clock`` (``now_ms`` and ``wait``), a ``concurrent.futures.Executor``."""
    if clock is not None and not isinstance(clock, Clock):
        raise TypeError(f"clock must provide now_ms() and wait(), not {type(clock).__name__}")
    if executor is not None and not isinstance(executor, Executor):
        raise TypeError(
            f"executor must be a concurrent.futures.Executor, not {type(executor).__name__}"
        )


def require_operation_lock(lock: object) -> AbstractLock:
    """Return ``lock`` if it can guard an operation (R21, R63), else raise ``TypeError``.

    It must provide ``acquire``/``release`` and be re-entrant: the library takes an
    operation's lock again inside calls that hold it (an expiry handed over inline
    during its own submission, a callback that calls back in). A lock of a known type
    that its holder cannot take again is refused here rather than deadlocking later; a
    lock of another type is taken at its word."""
    if not isinstance(lock, AbstractLock):
        raise TypeError(f"lock must provide acquire() and release(), not {type(lock).__name__}")
    if isinstance(lock, _NOT_REENTRANT):
        raise TypeError(
            f"lock must be re-entrant (a threading.RLock), not {type(lock).__name__}: "
            "the library takes an operation's lock again while holding it"
        )
    return lock


def require_hashable(name: str, value: object) -> Hashable:
    """Return ``value`` if ``hash(value)`` works, else raise ``TypeError`` naming ``name``."""
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"{name} must be hashable, not {type(value).__name__}") from None
    return value


def watch_key_list(watch_keys: Iterable[Hashable]) -> list[Hashable]:
    """Validate ``watch_keys`` and return its distinct keys in first-occurrence order.

    A lone ``str`` or ``bytes`` is refused: iterating it would silently watch one key
    per character.
    """
    if isinstance(watch_keys, (str, bytes, bytearray)):
        raise TypeError(
            "watch_keys must be an iterable of keys, not a single "
            f"{type(watch_keys).__name__}; wrap it in a list"
        )
    try:
        items = list(watch_keys)
    except TypeError:
        raise TypeError(
            f"watch_keys must be an iterable of keys, not {type(watch_keys).__name__}"
        ) from None
    for key in items:
        require_hashable("each watch key", key)
    if not items:
        raise ValueError("watch_keys must contain at least one key")
    return list(dict.fromkeys(items))


def unimplemented(cls: type, abstract: dict[str, object]) -> tuple[str, ...]:
    """The names of ``abstract`` that ``cls`` still resolves to the abstract definition.

    ``abstract`` maps a method name to the function object of its abstract declaration
    (as found in the declaring class's ``__dict__``). Lookup follows ``cls.__mro__``
    through the class dicts, so it works on compiled (mypyc) classes too, which carry no
    ``__isabstractmethod__`` marks. Sorted, as ``abc`` reports them.
    """
    missing = []
    for name, declaration in abstract.items():
        for klass in cls.__mro__:
            if name in klass.__dict__:
                if klass.__dict__[name] is declaration:
                    missing.append(name)
                break
    return tuple(sorted(missing))


def abstract_class_error(cls: type, missing: tuple[str, ...]) -> TypeError:
    """The ``TypeError`` for instantiating ``cls`` with ``missing`` methods (``abc``'s words)."""
    plural = "s" if len(missing) > 1 else ""
    return TypeError(
        f"Can't instantiate abstract class {cls.__name__} with abstract method{plural} "
        f"{', '.join(missing)}"
    )


def refuse_override(cls: type, name: str, owner: type) -> None:
    """``TypeError`` unless ``cls`` inherits attribute ``name`` from ``owner`` unchanged (R43).

    A task's delay is fixed at construction: every timer reads the value given to the
    constructor, so a subclass that redefines ``delay_ms`` (a property, a method, a
    class attribute) would be scheduled with a value other than the one it reports.
    """
    for klass in cls.__mro__:
        if name in klass.__dict__:
            if klass is not owner:
                raise TypeError(
                    f"{cls.__name__} overrides {name} (in {klass.__name__}): {name} is "
                    f"fixed at construction (R43); pass the delay to "
                    f"{owner.__name__}.__init__ instead"
                )
            return


def declared(cls: type, name: str) -> object:
    """``cls.__dict__[name]``: the object ``cls`` itself declares under ``name``.

    (Compiled modules cannot read a class's ``__dict__`` directly; this module is not
    compiled.)
    """
    return cls.__dict__[name]
