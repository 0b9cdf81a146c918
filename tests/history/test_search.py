"""``VerdictCounts``, the tally a history campaign and the threads mode share."""

from __future__ import annotations

from kpurgatory.history.search import EXPLAINED, REJECTED, UNDECIDED, Verdict, VerdictCounts


def test_counts_add_each_outcome_and_the_nodes_of_every_search() -> None:
    counts = VerdictCounts()
    for outcome, nodes in ((EXPLAINED, 30), (REJECTED, 70), (UNDECIDED, 50), (EXPLAINED, 10)):
        counts.count(Verdict(outcome, nodes))
    assert (counts.explained, counts.rejected, counts.undecided) == (2, 1, 1)
    assert counts.histories == 4
    assert (counts.max_nodes, counts.total_nodes) == (70, 160)


def test_per_second_is_zero_until_the_run_has_taken_time() -> None:
    counts = VerdictCounts(explained=6)
    assert counts.per_second == 0.0
    counts.seconds = 2.0
    assert counts.per_second == 3.0
