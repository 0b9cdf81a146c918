"""Pieces every benchmark shares: a direct executor, a counting clock, CPU and memory probes.

Measurements are only ever compared *within one run*: a benchmark alternates designs
inside each sweep point (``interleaved``), so slow drift of a shared machine hits every
design alike. Nothing here asserts a timing.
"""

from __future__ import annotations

import gc
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import Field, asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, ParamSpec, TypeVar, cast

from kpurgatory.clock import MonotonicClock

__all__ = [
    "CountingClock",
    "DirectExecutor",
    "GcTimer",
    "JsonResult",
    "PeakRss",
    "interleaved",
    "machine_info",
    "rss_bytes",
    "thread_cpu_seconds",
]

P = ParamSpec("P")
R = TypeVar("R")

_DONE: Future[Any] = Future()
_DONE.set_result(None)


class DirectExecutor(Executor):
    """Runs each submitted callable at once in the caller and returns one shared done future.

    For timer micro-benchmarks only: it removes the cost of creating a ``Future`` per
    hand-over (which ``InlineExecutor`` pays, as it must for tests), so what is measured
    is the timer. The callable's result is discarded; the timers submit ``run_logged``,
    which never raises.
    """

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Call ``fn(*args, **kwargs)`` now; count it."""
        self.submitted += 1
        fn(*args, **kwargs)
        done: Future[R] = _DONE
        return done

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing is ever pending."""


class JsonResult:
    """Base of the benchmarks' result dataclasses: the JSON form is every field plus the
    derived figures (properties) named in ``DERIVED``, so the results file carries them."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    DERIVED: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, object]:
        """JSON-ready dict: the fields, then each ``DERIVED`` property."""
        data = asdict(self)
        data.update((name, getattr(self, name)) for name in self.DERIVED)
        return data


class CountingClock(MonotonicClock):
    """A ``MonotonicClock`` that counts how often a timer waits and how often it wakes up.

    ``waits`` counts ``wait`` calls (one per ``advance_clock``), ``wakeups`` every return
    from ``condition.wait`` (a timeout or a notify). Used by the idle benchmark.
    """

    __slots__ = ("waits", "wakeups")

    def __init__(self) -> None:
        self.waits = 0
        self.wakeups = 0

    def wait(
        self,
        condition: threading.Condition,
        timeout_ms: int,
        next_due: Callable[[], int | None],
    ) -> int:
        """``MonotonicClock.wait``, counting the call and each wake-up."""
        self.waits += 1
        counted = cast("threading.Condition", _CountedCondition(condition, self))
        return super().wait(counted, timeout_ms, next_due)

    def __repr__(self) -> str:
        return f"CountingClock(waits={self.waits}, wakeups={self.wakeups})"


class _CountedCondition:
    """Stands in for the timer's condition inside ``MonotonicClock.wait`` (which only calls
    its ``wait``): passes each wait on and counts the wake-up in ``clock.wakeups``."""

    __slots__ = ("_clock", "_condition")

    def __init__(self, condition: threading.Condition, clock: CountingClock) -> None:
        self._condition = condition
        self._clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        """``condition.wait(timeout)``, then one more wake-up counted."""
        notified = self._condition.wait(timeout)
        self._clock.wakeups += 1
        return notified


def rss_bytes() -> int:
    """The process's resident set size now, in bytes (0 where /proc is unavailable)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def thread_cpu_seconds(native_id: int) -> float | None:
    """CPU seconds (user + system) used so far by the thread ``native_id`` of this process.

    Reads /proc/self/task/<id>/stat; None where that is unavailable (non-Linux).
    """
    try:
        with open(f"/proc/self/task/{native_id}/stat", encoding="ascii") as stat:
            text = stat.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


class PeakRss:
    """Samples the RSS every ``interval_s`` on a daemon thread while in a ``with`` block.

    ``start`` is the RSS on entry, ``peak`` the largest sample (entry and exit included).
    """

    def __init__(self, interval_s: float = 0.02) -> None:
        self.interval_s = interval_s
        self.start = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, rss_bytes())

    def __enter__(self) -> PeakRss:
        self.start = self.peak = rss_bytes()
        self._thread = threading.Thread(target=self._sample, name="bench-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak = max(self.peak, rss_bytes())


@dataclass
class GcTimer:
    """Counts garbage collections and their total duration while installed (``gc.callbacks``)."""

    collections: int = 0
    seconds: float = 0.0
    _started: float = field(default=0.0, repr=False)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.collections += 1
            self.seconds += time.perf_counter() - self._started

    @contextmanager
    def installed(self) -> Iterator[GcTimer]:
        """Count collections inside the ``with`` block."""
        gc.callbacks.append(self._callback)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._callback)


def interleaved(designs: Sequence[str], index: int) -> list[str]:
    """``designs`` rotated by ``index``: successive sweep points start with a different design,
    so no design always runs first (or last) on a machine whose load drifts."""
    if not designs:
        return []
    shift = index % len(designs)
    return list(designs[shift:]) + list(designs[:shift])


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit(root: Path) -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def machine_info() -> dict[str, object]:
    """Where and when a run happened: CPU, cores, load, Python, git commit."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "load_average_at_start": load,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "git_commit": _git_commit(Path(__file__).resolve().parents[2]),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }
