"""Races between pairs of public calls that share an operation or a lifecycle (issue 11).

Each builder returns a scenario for ``scenarios.run_scenario`` (same conventions as
``tests/concurrency/scenarios.py``): the checks state the contracts of the spec
(docs/spec.md) that an independent review found broken under some interleaving:

* submit vs ``cancel_for_key`` (bug 1): an operation ``cancel_for_key`` returned is
  never in the timer afterwards and never expires;
* submit vs ``shutdown`` (bug 2, R38): a submission that raises leaves no trace (no watch,
  no estimate, no submission claim, no timer entry);
* ``shutdown`` vs ``shutdown`` (bug 4, R39): every caller returns only once the timer is
  closed;
* purge (``purge_interval=0``) vs submit and vs ``check_and_complete`` (R30): a purge
  only unlinks completed operations, and never trips over a concurrent change;
* ``close`` vs ``add`` (R14): the add either raises and leaves nothing scheduled, or
  schedules a task that never runs;
* ``maybe_try_complete`` vs ``check_and_complete`` (bug 5, R41): the blocking path honours
  the pending flag, so the knock is never lost;
* abandon vs complete vs expire (bug 7, R40): exactly one wins; an abandoned operation is
  unwatched, untimed and gets no callback;
* ``cancel()`` vs the submission of the same operation (R40): abandoned as a whole, or
  submitted as if the cancel came first;
* R61's let-go pass, started by the ``force_complete`` that finishes the last
  operation, vs that operation's own submission: nothing raises, nothing stays watched;
* a ``maybe_try_complete`` knock vs a lock holder of the purgatory's and a
  ``force_complete`` (R20, R41, R55): a ``try_complete`` starts after the knock began,
  or the operation was finished before the knock returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.concurrency.scenarios import (
    DELAY_MS,
    LONG_DELAY_MS,
    Build,
    Check,
    World,
    _completed_once,
    _expect,
    _no_errors,
    scheduled_operation,
)
from tests.concurrency.scheduler import RunResult, checkpoint, label_primitives


def submit_vs_cancel_for_key() -> Build:
    """Bug 1 (R22, R29): ``cancel_for_key("k")`` races the submission of an operation.

    If ``cancel_for_key`` returned the operation, the operation is not in the timer
    afterwards and never expires (nor completes); otherwise it is watched and timed,
    and expires exactly once.
    """

    def build(world: World) -> Check:
        op = world.operation("op")
        world.sched.spawn("submit", lambda: world.purgatory.try_complete_else_watch(op, ["k"]))
        world.sched.spawn("cancel", lambda: world.purgatory.cancel_for_key("k"))

        def check(result: RunResult) -> None:
            _no_errors(result)
            _expect(result, result.results["submit"] is False, f"results {result.results}")
            cancelled = result.results["cancel"]
            _expect(result, cancelled in ([], [op]), f"cancel_for_key returned {cancelled}")
            if cancelled:
                _expect(result, world.timer.size == 0, "cancelled, yet still in the timer")
                world.purgatory.advance_clock(DELAY_MS)
                _expect(result, world.log == [], f"cancelled, yet called back: {world.log}")
                _expect(result, world.purgatory.num_delayed == 0, "num_delayed after cancel")
            else:
                _expect(result, world.timer.size == 1, f"timer holds {world.timer.size}")
                world.purgatory.advance_clock(DELAY_MS)
                _expect(result, world.count("expire", "op") == 1, f"log {world.log}")

        return check

    return build


def submit_vs_shutdown() -> Build:
    """Bug 2 (R32, no-trace rule): a submission races ``shutdown``.

    Either the submission went through before the purgatory shut (False: watched on
    its key) or it raised ``RuntimeError`` and left no trace: not watched, not counted
    in the estimate, not in the timer, still submittable elsewhere, and a later
    ``check_and_complete`` of its key does not complete it.
    """

    def build(world: World) -> Check:
        op = world.operation("op")
        world.sched.spawn("submit", lambda: world.purgatory.try_complete_else_watch(op, ["k"]))
        world.sched.spawn("shutdown", world.purgatory.shutdown)

        def check(result: RunResult) -> None:
            _no_errors(result, (RuntimeError,))
            _expect(result, world.timer.closed, "timer open after shutdown")
            if "submit" not in result.errors:
                _expect(result, result.results["submit"] is False, f"{result.results}")
                _expect(result, world.purgatory.watched == 1, "accepted, yet not watched")
                return
            purgatory = world.purgatory
            _expect(result, purgatory.watched == 0, f"failed submission watched: {purgatory}")
            _expect(result, purgatory.estimated_total_operations == 0, "counted in the estimate")
            _expect(result, world.timer.size == 0, "failed submission left a timer entry")
            op.ready = True
            _expect(result, purgatory.check_and_complete("k") == 0, "completed after failing")
            _expect(result, not op.is_completed and world.log == [], f"log {world.log}")
            other = world.impl.purgatory("other", timer=_fresh_timer(world), reaper_enabled=False)
            try:
                _expect(result, other.try_complete_else_watch(op, ["k"]) is True, "resubmit")
            except ValueError as exc:
                raise result.fail(f"failed submission kept its claim: {exc}") from exc
            finally:
                other.shutdown()

        return check

    return build


def _fresh_timer(world: World) -> Any:
    from kpurgatory import InlineExecutor

    return world.impl.timer("other", clock=world.clock, executor=InlineExecutor())


def shutdown_vs_shutdown(submitted: bool = True) -> Build:
    """Bug 4 (R32): two ``shutdown`` callers; each returns only once the timer is closed.

    Each caller's result is whether the timer was closed when its call returned.
    With ``submitted`` a pending operation waits in the timer: it gets no callback.
    """

    def build(world: World) -> Check:
        if submitted:
            op = world.operation("op")
            assert world.purgatory.try_complete_else_watch(op, ["k"]) is False

        def shut() -> bool:
            world.purgatory.shutdown()
            checkpoint("shutdown returned")
            return bool(world.timer.closed)

        world.sched.spawn("first", shut)
        world.sched.spawn("second", shut)

        def check(result: RunResult) -> None:
            _no_errors(result)
            early = [name for name, closed in result.results.items() if closed is not True]
            _expect(result, not early, f"shutdown returned before the timer closed in {early}")
            _expect(result, world.log == [], f"callbacks at shutdown: {world.log}")

        return check

    return build


def purge_vs(other: str) -> Build:
    """R30: a purge (``purge_interval=0``) races a submission or a ``check_and_complete``.

    ``done`` (completed, still linked on ``k``) makes the purge due; ``op`` is watched
    on ``k`` and ``k2``. ``other`` is ``"submit"`` (``fresh`` is submitted on ``k``),
    ``"check"`` (``op`` becomes ready and ``k`` is checked) or ``"force"`` (``fresh`` is
    submitted on ``k`` and ``k2`` while another thread force-completes it: completed
    between two of its watches, it must still be unlinked by a later purge, the race
    the optimized purgatory's purge candidates must cover). Afterwards no pending
    operation was unlinked (each completes exactly once when its key is checked, or by
    the force), and a last purge leaves only pending operations watched: ``keeper``,
    never finished, so the purgatory is never idle and R61 cannot hide a missed one.
    """
    if other not in ("submit", "check", "force"):
        raise ValueError(f"other must be 'submit', 'check' or 'force', got {other!r}")

    def build(world: World) -> Check:
        purgatory = world.purging(0)
        keeper = world.operation("keeper", delay_ms=LONG_DELAY_MS)
        done = world.operation("done", delay_ms=LONG_DELAY_MS)
        op = world.operation("op", delay_ms=LONG_DELAY_MS)
        fresh = world.operation("fresh", delay_ms=LONG_DELAY_MS)
        # never finishes: the purgatory is never idle, so R61 cannot mask a lost candidate
        assert purgatory.try_complete_else_watch(keeper, ["k3"]) is False
        assert purgatory.try_complete_else_watch(done, ["k"]) is False
        assert purgatory.try_complete_else_watch(op, ["k", "k2"]) is False
        done.force_complete()
        world.sched.spawn("purge", lambda: purgatory.advance_clock(0))
        if other == "submit":
            world.sched.spawn("submit", lambda: purgatory.try_complete_else_watch(fresh, ["k"]))
        elif other == "force":
            world.sched.spawn(
                "submit", lambda: purgatory.try_complete_else_watch(fresh, ["k", "k2"])
            )
            world.sched.spawn("force", fresh.force_complete)
        else:
            world.spawn_event(op, lambda: purgatory.check_and_complete("k"))

        def check(result: RunResult) -> None:
            _no_errors(result)
            pending = [o for o in (op, fresh) if not o.is_completed]
            if other != "check":
                _expect(result, result.results["submit"] is False, f"{result.results}")
            for operation in pending:
                operation.ready = True
            purgatory.check_and_complete("k")
            for name in ("done", "op") + (("fresh",) if other != "check" else ()):
                _expect(result, world.count("complete", name) == 1, f"{name}: {world.log}")
            purgatory.advance_clock(0)
            _expect(result, purgatory.watched == 1, f"completed ones not purged: {purgatory}")

        return check

    return build


def close_vs_add(delay_ms: int = DELAY_MS) -> Build:
    """R14: ``timer.close()`` races ``timer.add(task)``.

    The add raises ``RuntimeError`` (the timer was closed first) and schedules nothing,
    or it scheduled the task before the close; either way the task never runs after
    the close, and nothing deadlocks.
    """

    def build(world: World) -> Check:
        task = world.task("t", delay_ms)
        world.sched.spawn("close", world.timer.close)
        world.sched.spawn("add", lambda: world.timer.add(task))

        def check(result: RunResult) -> None:
            _no_errors(result, (RuntimeError,))
            _expect(result, world.timer.closed, "not closed")
            refused = "add" in result.errors
            if refused:
                _expect(result, world.timer.size == 0, "a refused add left a schedule")
            _expect(result, world.timer.advance_clock(delay_ms) is False, "drained when closed")
            # A task due at once runs inside an add that beat the close, and only then.
            ran = world.count("ran", "t")
            expected = 0 if refused or delay_ms > 0 else 1
            _expect(result, ran == expected, f"refused={refused}, log {world.log}")

        return check

    return build


def maybe_vs_check() -> Build:
    """Bug 5 (R18, R20): ``maybe_try_complete`` knocks while ``check_and_complete`` holds
    the operation's lock.

    The checker's ``try_complete`` may read the condition before the event makes it
    true; the event's ``maybe_try_complete`` then finds the lock busy and leaves the
    pending flag. The blocking path must honour it: the operation ends completed,
    exactly once, without any clock advance.
    """

    def build(world: World) -> Check:
        op = world.operation("op", delay_ms=LONG_DELAY_MS)
        assert world.purgatory.try_complete_else_watch(op, ["k"]) is False
        world.sched.spawn("check", lambda: world.purgatory.check_and_complete("k"))
        world.spawn_event(op, op.maybe_try_complete)

        def check(result: RunResult) -> None:
            _no_errors(result)
            _completed_once(world, result, op, "completion lost: the pending flag was ignored")

        return check

    return build


def abandon_race(rivals: tuple[str, ...] = ("check", "expire"), via: str = "abandon") -> Build:
    """Bug 7 (abandon): ``purgatory.abandon(op)`` (``via="abandon"``) or ``op.cancel()``
    (``via="cancel"``) races completion by ``check_and_complete`` and/or expiry.

    Exactly one wins; when ``cancel()`` returns, the operation is finished (abandoned or
    completed). If the abandon won (it returned True, or for ``cancel`` the
    operation ended abandoned): no callback ever, ``is_abandoned``, unwatched from both
    keys, out of the timer, and nothing completes it later. Otherwise it completed
    exactly once and ``abandon`` returned False.
    """
    if via not in ("abandon", "cancel"):
        raise ValueError(f"via must be 'abandon' or 'cancel', got {via!r}")

    def build(world: World) -> Check:
        op = world.operation("op")
        assert world.purgatory.try_complete_else_watch(op, ["a", "b"]) is False
        op.ready = True
        if via == "abandon":
            world.sched.spawn("abandon", lambda: world.purgatory.abandon(op))
        else:

            def cancel() -> bool:
                op.cancel()  # on a submitted operation: abandon it (R40)
                return bool(op.is_abandoned or op.is_completed)

            world.sched.spawn("abandon", cancel)
        bodies: dict[str, Callable[[], object]] = {
            "check": lambda: world.purgatory.check_and_complete("a") == 1,
            "expire": lambda: world.purgatory.advance_clock(DELAY_MS),
        }
        for rival in rivals:
            world.sched.spawn(rival, bodies[rival])

        def check(result: RunResult) -> None:
            _no_errors(result)
            abandoned = bool(op.is_abandoned)
            if via == "abandon":
                _expect(result, result.results["abandon"] is abandoned, f"{result.results}")
            else:
                _expect(result, result.results["abandon"] is True, "cancel() left it pending")
            completed = world.count("complete", "op")
            _expect(result, completed + int(abandoned) == 1, f"abandoned={abandoned} {world.log}")
            if abandoned:
                _expect(result, world.log == [], f"abandoned, yet called back: {world.log}")
                _expect(result, world.purgatory.watched == 0, "abandoned, yet still watched")
                _expect(result, world.timer.size == 0, "abandoned, yet still timed")
                world.purgatory.check_and_complete("b")
                world.purgatory.advance_clock(DELAY_MS)
                _expect(result, world.log == [], f"completed after abandon: {world.log}")
            else:
                _expect(result, world.count("expire", "op") <= 1, f"log {world.log}")
                _expect(result, world.timer.size == 0, "completed, yet still timed")

        return check

    return build


def submit_vs_cancel() -> Build:
    """R40: ``op.cancel()`` races the operation's own submission.

    ``cancel`` on an operation not yet submitted is the timer-level cancel, on a
    submitted one an abandon; in between, either reading must hold as a whole: the
    operation ends abandoned (unwatched, untimed, no callback, the submission returned
    False) or it ends submitted and pending as if the cancel came first (watched, timed,
    and it expires exactly once later).
    """

    def build(world: World) -> Check:
        op = world.operation("op")
        world.sched.spawn("submit", lambda: world.purgatory.try_complete_else_watch(op, ["k"]))
        world.sched.spawn("cancel", op.cancel)

        def check(result: RunResult) -> None:
            _no_errors(result)
            _expect(result, result.results["submit"] is False, f"{result.results}")
            if op.is_abandoned:
                _expect(result, world.purgatory.watched == 0, "abandoned, yet watched")
                _expect(result, world.timer.size == 0, "abandoned, yet timed")
                world.purgatory.advance_clock(DELAY_MS)
                _expect(result, world.log == [], f"abandoned, yet called back: {world.log}")
            else:
                _expect(result, world.purgatory.watched == 1, "pending, yet not watched")
                _expect(result, world.timer.size == 1, "pending, yet not timed")
                world.purgatory.advance_clock(DELAY_MS)
                _expect(result, world.count("expire", "op") == 1, f"log {world.log}")

        return check

    return build


LET_GO_MODES = ("candidates", "scan", "bounded", "unwatch")
"""How the optimized purgatory's let-go pass finds finished operations: its purge
candidates, a scan of every list (the candidates overflowed: limit 0), or candidates
taken one per pass (R71's bound 1, the rest left to ``_let_go_step``); ``unwatch`` adds
a third thread's ``check_and_complete("b")``, whose unlinking of a finished one-key
operation takes it out of the candidates too (both implementations)."""


def let_go_vs_submission(mode: str = "candidates") -> Build:
    """R61, R16, R38, R71: a let-go pass started by a ``force_complete`` races the
    submission of the operation it completes.

    ``other`` submits ``quick`` on ``b`` with delay 0 (it expires inside its own
    submission: a completed operation still watched, a purge candidate), then forces
    ``op``, which ``submit`` is submitting on ``b`` and ``a`` meanwhile. If the force wins
    while ``op`` is still being watched, ``op`` was the last unfinished operation, so the
    force runs R61's let-go pass, and the submission may record ``op`` as completed again
    while that pass runs. Afterwards no thread raised, the force returned True (``op`` was
    never ready), each operation's ``on_complete`` ran once, and nothing stays watched
    (R61: every operation is finished; in ``bounded`` mode once the let-go steps a
    driver would call are done). ``mode`` (``LET_GO_MODES``) only changes the optimized
    purgatory.
    """
    if mode not in LET_GO_MODES:
        raise ValueError(f"mode must be one of {LET_GO_MODES}, got {mode!r}")

    def build(world: World) -> Check:
        op = world.operation("op", delay_ms=LONG_DELAY_MS)
        quick = world.operation("quick", delay_ms=0)
        purgatory = world.purging(1000)  # Kafka's interval: two shards, no purge due
        if mode == "scan" and hasattr(purgatory, "_candidates_limit"):
            purgatory._candidates_limit = 0
        if mode == "bounded" and hasattr(purgatory, "_let_go_bound"):
            purgatory._let_go_bound = 1
        world.sched.spawn("submit", lambda: purgatory.try_complete_else_watch(op, ["b", "a"]))

        def other() -> bool:
            purgatory.try_complete_else_watch(quick, ["b"])
            return bool(op.force_complete())

        world.sched.spawn("other", other)
        if mode == "unwatch":
            world.sched.spawn("check", lambda: purgatory.check_and_complete("b"))

        def check(result: RunResult) -> None:
            _no_errors(result)
            results = {name: result.results[name] for name in ("submit", "other")}
            _expect(result, results == {"submit": False, "other": True}, f"{result.results}")
            for name in ("op", "quick"):
                _expect(result, world.count("complete", name) == 1, f"{name}: {world.log}")
            steps = 0
            while mode == "bounded" and hasattr(purgatory, "_let_go_step") and steps < 10:
                steps += 1  # the driver's later loop callbacks (R71)
                if not purgatory._let_go_step():
                    break
            _expect(result, purgatory.watched == 0, f"finished ones still watched: {purgatory}")
            if hasattr(purgatory, "_check"):  # the optimized representation invariants
                purgatory._check()

        return check

    return build


KNOCK_HOLDERS = ("check", "cancel_for_key", "submit")
"""The purgatory's paths that hold an operation's lock and owe a knock its attempt:
``check_and_complete`` (R41), ``cancel_for_key`` (R55) and the submission (R41)."""


def knock_vs_holder(
    holder: str, force: bool, outcomes: list[tuple[bool, bool]] | None = None
) -> Build:
    """R20, R41, R55: ``maybe_try_complete`` knocks while a purgatory path may hold the
    operation's lock; with ``force``, a third thread ``force_complete``s the operation.

    ``holder`` (``KNOCK_HOLDERS``) runs ``check_and_complete("k")``, ``cancel_for_key("k")``
    or the operation's own submission on ``k``; the event thread makes the condition
    true, then knocks. Checked on every schedule, R20's guarantee: a ``try_complete``
    that read the condition true started after the knock began, unless the force won
    (a finished operation is never tried again, R18); and the operation ends completed,
    once. ``outcomes``, if given, receives per schedule (a try came after the knock
    began, the operation was finished when the knock returned)."""
    if holder not in KNOCK_HOLDERS:
        raise ValueError(f"holder must be one of {KNOCK_HOLDERS}, got {holder!r}")

    def build(world: World) -> Check:
        op = world.operation("op", delay_ms=LONG_DELAY_MS)
        purgatory = world.purgatory
        if holder == "submit":
            world.sched.spawn("holder", lambda: purgatory.try_complete_else_watch(op, ["k"]))
        else:
            assert purgatory.try_complete_else_watch(op, ["k"]) is False
            call = purgatory.check_and_complete if holder == "check" else purgatory.cancel_for_key
            world.sched.spawn("holder", lambda: call("k"))
        trace: list[str] = []
        op.trace = trace
        finished_at_return: list[bool] = []

        def knock() -> bool:
            op.ready = True
            trace.append("knock began")
            done = bool(op.maybe_try_complete())
            finished_at_return.append(op.is_completed)  # no switch point in between
            return done

        world.sched.spawn("event", knock)
        if force:
            world.sched.spawn("force", op.force_complete)

        def check(result: RunResult) -> None:
            _no_errors(result)
            began = trace.index("knock began")
            tried = "try_complete read ready=True" in trace[began:]
            if outcomes is not None:
                outcomes.append((tried, finished_at_return[0]))
            forced = result.results.get("force") is True
            _expect(result, tried or forced, f"knock lost (R20): {trace}")
            _completed_once(world, result, op, "completion lost: operation still pending")

        return check

    return build


def cancel_for_key_vs_expiry(knock: bool = False) -> Build:
    """R29, R11, R41: ``cancel_for_key("k")`` races the drain that expires its operation.

    If the operation was still pending when ``cancel_for_key`` returned it, it never
    expires, even when the drain handed its run over before ``cancel_for_key`` took the
    lock (the run then finds it taken out, under the lock); otherwise it expired once
    (``cancel_for_key`` returns completed operations too). With ``knock``, a third thread
    makes the condition true and knocks: whoever held the lock, the run included, owes
    the knock its attempt, so the operation ends completed in every schedule.
    """

    def build(world: World) -> Check:
        op = world.operation("op")
        assert world.purgatory.try_complete_else_watch(op, ["k"]) is False
        pending_on_return: list[bool] = []

        def cancel() -> object:
            returned = world.purgatory.cancel_for_key("k")
            pending_on_return.append(not op.is_completed)  # no switch point in between
            return returned

        world.sched.spawn("cancel", cancel)
        world.sched.spawn("advance", lambda: world.purgatory.advance_clock(DELAY_MS))
        if knock:
            world.spawn_event(op, op.maybe_try_complete)

        def check(result: RunResult) -> None:
            _no_errors(result)
            returned = result.results["cancel"]
            _expect(result, returned in ([], [op]), f"cancel_for_key returned {returned}")
            expired = world.count("expire", "op")  # [] once the expiry's let-go came first
            if returned and pending_on_return[0]:
                _expect(result, expired == 0, f"returned pending, yet expired: {world.log}")
            elif not knock:
                _expect(result, expired == 1, f"expired {expired} times: {world.log}")
            if knock:
                _expect(result, op.is_completed, f"knock lost: {world.log}")
                _expect(result, world.count("complete", "op") == 1, f"log {world.log}")

        return check

    return build


def rollback_vs_force_complete() -> Build:
    """R38, R30, R61: a submission whose second ``try_complete`` (after it watched the
    operation and counted it in the estimate) raises is rolled back while another thread
    ``force_complete``s the operation, lock-free.

    A force that wins during the unwinding uncounts the operation: the last unfinished
    one, so its let-go resets the estimate to the timer's size (R30) and records the
    reset; the unwinding then takes nothing back from the estimate. In every schedule
    the submission raised the try's error, the force won once (the operation was never
    ready), and the estimate is never below zero.
    """

    def build(world: World) -> Check:
        base: Any = scheduled_operation(world.impl.operation)

        class FailsAfterWatching(base):  # type: ignore[misc]
            def try_complete(self) -> bool:
                self.tries = self.__dict__.get("tries", 0) + 1
                if self.tries == 2:
                    raise ValueError("second try")
                return bool(super().try_complete())

        op = FailsAfterWatching(LONG_DELAY_MS, "op", world.log)
        label_primitives(op, "op")
        purgatory = world.purgatory
        world.sched.spawn("submit", lambda: purgatory.try_complete_else_watch(op, ["k"]))
        world.sched.spawn("force", op.force_complete)

        def check(result: RunResult) -> None:
            _no_errors(result, (ValueError,))
            _expect(result, "submit" in result.errors, f"results {result.results}")
            _expect(result, result.results["force"] is True, f"results {result.results}")
            estimate = purgatory.estimated_total_operations
            _expect(result, estimate >= 0, f"estimate {estimate} after the rollback")

        return check

    return build
