"""The lock doubles and costs of the threads benchmark (``kpurgatory.bench.threads``).

``CountingLock`` stands in for a shared lock and counts how often it was found held
(``threads.contention``); ``lock_costs`` times what Kafka's read-write split would cost
per ``add`` against the timer's one lock. The package cannot import the tests' lock
doubles (``tests.support``), so these live here.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["CountingLock", "lock_costs"]


class CountingLock:
    """A re-entrant lock that counts, per thread, its acquisitions and how many of them
    found it held by another thread (a non-blocking try first), for ``threads.contention``."""

    def __init__(
        self, name: str, tallies: threading.local, every: list[dict[str, list[int]]]
    ) -> None:
        self.name = name
        self._tallies = tallies  # this thread's counts: name -> [taken, found held]
        self._every = every  # every thread's counts
        self._lock = threading.RLock()

    def _tally(self) -> dict[str, list[int]]:
        tally: dict[str, list[int]] | None = getattr(self._tallies, "counts", None)
        if tally is None:
            tally = self._tallies.counts = {}
            self._every.append(tally)
        return tally

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        counts = self._tally().setdefault(self.name, [0, 0])
        counts[0] += 1
        if self._lock.acquire(False):
            return True
        counts[1] += 1
        return blocking and self._lock.acquire(True, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    # What threading.Condition uses of an RLock when the lock provides it.
    def _is_owned(self) -> bool:
        return bool(self._lock._is_owned())  # type: ignore[attr-defined]

    def _release_save(self) -> Any:
        return self._lock._release_save()  # type: ignore[attr-defined]

    def _acquire_restore(self, state: Any) -> None:
        self._lock._acquire_restore(state)  # type: ignore[attr-defined]


class _ReadWriteLock:
    """The read side of a read-write lock built on ``threading`` (a reader count under a
    mutex; a writer, not needed here, would wait on the condition for no readers).
    ``lock_costs`` only: what Kafka's read lock for ``add`` would cost in Python."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._no_readers = threading.Condition(self._mutex)
        self._readers = 0

    def acquire_read(self) -> None:
        with self._mutex:
            self._readers += 1

    def release_read(self) -> None:
        with self._mutex:
            self._readers -= 1
            if not self._readers:
                self._no_readers.notify_all()


def lock_costs(number: int = 100_000, repeat: int = 7) -> dict[str, float]:
    """Seconds per ``add``'s locking, best of ``repeat`` timeit runs: one ``RLock``
    acquire/release (the timer's lock now) against Kafka's split (the read side of a
    read-write lock plus the bucket's own lock), on one thread."""
    import timeit

    one, bucket, split = threading.RLock(), threading.RLock(), _ReadWriteLock()

    def one_lock() -> None:
        one.acquire()
        one.release()

    def read_side_and_bucket() -> None:
        split.acquire_read()
        bucket.acquire()
        bucket.release()
        split.release_read()

    return {
        name: min(timeit.repeat(function, number=number, repeat=repeat)) / number
        for name, function in (
            ("one RLock", one_lock),
            ("read side + bucket lock", read_side_and_bucket),
        )
    }
