"""``AsyncPurgatory.purgatory`` and ``.timer``: read-only attributes typed by the operation type.

An ``AsyncPurgatory[T]`` wraps the optimized purgatory when ``T`` is an aio
``DelayedOperation`` and the reference one when it is a ``ReferenceDelayedOperation``.
A property has one return type, so it would have to say "either" (a union the user
must narrow before every use); these descriptors overload ``__get__`` on the
purgatory's type parameter instead, so a user's checker (mypy, pyright) sees
``p.purgatory`` as ``kpurgatory.optimized.DelayedOperationPurgatory[T]`` for a default
``AsyncPurgatory`` and as the reference one for an ``AsyncPurgatory`` of reference
operations. At run time each is a data descriptor like a property without a setter:
it reads one attribute, and assigning raises ``AttributeError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

from kpurgatory import optimized, reference

if TYPE_CHECKING:
    from kpurgatory.aio.operation import DelayedOperation, ReferenceDelayedOperation
    from kpurgatory.aio.purgatory import AsyncPurgatory

__all__ = ["WrappedPurgatory", "WrappedTimer"]

_Optimized = TypeVar("_Optimized", bound="DelayedOperation")
_Reference = TypeVar("_Reference", bound="ReferenceDelayedOperation")


class _ReadOnly:
    """A read-only attribute of ``AsyncPurgatory`` that returns one of its slots."""

    __slots__ = ("_attribute", "_name")

    def __init__(self, attribute: str) -> None:
        self._attribute = attribute
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def _read(self, obj: object) -> Any:
        return getattr(obj, self._attribute)

    def __set__(self, obj: object, value: NoReturn) -> NoReturn:
        raise AttributeError(f"AsyncPurgatory.{self._name} is read-only")


# WrappedPurgatory and WrappedTimer share a shape deliberately: each spells out its own
# overloads, the types a user's checker gives per implementation.
class WrappedPurgatory(_ReadOnly):
    """The wrapped ``DelayedOperationPurgatory`` (for its counters and metrics)."""

    __slots__ = ()

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> WrappedPurgatory: ...

    @overload
    def __get__(
        self, obj: AsyncPurgatory[_Optimized], owner: type | None = None
    ) -> optimized.DelayedOperationPurgatory[_Optimized]: ...

    @overload
    def __get__(
        self, obj: AsyncPurgatory[_Reference], owner: type | None = None
    ) -> reference.DelayedOperationPurgatory[_Reference]: ...

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        return self if obj is None else self._read(obj)


class WrappedTimer(_ReadOnly):
    """The wrapped purgatory's ``SystemTimer``."""

    __slots__ = ()

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> WrappedTimer: ...

    @overload
    def __get__(
        self, obj: AsyncPurgatory[_Optimized], owner: type | None = None
    ) -> optimized.SystemTimer: ...

    @overload
    def __get__(
        self, obj: AsyncPurgatory[_Reference], owner: type | None = None
    ) -> reference.SystemTimer: ...

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        return self if obj is None else self._read(obj)
