"""Search for an interleaving of the model's steps that explains a recorded history.

Wing and Gong's search for a linearization, with the memoization of Lowe and of
porcupine: a node is the model's state plus, per thread, its place in its calls and in
its recorded points; a node seen before is not explored again. A step may emit a point
only if it is the thread's next recorded point (same kind, operation and value) and
every point of another thread that ended before this one began (``hi < lo``) has been
emitted. A history is explained when every thread has emitted all its points and the
model's final state is the recorded one; rejected when no node is left; undecided
when the node budget runs out first, which is never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from kpurgatory.history.history import History, Point
from kpurgatory.history.model import Model, State, Thread

__all__ = [
    "DEFAULT_BUDGET",
    "EXPLAINED",
    "REJECTED",
    "UNDECIDED",
    "Verdict",
    "VerdictCounts",
    "check",
]

EXPLAINED, REJECTED, UNDECIDED = "explained", "rejected", "undecided"
DEFAULT_BUDGET = 500_000
"""Nodes a search may visit before its history counts as undecided."""


@dataclass(frozen=True)
class Verdict:
    """How a search ended: ``outcome`` is EXPLAINED, REJECTED or UNDECIDED; ``nodes``
    the nodes it visited; ``reason`` why a history was rejected; ``progress`` the most
    points, per thread, any interleaving explained (where the explanation stops)."""

    outcome: str
    nodes: int
    reason: str = ""
    progress: tuple[int, ...] = ()


@dataclass(kw_only=True)
class VerdictCounts:
    """What many searches said, counted: histories per outcome, the nodes the searches
    visited, and the wall time the whole run took. A history campaign and the
    conformance kit's threads mode both count this way (each adds its own fields)."""

    explained: int = 0
    """Histories an interleaving of the spec's steps explained."""
    rejected: int = 0
    """Histories no interleaving explains."""
    undecided: int = 0
    """Histories whose search ran out of budget: reported, never counted as a pass."""
    max_nodes: int = 0
    """The most nodes one search visited."""
    total_nodes: int = 0
    """The nodes every search visited, together."""
    seconds: float = 0.0
    """Wall time of the whole run (set when it ends)."""

    @property
    def histories(self) -> int:
        """Histories counted, whatever their outcome."""
        return self.explained + self.rejected + self.undecided

    @property
    def per_second(self) -> float:
        """Histories recorded and checked per second of wall time."""
        return self.histories / self.seconds if self.seconds else 0.0

    def count(self, verdict: Verdict) -> None:
        """Count one history's verdict: its nodes, and its outcome (one neither
        explained nor rejected is undecided)."""
        self.max_nodes = max(self.max_nodes, verdict.nodes)
        self.total_nodes += verdict.nodes
        if verdict.outcome == EXPLAINED:
            self.explained += 1
        elif verdict.outcome == REJECTED:
            self.rejected += 1
        else:
            self.undecided += 1


def _needs(points: tuple[tuple[Point, ...], ...]) -> list[list[tuple[int, ...]]]:
    """Per thread and point: how many points of each thread must precede it (hi < lo)."""
    needs: list[list[tuple[int, ...]]] = []
    for mine in points:
        rows = []
        for point in mine:
            rows.append(
                tuple(sum(1 for other in theirs if other.hi < point.lo) for theirs in points)
            )
        needs.append(rows)
    return needs


def check(history: History, *, budget: int = DEFAULT_BUDGET, late_watches: bool = False) -> Verdict:
    """Search for an interleaving of the spec's steps that explains ``history``;
    ``late_watches``: with upstream Kafka's sweep (``Model``), for ``--allow kafka``."""
    if type(budget) is not int or budget < 1:
        raise ValueError(f"budget must be an int >= 1, not {budget!r}")
    if history.hung or history.final is None:
        names = ", ".join(f"T{index}" for index in history.hung)
        return Verdict(REJECTED, 0, f"threads {names} did not finish (a hang or a deadlock)")
    model = Model(history.program, history.calls, late_watches=late_watches)
    points = history.points
    needs = _needs(points)
    count = len(points)
    state, threads = model.initial()
    start: tuple[State, tuple[Thread, ...]] = (state, threads)
    seen = {start}
    stack = [start]
    nodes = 0
    best: tuple[int, ...] = tuple(0 for _ in points)
    while stack:
        state, threads = stack.pop()
        nodes += 1
        if nodes > budget:
            return Verdict(UNDECIDED, nodes - 1, "", best)
        progress = tuple(local[1] for local in threads)
        if sum(progress) > sum(best):
            best = progress
        if all(
            model.done(index, local) and local[1] == len(points[index])
            for index, local in enumerate(threads)
        ):
            if model.final(state) == history.final:
                return Verdict(EXPLAINED, nodes, "", progress)
            continue
        children = []
        for thread in range(count):
            local = threads[thread]
            mine = points[thread]
            for move in model.moves(state, thread, local):
                cursor = local[1]
                fits = True
                for emit in move.emits:
                    if cursor >= len(mine) or mine[cursor].key() != emit:
                        fits = False
                        break
                    need = needs[thread][cursor]
                    if any(
                        threads[other][1] < need[other] for other in range(count) if other != thread
                    ):
                        fits = False
                        break
                    cursor += 1
                if not fits:
                    continue
                moved = move.thread
                new_local = (moved[0], cursor, moved[2], moved[3])
                child = (move.state, (*threads[:thread], new_local, *threads[thread + 1 :]))
                if child in seen:
                    continue
                seen.add(child)
                # Explore first the thread whose next point came earliest in real time.
                at = mine[cursor].lo if cursor < len(mine) else 1 << 62
                children.append((at, child))
        children.sort(key=lambda item: item[0], reverse=True)
        stack.extend(child for _, child in children)
    final = model.final(state)
    reason = (
        "no interleaving of the spec's steps explains the recorded points"
        if sum(best) < sum(len(mine) for mine in points)
        else f"every point is explained but no interleaving ends in the final state {history.final}"
        f" (the model ends in states such as {final})"
    )
    return Verdict(REJECTED, nodes, reason, best)
