"""Programs for the history checker: which operations exist, and what each thread calls.

A ``Program`` is data: the operations (delay, watch keys, the thread that submits it)
and, per thread, a list of ``Call``s. ``random_program`` draws one from a seeded
``random.Random``; ``cleanup_calls`` is what the main thread does after the others
joined (let every timeout pass, force every operation, check every key), so the final
state says whether anything was lost or left watched.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

__all__ = [
    "CALL_KINDS",
    "DEFAULT_WEIGHTS",
    "Call",
    "OpSpec",
    "Program",
    "cleanup_calls",
    "random_program",
]

CALL_KINDS = (
    "submit",  # try_complete_else_watch(op, op's keys)
    "set_ready",  # the flag op.try_complete reads
    "check",  # check_and_complete(key)
    "cancel_for_key",
    "advance",  # advance_clock(ms)
    "force",  # op.force_complete()
    "abandon",  # purgatory.abandon(op)
    "safe_try",  # op.safe_try_complete()
    "maybe_try",  # op.maybe_try_complete()
)
"""Every kind of call a program may make."""

_WRITTEN: dict[str, str] = {
    "submit": "try_complete_else_watch(op{op}, {keys})",
    "set_ready": "set_ready(op{op})",
    "check": "check_and_complete({key!r})",
    "cancel_for_key": "cancel_for_key({key!r})",
    "advance": "advance_clock({ms})",
    "force": "op{op}.force_complete()",
    "abandon": "abandon(op{op})",
    "safe_try": "op{op}.safe_try_complete()",
    "maybe_try": "op{op}.maybe_try_complete()",
}
"""How a reader writes each kind of call (``Call.describe``)."""

_OP_CALLS = frozenset({"submit", "set_ready", "force", "abandon", "safe_try", "maybe_try"})
_KEY_CALLS = frozenset({"check", "cancel_for_key"})


@dataclass(frozen=True)
class OpSpec:
    """One operation: its delay, the keys it is watched on, the thread that submits it."""

    delay_ms: int
    keys: tuple[str, ...]
    owner: int


@dataclass(frozen=True)
class Call:
    """One call of a thread's program: ``kind`` with an operation index, a key or an
    advance in milliseconds, as the kind needs."""

    kind: str
    op: int = -1
    key: str = ""
    ms: int = 0

    def __post_init__(self) -> None:
        if self.kind not in CALL_KINDS:
            raise ValueError(f"kind must be one of {', '.join(CALL_KINDS)}, not {self.kind!r}")
        if self.kind in _OP_CALLS and self.op < 0:
            raise ValueError(f"op must be an operation index for a {self.kind} call")
        if self.kind in _KEY_CALLS and not self.key:
            raise ValueError(f"key must be given for a {self.kind} call")
        if self.ms < 0:
            raise ValueError(f"ms must be >= 0, not {self.ms}")

    def describe(self, program: Program) -> str:
        """The call as a reader writes it: ``try_complete_else_watch(op1)``, ..."""
        keys = list(program.ops[self.op].keys) if self.kind == "submit" else None
        return _WRITTEN[self.kind].format(op=self.op, key=self.key, ms=self.ms, keys=keys)


@dataclass(frozen=True)
class Program:
    """Operations, keys and one call list per thread; ``threads[i]`` runs on thread Ti."""

    ops: tuple[OpSpec, ...]
    keys: tuple[str, ...]
    threads: tuple[tuple[Call, ...], ...]

    def __post_init__(self) -> None:
        if not self.threads:
            raise ValueError("threads must hold at least one thread's calls")
        for index, op in enumerate(self.ops):
            if not op.keys or not set(op.keys) <= set(self.keys):
                raise ValueError(f"ops[{index}].keys must be a non-empty subset of keys")
            if len(set(op.keys)) != len(op.keys):
                raise ValueError(f"ops[{index}].keys must not repeat a key")
            if op.delay_ms < 0:
                raise ValueError(f"ops[{index}].delay_ms must be >= 0")
        submitted = [call.op for calls in self.threads for call in calls if call.kind == "submit"]
        if len(submitted) != len(set(submitted)):
            raise ValueError("threads must submit each operation at most once")
        for calls in self.threads:
            for call in calls:
                if call.op >= len(self.ops):
                    raise ValueError(f"call {call} names an operation that ops does not hold")
                if call.key and call.key not in self.keys:
                    raise ValueError(f"call {call} names a key that keys does not hold")

    def without_call(self, thread: int, index: int) -> Program:
        """The program with one call removed (a submission's operation stays declared)."""
        calls = self.threads[thread][:index] + self.threads[thread][index + 1 :]
        return replace(self, threads=(*self.threads[:thread], calls, *self.threads[thread + 1 :]))

    def with_call(self, thread: int, index: int, call: Call) -> Program:
        """The program with one call replaced."""
        calls = (*self.threads[thread][:index], call, *self.threads[thread][index + 1 :])
        return replace(self, threads=(*self.threads[:thread], calls, *self.threads[thread + 1 :]))

    def without_thread(self, thread: int) -> Program:
        """The program with one thread's calls removed."""
        return replace(self, threads=self.threads[:thread] + self.threads[thread + 1 :])

    @property
    def size(self) -> int:
        """How many calls the threads make (what shrinking reduces)."""
        return sum(len(calls) for calls in self.threads)


def cleanup_calls(program: Program) -> tuple[Call, ...]:
    """What the main thread calls once the others joined: every timeout passes, every
    operation is forced, every key checked, so nothing may stay pending or watched."""
    calls = [Call("advance", ms=10)]
    calls += [Call("force", op=index) for index in range(len(program.ops))]
    calls += [Call("check", key=key) for key in program.keys]
    return tuple(calls)


DEFAULT_WEIGHTS: dict[str, int] = {
    "set_ready": 4,
    "check": 3,
    "maybe_try": 3,
    "advance": 2,
    "cancel_for_key": 1,
    "force": 1,
    "abandon": 1,
    "safe_try": 1,
}
"""The default mix of call kinds (a submission is always drawn, once per thread)."""


def random_program(
    rng: random.Random,
    *,
    threads: tuple[int, int] = (2, 4),
    calls: tuple[int, int] = (2, 5),
    weights: dict[str, int] | None = None,
) -> Program:
    """A random program: 2-4 threads (``threads``), each submitting its own operation
    (delay 0-3 ms, on 1-2 of 2-3 keys) among 2-5 other calls (``calls``), drawn with
    ``weights`` per call kind (a kind not named weighs 1; None: the default mix)."""
    if weights is not None:
        unknown = set(weights) - set(DEFAULT_WEIGHTS)
        if unknown or any(type(w) is not int or w < 0 for w in weights.values()):
            raise ValueError(
                f"weights must map kinds among {', '.join(DEFAULT_WEIGHTS)} to ints >= 0, "
                f"not {weights}"
            )
    if not 1 <= threads[0] <= threads[1]:
        raise ValueError(
            f"threads must be a range (low, high) with 1 <= low <= high, not {threads}"
        )
    if not 0 <= calls[0] <= calls[1]:
        raise ValueError(f"calls must be a range (low, high) with 0 <= low <= high, not {calls}")
    count = rng.randint(*threads)
    keys = ("a", "b", "c")[: rng.randint(2, 3)]
    ops = tuple(
        OpSpec(rng.randint(0, 3), tuple(rng.sample(keys, rng.randint(1, 2))), owner)
        for owner in range(count)
    )
    mix = (
        DEFAULT_WEIGHTS
        if weights is None
        else {kind: weights.get(kind, 1) for kind in DEFAULT_WEIGHTS}
    )
    kinds, chances = list(mix), list(mix.values())
    programs = []
    for owner in range(count):
        thread: list[Call] = []
        for _ in range(rng.randint(*calls)):
            kind = rng.choices(kinds, chances)[0]
            if kind in _KEY_CALLS:
                thread.append(Call(kind, key=rng.choice(keys)))
            elif kind == "advance":
                thread.append(Call(kind, ms=rng.randint(0, 2)))
            else:
                thread.append(Call(kind, op=rng.randrange(count)))
        thread.insert(rng.randint(0, len(thread)), Call("submit", op=owner))
        programs.append(tuple(thread))
    return Program(ops, keys, tuple(programs))
