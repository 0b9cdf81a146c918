"""The threads benchmark's workloads do what they say (kpurgatory/bench/threads.py)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import kpurgatory.optimized.timer as timer_module
from kpurgatory.bench import threads


@pytest.mark.parametrize("implementation", threads.IMPLEMENTATIONS)
@pytest.mark.parametrize("layout", threads.LAYOUTS)
@pytest.mark.parametrize("count", [1, 3])
def test_acks_all_completes_every_operation(implementation: str, layout: str, count: int) -> None:
    """Each thread's operations complete and leave nothing watched (checked inside)."""
    assert threads.acks_all_rate(implementation, layout, count, 50) > 0


def test_a_lost_operation_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check inside catches a loop that drops its completions."""

    def lossy(purgatory: object, produce: type, index: int, operations: int) -> None:
        del purgatory, produce, index, operations

    monkeypatch.setattr(threads, "_acks_all", lossy)
    with pytest.raises(AssertionError, match="lost"):
        threads.acks_all_rate("optimized", "shared", 2, 10)


def test_a_failing_thread_raises_and_frees_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(impl: object) -> type:
        raise RuntimeError("planted")

    monkeypatch.setattr(threads, "_operation_class", failing)
    with pytest.raises(RuntimeError, match="planted"):
        threads.acks_all_rate("optimized", "nothing shared", 3, 10)


def test_layouts_share_what_they_say(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shared: one class and one purgatory; class shared: one class, a purgatory per
    thread; nothing shared: a class and a purgatory per thread."""
    seen: list[tuple[type, int]] = []
    real = threads._acks_all

    def spy(purgatory: object, produce: type, index: int, operations: int) -> None:
        seen.append((produce, id(purgatory)))
        real(purgatory, produce, index, operations)

    monkeypatch.setattr(threads, "_acks_all", spy)
    expected = {"shared": (1, 1), "class shared": (1, 3), "nothing shared": (3, 3)}
    for layout, (classes, purgatories) in expected.items():
        seen.clear()
        threads.acks_all_rate("optimized", layout, 3, 5)
        assert len({cls for cls, _ in seen}) == classes, layout
        assert len({purgatory for _, purgatory in seen}) == purgatories, layout


def test_the_timer_ablation_builds_purgatories_without_a_timer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    enabled: list[bool] = []
    real = threads._acks_all

    def spy(purgatory: Any, produce: type, index: int, operations: int) -> None:
        enabled.append(purgatory._timer_enabled)
        real(purgatory, produce, index, operations)

    monkeypatch.setattr(threads, "_acks_all", spy)
    data = threads.run(rounds=1, operations=5, thread_counts=(2,), timer=False)
    assert enabled and not any(enabled)
    assert data["timer"] is False
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    text = threads.report([str(path)])
    assert "timer off (ablation)" in text and ">=" not in text  # no goal judged
    enabled.clear()
    threads.acks_all_measure("reference", "shared", 1, 5)
    assert enabled == [True]


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="layout"):
        threads.acks_all_rate("optimized", "half shared", 1, 1)
    with pytest.raises(ValueError, match="implementation"):
        threads.acks_all_rate("fast", "shared", 1, 1)
    with pytest.raises(ValueError, match="threads"):
        threads.acks_all_rate("optimized", "shared", 0, 1)


def test_run_interleaves_every_layout_and_the_report_gives_the_ratios(tmp_path: Path) -> None:
    data = threads.run(rounds=2, operations=20, thread_counts=(1, 2))
    assert set(data["samples"]) == {
        f"{implementation}|{layout}|{count}"
        for implementation in threads.IMPLEMENTATIONS
        for layout in threads.LAYOUTS
        for count in (1, 2)
    }
    assert all(len(rates) == 2 for rates in data["samples"].values())
    assert set(data["cpu"]) == set(data["samples"])
    assert all(0 < seconds < 1 for values in data["cpu"].values() for seconds in values)
    assert len(data["load_start"]) == 3
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    text = threads.report([str(path)])
    assert text.count("| optimized |") == 2 and text.count("| reference |") == 2
    gil = "off" if data["gil"] == "off" else "on"
    assert f"GIL {gil}" in text
    if gil == "on":
        assert "2 threads / 1 thread (>= 0.9)" in text
    else:
        assert "shared / nothing shared at 2 threads (>= 0.85)" in text


def test_report_ratios_are_the_medians_ratios(tmp_path: Path) -> None:
    """A hand-made result: shared 80 (median of 70, 80, 90), nothing 100, class 90."""
    samples, cpu = {}, {}
    for implementation in threads.IMPLEMENTATIONS:
        for count in (1, 2):
            samples[f"{implementation}|shared|{count}"] = [90.0 * count, 70.0 * count, 80.0 * count]
            samples[f"{implementation}|class shared|{count}"] = [90.0 * count]
            samples[f"{implementation}|nothing shared|{count}"] = [100.0 * count]
            for layout, seconds in zip(threads.LAYOUTS, (2e-5, 1e-5, 1e-5), strict=True):
                cpu[f"{implementation}|{layout}|{count}"] = [seconds]
    data = {
        "python": "cpython 3.13.5", "free_threaded": True, "gil": "off", "build": "pure",
        "cpus": 2, "began": "b", "ended": "e", "load_start": [1.0, 1.0, 1.0],
        "load_end": [1.0, 1.0, 1.0], "rounds": 3, "operations": 1, "samples": samples, "cpu": cpu,
    }  # fmt: skip
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    text = threads.report([str(path)])
    assert (
        "| optimized | 2 | 160 | 180 | 200 | 0.80 | 0.90 | 0.89 | 2.00x | 20.0 / 10.0 (0.50) |"
        in text
    )
    assert "at 2 threads (>= 0.85): 0.80, NOT met" in text


@pytest.mark.skipif(
    not timer_module.__file__.endswith(".py"), reason="compare runs source trees, not a build"
)
def test_compare_runs_each_tree_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old tree is imported from where it is, even from a working directory that
    holds another tree (a ``-c`` script puts the working directory first)."""
    root = Path(threads.__file__).resolve().parents[2]
    old = tmp_path / "old"
    shutil.copytree(root / "kpurgatory", old / "kpurgatory")
    monkeypatch.chdir(root)
    found = threads.compare(str(old), str(root), sys.executable, rounds=2, operations=50)
    assert len(found["rates"]["before"]) == len(found["rates"]["after"]) == 2
    assert found["modules"]["before"].startswith(str(old.resolve()))
    assert found["modules"]["after"].startswith(str(root))
    assert found["ratio"] > 0


def test_contention_counts_every_shared_lock_and_restores_them() -> None:
    import kpurgatory.optimized.operation as operation_module

    shared = (timer_module._TIMER_LOCK, operation_module._FLAGS_LOCK)
    found = threads.contention(threads=2, operations=200)
    assert timer_module._TIMER_LOCK is shared[0]
    assert operation_module._FLAGS_LOCK is shared[1]
    assert set(found) == {
        "flags (process-wide)",
        "purgatory counters",
        "shards",
        "timer (process-wide)",
    }
    # add + cancel of each operation's timer entry, claim + completion of its flags
    assert found["timer (process-wide)"][0] == pytest.approx(2.0)
    assert found["flags (process-wide)"][0] == pytest.approx(2.0)
    assert all(0.0 <= held <= 1.0 for _, held in found.values())


def test_lock_costs_times_both_schemes() -> None:
    costs = threads.lock_costs(number=100, repeat=1)
    assert set(costs) == {"one RLock", "read side + bucket lock"}
    assert all(seconds > 0 for seconds in costs.values())
