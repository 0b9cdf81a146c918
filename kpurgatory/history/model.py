"""The specification as atomic steps: what each call may do, one step at a time.

Written from docs/spec.md alone (it imports neither implementation). Each call of a
program is a small routine of steps (R22 submission, R25 sweep, R29/R55 cancel_for_key,
R40 abandon, R16 force_complete, R18/R41 safe_try_complete, R20 maybe_try_complete,
R7/R2/R6/R11/R17 advance_clock and expiry); a step reads or writes the shared state
atomically, and a step that needs an operation's lock held by another thread is
disabled. Where the spec writes a read and a later write as two statements, they are
two steps. A step may emit points (a callback's start or end, a call's invocation or
return) that the search matches against the recorded history.

The state is plain tuples, so the search can remember the states it has seen:
``State`` is (clock reading, timer's current time, unfinished count, operations,
watcher lists); an operation is ``Op``; a thread is (call index, point cursor, frames,
result), a frame (routine, pc, registers, value returned to it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from kpurgatory.history.history import Final, Result
from kpurgatory.history.program import Call, Program

__all__ = ["Emit", "Model", "Move", "Op", "State", "Thread"]

PENDING, COMPLETED, ABANDONED = 0, 1, 2
NOT_TIMED, DRAINED = -1, -2  # Op.timer: a due time >= 0 while scheduled


class Op(NamedTuple):
    """One operation's state; ``fin`` is the ending flag every ending races for (R68)."""

    claimed: bool  # submitted (R34)
    fin: int  # PENDING, COMPLETED or ABANDONED
    pending: bool  # the try-complete pending flag (R20, R41)
    ready: bool  # the condition try_complete reads
    holder: int  # the thread holding its lock, or -1
    depth: int  # re-entrant holds (R63)
    timer: int  # NOT_TIMED, DRAINED (taken by a drain, not handed over yet) or a due time
    counted: bool  # counted as unfinished (R61)
    untimed: bool  # taken out of the timer by cancel_for_key: never expires (R29, R66)


class State(NamedTuple):
    """The shared state of purgatory, timer, clock and operations."""

    now: int
    current: int  # the timer's current time (R2)
    unfinished: int  # R61's count
    ops: tuple[Op, ...]
    watchers: tuple[tuple[int, ...], ...]  # per key index, operation indices in watch order


Regs = tuple[Any, ...]
"""A routine's registers (operation, positions, results so far)."""

Frame = tuple[str, int, Regs, Any]
Thread = tuple[int, int, tuple[Frame, ...], object]
"""(call index, point cursor, frames, result of the finished top routine or _IDLE)."""

Emit = tuple[str, int, Result]
"""A point a step emits: (kind, operation index, value), as ``Point.key()``."""


class Move(NamedTuple):
    """One enabled step of a thread: the state and thread after it, the points it emits."""

    state: State
    thread: Thread
    emits: tuple[Emit, ...]


_IDLE = "idle"  # no call in flight: the next step invokes the next call

# A routine's step outcome: ("go", state, pc, regs, emits),
# ("call", state, pc, regs, emits, routine, sub_regs) or ("ret", state, value, emits).
Outcome = tuple[object, ...]


def _set(state: State, index: int, **changes: Any) -> State:
    ops = list(state.ops)
    ops[index] = ops[index]._replace(**changes)
    return state._replace(ops=tuple(ops))


class Model:
    """The steps of ``program``'s calls (and of the clean-up calls) on one purgatory."""

    def __init__(
        self,
        program: Program,
        calls: tuple[tuple[Call, ...], ...],
        *,
        late_watches: bool = False,
    ) -> None:
        self.program = program
        self.calls = calls
        self.late_watches = late_watches
        """Upstream Kafka's sweep (``kafka-sweep-sees-later-watches``): at the end of
        the list it took, a sweep may go on to operations watched on its key since it
        began, as a weakly consistent iterator does (R75 says it tries only the list it
        took). Off unless the conformance kit's threads mode allows Kafka's behaviour."""
        self.key_index = {key: index for index, key in enumerate(program.keys)}
        self.op_keys = tuple(
            tuple(self.key_index[key] for key in spec.keys) for spec in program.ops
        )

    def initial(self) -> tuple[State, tuple[Thread, ...]]:
        """The state before any call, and every thread before its first call."""
        op = Op(False, PENDING, False, False, -1, 0, NOT_TIMED, False, False)
        state = State(0, 0, 0, (op,) * len(self.program.ops), ((),) * len(self.program.keys))
        return state, tuple((0, 0, (), _IDLE) for _ in self.calls)

    def final(self, state: State) -> Final:
        """What the recorder reads once every thread is done."""
        names = ("pending", "completed", "abandoned")
        return Final(
            sum(len(ops) for ops in state.watchers),
            sum(1 for ops in state.watchers if ops),
            sum(1 for op in state.ops if op.timer >= 0),
            tuple(names[op.fin] for op in state.ops),
        )

    def done(self, thread: int, local: Thread) -> bool:
        return local[0] == len(self.calls[thread]) and local[3] == _IDLE

    # -- the moves of one thread -------------------------------------------------------

    def moves(self, state: State, thread: int, local: Thread) -> Iterator[Move]:
        """Every step ``thread`` can take now (none if it is done or blocked)."""
        call_index, cursor, frames, result = local
        if not frames:
            if result != _IDLE:  # the top routine returned: the call returns
                emit: Emit = ("return", self.calls[thread][call_index].op, result)  # type: ignore[assignment]
                yield Move(state, (call_index + 1, cursor, (), _IDLE), (emit,))
                return
            if call_index == len(self.calls[thread]):
                return
            call = self.calls[thread][call_index]
            frame = self._top_frame(call)
            yield Move(state, (call_index, cursor, (frame,), _IDLE), (("call", call.op, None),))
            return
        name, pc, regs, ret = frames[-1]
        for outcome in getattr(self, "_" + name)(state, thread, pc, regs, ret):
            kind = outcome[0]
            new_state: State = outcome[1]
            if kind == "go":
                _, _, new_pc, new_regs, emits = outcome
                top = (name, new_pc, new_regs, None)
                yield Move(new_state, (call_index, cursor, (*frames[:-1], top), _IDLE), emits)
            elif kind == "call":
                _, _, new_pc, new_regs, emits, routine, sub_regs = outcome
                top = (name, new_pc, new_regs, None)
                sub = (routine, 0, sub_regs, None)
                new_frames = (*frames[:-1], top, sub)
                yield Move(new_state, (call_index, cursor, new_frames, _IDLE), emits)
            else:
                _, _, value, emits = outcome
                rest = frames[:-1]
                if rest:
                    caller = rest[-1]
                    rest = (*rest[:-1], (caller[0], caller[1], caller[2], value))
                    yield Move(new_state, (call_index, cursor, rest, _IDLE), emits)
                else:
                    yield Move(new_state, (call_index, cursor, (), value), emits)

    def _top_frame(self, call: Call) -> Frame:
        routine = {
            "submit": "submit",
            "set_ready": "set_ready",
            "check": "check",
            "cancel_for_key": "cancel",
            "advance": "advance",
            "force": "force",
            "abandon": "abandon",
            "safe_try": "stc",
            "maybe_try": "mtc",
        }[call.kind]
        if call.kind in ("check", "cancel_for_key"):
            regs: tuple[object, ...] = (self.key_index[call.key],)
        elif call.kind == "advance":
            regs = (call.ms,)
        else:
            regs = (call.op,)
        return (routine, 0, regs, None)

    # -- shared effects ------------------------------------------------------------------

    def _acquire(self, state: State, thread: int, op: int) -> State | None:
        """The operation's lock taken by ``thread`` (re-entrant), or None if another holds it."""
        entry = state.ops[op]
        if entry.holder not in (-1, thread):
            return None
        return _set(state, op, holder=thread, depth=entry.depth + 1)

    def _release(self, state: State, op: int) -> State:
        entry = state.ops[op]
        depth = entry.depth - 1
        return _set(state, op, holder=_holder_after_release(depth, entry.holder), depth=depth)

    def _unwatch(self, state: State, key: int, op: int) -> State:
        """``op`` unlinked from ``key``'s list, if there (an emptied list is dropped, R26)."""
        ops = state.watchers[key]
        if op not in ops:
            return state
        watchers = list(state.watchers)
        watchers[key] = tuple(other for other in ops if other != op)
        return state._replace(watchers=tuple(watchers))

    def _left_watching(self, state: State, op: int) -> tuple[State, bool]:
        """R61: uncount ``op`` if counted; True if that left none unfinished (the let-go
        is due: one step per operation and key, in any order, so another thread may see
        it half done)."""
        if not state.ops[op].counted:
            return state, False
        state = _set(state, op, counted=False)
        state = state._replace(unfinished=state.unfinished - 1)
        return state, not state.unfinished

    def _letgo(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        """R61's let-go: unlink each (operation, key) pair left in ``regs[0]``, one pair
        per step, in any order, dropping lists that empty (R26); another thread may see
        it half done."""
        pairs: tuple[tuple[int, int], ...] = regs[0]
        if not pairs:
            return [("ret", state, None, ())]
        return [
            ("go", self._unwatch(state, key, op), 0, (pairs[:index] + pairs[index + 1 :],), ())
            for index, (op, key) in enumerate(pairs)
        ]

    def _let_go(self, state: State, pc: int, regs: Regs) -> Outcome:
        """Go on at ``pc`` through a let-go of every finished operation (R61)."""
        finished = {index for index, entry in enumerate(state.ops) if entry.fin != PENDING}
        pairs = tuple(
            (other, key)
            for key, ops in enumerate(state.watchers)
            for other in ops
            if other in finished
        )
        if pairs:
            return ("call", state, pc, regs, (), "letgo", (pairs,))
        return ("go", state, pc, regs, ())

    def _then_letgo(self, state: State, op: int, pc: int, regs: Regs) -> Outcome:
        """Uncount ``op`` (R61), going on at ``pc``; through the let-go if it is due."""
        state, due = self._left_watching(state, op)
        return self._let_go(state, pc, regs) if due else ("go", state, pc, regs, ())

    # -- routines: each step returns its outcomes --------------------------------------

    def _set_ready(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        (op,) = regs
        return [("ret", _set(state, op, ready=True), None, ())]

    def _force(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        """R16: force_complete, lock-free: the compare-and-set; the winner then cancels
        the timer entry, stops counting the operation as unfinished (R61: at none, the
        let-go), and calls on_complete: three steps, as the spec lists them."""
        op: int = regs[0]
        if pc == 0:
            if state.ops[op].fin != PENDING:
                return [("ret", state, False, ())]
            return [("go", _set(state, op, fin=COMPLETED), 1, regs, ())]
        if pc == 1:
            return [("go", _set(state, op, timer=NOT_TIMED), 2, regs, ())]
        if pc == 2:
            return [self._then_letgo(state, op, 4, regs)]
        if pc == 4:
            return [("call", state, 3, regs, (), "oc", (op,))]
        return [("ret", state, True, ())]

    def _oc(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        op: int = regs[0]
        if pc == 0:
            return [("go", state, 1, regs, (("oc", op, None),))]
        return [("ret", state, None, (("oc-end", op, None),))]

    def _oe(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        op: int = regs[0]
        if pc == 0:
            return [("go", state, 1, regs, (("oe", op, None),))]
        return [("ret", state, None, (("oe-end", op, None),))]

    def _tc(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        """The program's try_complete: read the flag; if set, force_complete."""
        op: int = regs[0]
        if pc == 0:
            ready = state.ops[op].ready
            emits: tuple[Emit, ...] = (("tc", op, ready),)
            if ready:
                return [("call", state, 1, regs, emits, "force", (op,))]
            return [("go", state, 2, (op, False), emits)]
        if pc == 1:  # force_complete returned ``ret``
            return self._tc(state, thread, 2, (op, ret), None)
        return [("ret", state, regs[1], (("tc-end", op, regs[1]),))]

    def _stc(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        """R18 + R41: safe_try_complete; regs (op, result, final)."""
        op: int = regs[0]
        if pc == 0:  # take the lock (blocking)
            locked = self._acquire(state, thread, op)
            return [] if locked is None else [("go", locked, 1, (op, False, False), ())]
        if pc == 1:
            if state.ops[op].fin != PENDING:  # completed already: no try_complete
                return [("go", state, 3, (op, False, True), ())]
            cleared = _set(state, op, pending=False)
            return [("call", cleared, 2, regs, (), "tc", (op,))]
        if pc == 2:  # try_complete returned ``ret``
            return self._stc(state, thread, 3, (op, ret, bool(ret)), None)
        if pc == 3:  # release
            released = self._release(state, op)
            if regs[2]:
                return [("ret", released, regs[1], ())]
            return [("go", released, 4, regs, ())]
        # pc 4: a knock while we held the lock is ours to answer (R41)
        if state.ops[op].pending:
            return [("go", state, 0, regs, ())]
        return [("ret", state, False, ())]

    def _mtc(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        """R20: maybe_try_complete; regs (op, done, retry)."""
        op: int = regs[0]
        done = regs[1] if len(regs) > 1 else False
        if pc == 0:  # try the lock
            locked = self._acquire(state, thread, op)
            if locked is None:
                return [("go", state, 5, (op, done, False), ())]
            return [("go", locked, 2, (op, done, False), ())]
        if pc == 2:  # holding it: clear the flag, try_complete
            return [("call", _set(state, op, pending=False), 1, regs, (), "tc", (op,))]
        if pc == 1:  # try_complete returned: release
            return [("go", self._release(state, op), 3, (op, ret, False), ())]
        if pc == 3:  # retry := pending
            return [("go", state, 4, (op, done, state.ops[op].pending), ())]
        if pc == 5:  # retry := not get_and_set(pending, True)
            retry = not state.ops[op].pending
            return [("go", _set(state, op, pending=True), 4, (op, done, retry), ())]
        # pc 4
        if state.ops[op].fin != PENDING or not regs[2]:
            return [("ret", state, done, ())]
        return [("go", state, 0, (op, done, False), ())]

    def _run(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        """R17: expiry: holding the lock, force_complete; if it won, on_expiration. A run
        handed over before cancel_for_key took the operation out completes nothing
        (R29); after releasing the lock it makes the attempt a knock left it (R41)."""
        op: int = regs[0]
        if pc == 0:
            locked = self._acquire(state, thread, op)
            if locked is None:
                return []
            if locked.ops[op].untimed:  # held for the check: a knock may find it so
                return [("go", locked, 5, regs, ())]
            return [("call", locked, 1, regs, (), "force", (op,))]
        if pc == 5:  # taken out: complete nothing, release
            return [("go", self._release(state, op), 3, regs, ())]
        if pc == 3:  # a knock that found the lock held is ours
            entry = state.ops[op]
            if entry.pending and entry.fin == PENDING:
                return [("call", state, 4, regs, (), "stc", (op,))]
            return [("ret", state, None, ())]
        if pc == 4:  # safe_try_complete returned
            return [("ret", state, None, ())]
        if pc == 1:
            if ret:
                return [("call", state, 2, regs, (), "oe", (op,))]
            return self._run(state, thread, 2, regs, None)
        return [("ret", self._release(state, op), None, ())]

    def _submit(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        """R22 (+ R41's retry, R61's count, R40's abandoned-before-the-lock);
        regs (op, next key position, result to return after the release or None)."""
        op: int = regs[0]
        keys = self.op_keys[op]
        if pc == 0:  # claim (R34)
            if state.ops[op].claimed:
                return [("ret", state, "raised ValueError", ())]
            return [("go", _set(state, op, claimed=True), 1, (op, 0, None), ())]
        if pc == 1:
            locked = self._acquire(state, thread, op)
            return [] if locked is None else [("go", locked, 2, regs, ())]
        if pc == 2:
            if state.ops[op].fin == ABANDONED:
                return [("go", state, 9, (op, 0, False), ())]
            return [("call", _set(state, op, pending=False), 3, regs, (), "tc", (op,))]
        if pc == 3:  # the first try returned ``ret``
            if ret:
                return self._submit(state, thread, 9, (op, 0, True), None)
            return self._submit(state, thread, 4, regs, None)
        if pc == 4:  # counted as unfinished just before watching, if unfinished (R61)
            if state.ops[op].fin != PENDING:
                return [("go", state, 5, (op, 0, None), ())]
            return [("go", state, 12, regs, ())]
        if pc == 12:  # ... the count grows
            state = _set(state, op, counted=True)._replace(unfinished=state.unfinished + 1)
            return [("go", state, 13, regs, ())]
        if pc == 13:  # finished while being counted: nobody else uncounts it
            if state.ops[op].fin != PENDING:
                return [self._then_letgo(state, op, 5, (op, 0, None))]
            return [("go", state, 5, (op, 0, None), ())]
        if pc == 5:  # for each key: if finished, stop (KAFKA-18027)
            position: int = regs[1]
            if position == len(keys) or state.ops[op].fin != PENDING:
                return [("go", state, 16, regs, ())]
            return [("go", state, 6, regs, ())]
        if pc == 16:  # watched, finished meanwhile, none unfinished: its finisher's let-go
            entry = state.ops[op]  # may have come before the last watch (R22, R61)
            if regs[1] and entry.fin != PENDING and not state.unfinished:
                return [self._let_go(state, 7, regs)]
            return self._submit(state, thread, 7, regs, None)
        if pc == 6:  # ... else watch it there
            position = regs[1]
            key = keys[position]
            watchers = list(state.watchers)
            watchers[key] = watchers[key] + (op,)
            return [
                ("go", state._replace(watchers=tuple(watchers)), 5, (op, position + 1, None), ())
            ]
        if pc == 7:  # the second try (R22 clears no flag before it)
            return [("call", state, 8, regs, (), "tc", (op,))]
        if pc == 8:
            if ret:
                return self._submit(state, thread, 9, (op, 0, True), None)
            if state.ops[op].fin != PENDING:  # if not completed: timer add
                return [("go", state, 9, (op, 0, None), ())]
            return [("go", state, 14, regs, ())]
        if pc == 14:  # the add (R3: due at once, it runs inline)
            due = state.now + self.program.ops[op].delay_ms
            if due <= state.current:
                return [("call", state, 15, regs, (), "run", (op,))]
            return [("go", _set(state, op, timer=due), 15, regs, ())]
        if pc == 15:  # completed meanwhile by a lock-free force_complete: cancel the entry
            if state.ops[op].fin != PENDING:
                state = _set(state, op, timer=NOT_TIMED)
            return [("go", state, 9, (op, 0, None), ())]
        if pc == 9:  # release
            released = self._release(state, op)
            if regs[2] is not None:
                return [("ret", released, regs[2], ())]
            return [("go", released, 10, regs, ())]
        if pc == 10:  # a knock found the lock held: the attempt is ours (R41)
            if state.ops[op].pending:
                return [("call", state, 11, regs, (), "stc", (op,))]
            return [("ret", state, False, ())]
        return [("ret", state, ret, ())]  # pc 11: safe_try_complete returned

    def _check(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        """R25: check_and_complete; regs (key, snapshot, position, count)."""
        key: int = regs[0]
        if pc == 0:
            return [("go", state, 1, (key, state.watchers[key], 0, 0), ())]
        snapshot: tuple[int, ...] = regs[1]
        position: int = regs[2]
        count: int = regs[3]
        if pc == 1:
            if position == len(snapshot):
                later = tuple(op for op in state.watchers[key] if op not in snapshot)
                done: Outcome = ("ret", state, count, ())
                if self.late_watches and later:  # Kafka's iterator may see them, or not
                    return [done, ("go", state, 1, (key, snapshot + later, position, count), ())]
                return [done]
            op = snapshot[position]
            if state.ops[op].fin != PENDING:  # finished: unlinked, not counted
                return [
                    (
                        "go",
                        self._unwatch(state, key, op),
                        1,
                        (key, snapshot, position + 1, count),
                        (),
                    )
                ]
            return [("call", state, 2, regs, (), "stc", (op,))]
        if pc == 2:  # safe_try_complete returned ``ret``
            if ret:
                return [("go", state, 3, regs, ())]
            return self._check(state, thread, 1, (key, snapshot, position + 1, count), None)
        # pc 3: completed by this call: unlinked and counted
        state = self._unwatch(state, key, snapshot[position])
        return [("go", state, 1, (key, snapshot, position + 1, count + 1), ())]

    def _cancel(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        """R29 + R55: cancel_for_key; regs (key, operations, position)."""
        key: int = regs[0]
        if pc == 0:
            watchers = list(state.watchers)
            popped, watchers[key] = watchers[key], ()
            return [("go", state._replace(watchers=tuple(watchers)), 1, (key, popped, 0), ())]
        taken: tuple[int, ...] = regs[1]
        position: int = regs[2]
        if pc == 1:
            if position == len(taken):
                return [("ret", state, taken, ())]
            op = taken[position]
            locked = self._acquire(state, thread, op)  # the timer entry goes under the lock
            return [] if locked is None else [("go", locked, 4, regs, ())]
        op = taken[position]
        if pc == 4:  # a drain may have taken the entry already: its run waits for the lock
            return [("go", _set(state, op, timer=NOT_TIMED, untimed=True), 2, regs, ())]
        if pc == 2:
            return [("go", self._release(state, op), 3, regs, ())]
        # pc 3: a knock found the lock held: make its attempt (R55)
        after = (key, taken, position + 1)
        entry = state.ops[op]
        if entry.pending and entry.fin == PENDING:
            return [("call", state, 1, after, (), "stc", (op,))]
        return self._cancel(state, thread, 1, after, None)

    def _abandon(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        """R40: abandon; regs (op, next key position)."""
        op: int = regs[0]
        if pc == 0:
            if not state.ops[op].claimed:
                return [("ret", state, "raised ValueError", ())]
            return [("go", state, 1, regs, ())]
        if pc == 1:
            locked = self._acquire(state, thread, op)
            return [] if locked is None else [("go", locked, 2, regs, ())]
        if pc == 2:
            if state.ops[op].fin != PENDING:
                return [("ret", self._release(state, op), False, ())]
            return [("go", _set(state, op, fin=ABANDONED), 6, (op, 0), ())]
        if pc == 6:  # its timer entry cancelled
            return [("go", _set(state, op, timer=NOT_TIMED), 3, regs, ())]
        keys = self.op_keys[op]
        if pc == 3:  # unlinked from each of its keys
            position: int = regs[1]
            if position == len(keys):
                return [self._then_letgo(state, op, 4, regs)]
            return [("go", self._unwatch(state, keys[position], op), 3, (op, position + 1), ())]
        return [("ret", self._release(state, op), True, ())]

    def _advance(self, state: State, thread: int, pc: int, regs: Regs, ret: Any) -> list[Outcome]:
        """R7, R2, R6, R11: advance_clock on a manual clock; regs (ms, drained (due, op))."""
        if pc == 0:  # the clock moves
            return [("go", state._replace(now=state.now + regs[0]), 1, regs, ())]
        if pc == 1:  # the drain: due tasks leave the schedule; current time moves (R2)
            reading = max(state.now, state.current)
            drained = tuple(
                sorted(
                    (op.timer, index)
                    for index, op in enumerate(state.ops)
                    if 0 <= op.timer <= reading
                )
            )
            for _, index in drained:
                state = _set(state, index, timer=DRAINED)
            state = state._replace(current=max(state.current, state.now))
            return [("go", state, 2, (regs[0], drained), ())]
        drained = regs[1]
        if not drained:
            return [("ret", state, None, ())]
        first = drained[0][0]
        outcomes: list[Outcome] = []
        for position, (due, op) in enumerate(drained):  # R6: any of the earliest due
            if due != first:
                break
            rest = (regs[0], drained[:position] + drained[position + 1 :])
            if state.ops[op].timer == DRAINED:  # not cancelled before its turn (R11)
                handed = _set(state, op, timer=NOT_TIMED)
                outcomes.append(("call", handed, 2, rest, (), "run", (op,)))
            else:
                outcomes.append(("go", state, 2, rest, ()))
        return outcomes


def _holder_after_release(depth: int, holder: int) -> int:
    """The lock's holder after a release that left ``depth`` holds."""
    return holder if depth > 0 else -1
