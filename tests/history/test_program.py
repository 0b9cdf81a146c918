"""How a printed history writes each kind of call (``Call.describe``)."""

from __future__ import annotations

import pytest

from kpurgatory.history.program import CALL_KINDS, Call, OpSpec, Program

WRITTEN = {
    Call("submit", op=1): "try_complete_else_watch(op1, ['a', 'b'])",
    Call("set_ready", op=1): "set_ready(op1)",
    Call("check", key="b"): "check_and_complete('b')",
    Call("cancel_for_key", key="a"): "cancel_for_key('a')",
    Call("advance", ms=7): "advance_clock(7)",
    Call("force", op=0): "op0.force_complete()",
    Call("abandon", op=1): "abandon(op1)",
    Call("safe_try", op=0): "op0.safe_try_complete()",
    Call("maybe_try", op=1): "op1.maybe_try_complete()",
}
PROGRAM = Program((OpSpec(5, ("a",), 0), OpSpec(9, ("a", "b"), 0)), ("a", "b"), (tuple(WRITTEN),))


def test_every_kind_of_call_has_a_written_form() -> None:
    assert sorted(call.kind for call in WRITTEN) == sorted(CALL_KINDS)


@pytest.mark.parametrize(("call", "text"), WRITTEN.items(), ids=lambda c: str(c))
def test_a_call_is_written_as_the_library_call_it_stands_for(call: Call, text: str) -> None:
    assert call.describe(PROGRAM) == text
