"""What Hypothesis draws for the lifecycle machine's user code: fault scripts and their kinds.

Per operation a script says which call of which callback raises, knocks, cancels, shuts
the purgatory down or calls back in (a ``lifecycle_model.Call``, R69); the other
strategies draw delays, the executor's faults and where a submission's fault goes.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tests.machines.lifecycle_model import (
    CALLBACKS,
    CANCEL,
    CLOSE_REFUSE,
    KNOCK,
    SHUTDOWN,
    Action,
    Call,
)
from tests.machines.user_code import KEYS, KINDS

FAULT_ACTIONS = st.sampled_from((KNOCK, *KINDS))
TRY_ACTIONS = st.one_of(
    st.sampled_from((KNOCK, *KINDS)),
    st.sampled_from((KNOCK, *KINDS)),
    st.sampled_from((KNOCK, *KINDS)),
    st.sampled_from((CANCEL, CANCEL, CANCEL, SHUTDOWN)),
)
"""What try_complete may do besides raise: knock, cancel its own operation, or shut the
purgatory down (the single-threaded forms of the submission races of tests/concurrency)."""


def _knock_then_raise(first: int, gap: int, kind: str) -> dict[tuple[str, int], str]:
    """A knock on one try_complete and a raise on a later one: the R41 retry that fails."""
    return {("try_complete", first): KNOCK, ("try_complete", first + gap): kind}


TARGETS = st.integers(0, 4)
"""0: the operation whose callback runs; k: the (k - 1)-th operation made, modulo."""

_KEY_CALLS = st.builds(
    Call, st.sampled_from(["check_and_complete", "cancel_for_key"]), key=st.sampled_from(KEYS)
)
_OP_CALLS = st.builds(
    Call, st.sampled_from(["abandon", "cancel", "force_complete"]), target=TARGETS
)
_SUBMIT_CALLS = st.builds(
    Call,
    st.just("submit"),
    target=TARGETS,
    keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=2).map(tuple),
)
_CLOCK_CALLS = st.builds(Call, st.just("advance_clock"), amount=st.integers(0, 15))
CALLS = st.one_of(_KEY_CALLS, _OP_CALLS, _SUBMIT_CALLS, _CLOCK_CALLS)
"""What a callback calls back in with (R69), shutdown aside."""

ENDING_CALLS = st.one_of(*(CALLS,) * 8, st.just(Call("shutdown")))
"""What on_complete or on_expiration calls back in with; one in nine shuts the purgatory
down (a try's shutdown is TRY_ACTIONS' ``SHUTDOWN``): a shut-down purgatory refuses
most later steps, so shutdowns are kept rare."""

_SCRIPT_ENTRY = st.one_of(
    st.tuples(st.tuples(st.just("try_complete"), st.integers(1, 4)), TRY_ACTIONS),
    st.tuples(st.tuples(st.sampled_from(CALLBACKS[1:]), st.just(1)), st.sampled_from(KINDS)),
)

_CALL_ENTRY = st.one_of(
    st.tuples(st.tuples(st.just("try_complete"), st.integers(1, 3)), CALLS),
    st.tuples(st.tuples(st.sampled_from(CALLBACKS[1:]), st.just(1)), ENDING_CALLS),
)


def _one_call(callback: str, count: int, call: Call) -> dict[tuple[str, int], Action]:
    return {(callback, count): call}


_KNOWN_SHAPES = st.builds(_one_call, st.just("try_complete"), st.just(2), _KEY_CALLS)
"""The shape of a re-entrancy bug found by review, weighted up: a sweep of one of its
keys from the submission's second try (R66). (Shutdown from an expiry, R64, is staged
by the executor's "close the first" of ``drain_due``: a script that shuts down from
every expiry ends most runs early.)"""

FAULT_SCRIPTS = st.one_of(
    st.just({}),
    st.builds(_knock_then_raise, st.integers(1, 2), st.integers(1, 2), st.sampled_from(KINDS)),
    st.lists(_SCRIPT_ENTRY, max_size=3).map(dict),
    st.lists(_SCRIPT_ENTRY, min_size=1, max_size=3).map(dict),
    st.lists(_CALL_ENTRY, min_size=1, max_size=3).map(dict),
    st.lists(st.one_of(_SCRIPT_ENTRY, _CALL_ENTRY), min_size=2, max_size=3).map(dict),
    _KNOWN_SHAPES,
)
"""Per operation: which call of which callback raises (try_complete may also knock,
cancel its operation or shut the purgatory down) or calls back in (a ``Call``)."""

EXECUTOR_KINDS = (*KINDS, "RuntimeError", CLOSE_REFUSE)
"""What the executor's submit does for a chosen task: raise (``RuntimeError`` as a pool
that cannot start a thread does, R65), or close the purgatory and refuse."""

SUBMIT_SITES: tuple[str | None, ...] = (None, None, None, None, "lock", "clock", "executor", "key")
"""Where a submission's scoped fault is injected (None: nowhere), read when a machine is made."""

OPEN_SPEC_VIOLATIONS: tuple[str, ...] = ()
"""What the quick machines leave out while a spec violation it found is open (each
replayed by a test in test_lifecycle_model.py). None is open now. Fixed, their replays
now ordinary tests: ``"lock"`` (an operation lock whose ``acquire`` raised kept the
submission's claim, R54), ``"finished before watching"`` (an operation finished before
its submission's watching step stayed counted as unfinished, R61), and a submission
shut down by its own callback (timers off, its R41 retry) or inside its own timer add
(an executor that shuts down, then refuses), which returned normally (R64)."""

DELAYS = st.one_of(st.integers(-3, 12), st.integers(-3, 40))
"""Operation delays: mostly near, so that several fall due in one drain."""

MAYBE_KIND = st.one_of(st.none(), st.none(), st.sampled_from(KINDS))
