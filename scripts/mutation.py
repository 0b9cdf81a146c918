"""The project's own mutation score: a seeded sample of cosmic-ray mutants per module.

The mutants are those of cosmic-ray's core operators and of the project's own
(tools/cosmic_ray_kpurgatory: a statement replaced by ``pass``, a ``with <lock>:``
turned into its body, an ``acquire``/``release`` pair removed), which cosmic-ray finds
by their entry point; ``make mutation`` installs both. For each module: copy the tree
to ``build/mutation/<module>/tree`` (the working tree is never mutated), list every
mutant of the module, skip those inside type annotations (never evaluated: every
module has ``from __future__ import annotations``), draw a seeded sample of source
locations with one mutant each, skip the sampled mutants
``scripts/mutation_equivalents.txt`` lists as equivalent, run the module's tests once
unmutated (they must pass; the per-mutant timeout follows from their time), then each
remaining mutant with ``cosmic-ray exec``. Writes ``build/mutation/<module>/report.txt``
(score, every survivor with its diff) and prints one table row per module.

    python scripts/mutation.py [--module kpurgatory/_sweep.py ...] [--sample 25] [--seed 1]

Why cosmic-ray, and how to read the score: docs/verification.md, "Mutation score".
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENTS = ROOT / "scripts" / "mutation_equivalents.txt"
COPIED = ("kpurgatory", "tests", "docs", "conformance", "examples", "pyproject.toml")
OWN_OPERATORS = ("RemoveStatement", "RemoveLock", "RemoveAcquireRelease")
"""The project's operators (provider ``kpurgatory``, tools/cosmic_ray_kpurgatory)."""

# The tests each module's mutants run against, in two tiers as in the outside run: the
# fast, strong tests of the module first (cheapest first: pytest -x stops at the first
# failure), then, for the survivors only, the slow concurrency tier. Never the meta-tests
# that patch source text (tests/mutants, tests/aio/test_aio_mutants.py, tests/concurrency/
# test_lock_mutants.py): a mutated line they patch makes them fail for the wrong reason.
_TIMER_RULES = (
    "tests/test_timer_rules.py",
    "tests/test_timer_schedule_rules.py",
    "tests/test_timer_close_rules.py",
)
_RULES = (
    *_TIMER_RULES,
    "tests/test_operation_rules.py",
    "tests/test_purgatory_rules.py",
    "tests/test_purgatory_purge_rules.py",
    "tests/test_inputs.py",
    "tests/test_user_code_failures.py",
    "tests/test_reentrancy.py",
    "tests/test_reentrant_calls.py",
    "tests/test_lifecycle.py",
    "tests/test_reaper_lifecycle.py",
    "tests/test_subclassing.py",
    "tests/test_realtime.py",
    "tests/test_realtime_reaper.py",
)
_TIMER = (
    *_TIMER_RULES,
    # the timer's argument checks (R35) and its executor's refusals in a drain (R53, R65)
    "tests/test_inputs.py",
    "tests/test_user_code_failures.py",
    "tests/test_bounded_drain.py",
    "tests/test_realtime.py",
    "tests/optimized",
    "tests/machines/test_timer_model.py",
    "tests/machines/test_equivalence_timer.py",
    "tests/machines/test_equivalence_purgatory.py",
)
_AIO_RULES = (
    "tests/aio/test_aio_rules.py",
    "tests/aio/test_aio_cancel_rules.py",
    "tests/aio/test_aio_loop_rules.py",
)
_MACHINES = (
    "tests/machines/test_equivalence_timer.py",
    "tests/machines/test_equivalence_purgatory.py",
    "tests/machines/test_lifecycle_model.py",
)
_CONCURRENCY = ("tests/concurrency/test_stress.py", "tests/concurrency/test_lifecycle.py")
_SCHEDULES = (*_CONCURRENCY, "tests/concurrency/test_schedules.py")
_AIO = (
    *_AIO_RULES,
    "tests/aio/test_cancellation.py",
    "tests/aio/test_waiter_settling.py",
    "tests/aio/test_bounded_driver.py",
    "tests/aio/test_bounded_drain_driver.py",
    "tests/aio/test_bounded_let_go.py",
    "tests/aio/test_loop_executor.py",
    "tests/aio/test_reentrant_shutdown.py",
    "tests/aio/test_typing.py",
    "tests/aio/test_virtual_time.py",
    "tests/aio/test_equivalence.py",
    "tests/aio/test_cancellation_machine.py",
)
_AIO_SLOW = ("tests/examples",)

MODULES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "kpurgatory/_lifecycle.py": (
        (
            "tests/test_lifecycle.py",
            "tests/test_reaper_lifecycle.py",
            "tests/test_realtime.py",
            "tests/test_realtime_reaper.py",
            "tests/test_purgatory_rules.py",
            "tests/test_purgatory_purge_rules.py",
            "tests/machines/test_lifecycle_model.py",
        ),
        _CONCURRENCY,
    ),
    "kpurgatory/_sweep.py": (
        (
            "tests/test_user_code_failures.py",
            "tests/test_lifecycle.py",
            "tests/test_reentrant_calls.py",  # R67: what a key raises in a purge
            "tests/aio/test_cancellation.py",
            "tests/aio/test_waiter_settling.py",
        ),
        _CONCURRENCY,
    ),
    # the purgatory protocol both purgatories run: the equivalence machines cannot see a
    # bug in it (both sides share it); the rule tests and the lifecycle model can
    "kpurgatory/protocol.py": (
        (*_RULES, "tests/test_bounded_drain.py", *_MACHINES),  # its bounded advance (R73)
        _SCHEDULES,
    ),
    "kpurgatory/reference/timer.py": ((*_RULES, *_MACHINES), _SCHEDULES),
    "kpurgatory/reference/operation.py": ((*_RULES, *_MACHINES), _SCHEDULES),
    "kpurgatory/reference/purgatory.py": ((*_RULES, *_MACHINES), _SCHEDULES),
    "kpurgatory/optimized/bucket.py": (_TIMER, _CONCURRENCY),
    "kpurgatory/optimized/delay_queue.py": (_TIMER, _CONCURRENCY),
    "kpurgatory/optimized/wheel.py": (_TIMER, _CONCURRENCY),
    "kpurgatory/optimized/timer.py": (_TIMER, _SCHEDULES),
    # the aio layer's waiter paths live in these two modules: its rule tests (R48, R58) too
    "kpurgatory/optimized/operation.py": (
        (*_RULES, "tests/optimized", *_AIO_RULES, *_MACHINES),
        _SCHEDULES,
    ),
    "kpurgatory/optimized/purgatory.py": (
        (
            *_RULES,
            "tests/optimized",
            *_AIO_RULES,
            "tests/aio/test_bounded_let_go.py",  # R71: the let-go passes it runs for aio
            *_MACHINES,
        ),
        _SCHEDULES,
    ),
    "kpurgatory/aio/driver.py": (_AIO, _AIO_SLOW),
    "kpurgatory/aio/executor.py": (_AIO, _AIO_SLOW),
    "kpurgatory/aio/operation.py": (_AIO, _AIO_SLOW),
    "kpurgatory/aio/outcome.py": (_AIO, _AIO_SLOW),
    "kpurgatory/aio/purgatory.py": (_AIO, _AIO_SLOW),
    "kpurgatory/aio/virtual.py": (_AIO, _AIO_SLOW),
    "kpurgatory/aio/wrapped.py": ((*_AIO, "tests/typing/test_wrapped_types.py"), _AIO_SLOW),
}
"""Module -> (its quick tests, the slow tier its survivors run against)."""


@dataclass(frozen=True)
class Mutant:
    """One cosmic-ray work item, with the stable id the equivalents list uses."""

    job_id: str
    ident: str
    location: tuple[int, int]
    operator: str
    occurrence: int


def _slug(module: str) -> str:
    return module.removeprefix("kpurgatory/").removesuffix(".py").replace("/", ".")


def _copy_tree(tree: Path) -> None:
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.exists():
            shutil.copy2(source, tree / name)


def _annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions, as (line, column), of every annotation in ``source``."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        for annotation in annotations:
            if annotation is not None and annotation.end_lineno is not None:
                end = (annotation.end_lineno, annotation.end_col_offset or 0)
                spans.append(((annotation.lineno, annotation.col_offset), end))
    return spans


def _inside(position: tuple[int, int], spans: Iterable[tuple[Any, Any]]) -> bool:
    return any(start <= position < end for start, end in spans)


def _span_text(lines: Sequence[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    if start[0] == end[0]:
        text = lines[start[0] - 1][start[1] : end[1]]
    else:
        text = lines[start[0] - 1][start[1] :] + " ..."
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= 50 else text[:47] + "..."


def _mutants(work_items: Iterable[Any], module: str, source: str) -> list[Mutant]:
    """Every work item as a ``Mutant``: id ``path:line:col operator#n `text```, where
    ``#n`` tells apart the mutants one operator makes at one place (+1 and -1)."""
    lines = source.splitlines()
    items = sorted(
        work_items,
        key=lambda item: (
            tuple(item.mutations[0].start_pos),
            item.mutations[0].operator_name,
            item.mutations[0].occurrence,
        ),
    )
    seen: dict[tuple[Any, ...], int] = {}
    mutants = []
    for item in items:
        mutation = item.mutations[0]
        start, end = tuple(mutation.start_pos), tuple(mutation.end_pos)
        key = (start, mutation.operator_name)
        index = seen.get(key, 0)
        seen[key] = index + 1
        text = _span_text(lines, start, end)
        ident = f"{module}:{start[0]}:{start[1]} {mutation.operator_name}#{index} `{text}`"
        mutants.append(
            Mutant(item.job_id, ident, start, mutation.operator_name, mutation.occurrence)
        )
    return mutants


def load_equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """Mutant id -> why it is equivalent, from ``path`` (``id | reason`` lines, ``#``
    comments and blank lines ignored)."""
    equivalents: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        ident, separator, reason = line.partition(" | ")
        if not separator or not reason.strip():
            raise SystemExit(f"{path}:{number}: expected 'mutant id | reason', got {line!r}")
        equivalents[ident.strip()] = reason.strip()
    return equivalents


def _sample(mutants: list[Mutant], size: int, seed: int, module: str) -> list[Mutant]:
    """``size`` mutants drawn with a seeded RNG, spread over source locations: one at
    each of a shuffled order of locations, then a second at each, and so on (so no
    operator family crowds out the others by its number of variants, and a small module
    is run whole)."""
    by_location: dict[tuple[int, int], list[Mutant]] = {}
    for mutant in mutants:
        by_location.setdefault(mutant.location, []).append(mutant)
    rng = random.Random(f"{seed}:{module}")
    locations = sorted(by_location)
    rng.shuffle(locations)
    for location in locations:
        by_location[location].sort(key=lambda m: m.ident)
        rng.shuffle(by_location[location])
    rounds = max((len(group) for group in by_location.values()), default=0)
    order = [
        by_location[location][round_]
        for round_ in range(rounds)
        for location in locations
        if round_ < len(by_location[location])
    ]
    return sorted(order[:size], key=lambda m: m.ident)


def _fingerprint(tree: Path, tests: Sequence[str], seed: int, size: int) -> str:
    """What a session's results depend on: the package, the tests run, seed and size."""
    digest = hashlib.sha256(f"{seed}/{size}/{' '.join(tests)}".encode())
    files = sorted((tree / "kpurgatory").rglob("*.py"))
    for test in tests:
        path = tree / test
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    files += [*sorted((tree / "tests").glob("**/conftest.py")), tree / "tests" / "support.py"]
    for path in files:
        digest.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _environment(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}


def _run(command: Sequence[str], tree: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in ``tree`` (kpurgatory imported from there), output captured;
    ``SystemExit`` with its output if it fails."""
    done = subprocess.run(
        command, cwd=tree, env=_environment(tree), text=True, capture_output=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done


def _pytest(tests: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-x", "-q", *tests]


def _passes(tests: Sequence[str], tree: Path, timeout: float | None) -> tuple[bool, str]:
    """Run ``tests`` in ``tree``: (passed, output tail); a timeout is a failure (the whole
    process group is killed, as cosmic-ray does)."""
    process = subprocess.Popen(
        _pytest(tests),
        cwd=tree,
        env=_environment(tree),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return False, "timeout"
    return process.returncode == 0, output[-1500:]


def _timed_baseline(tests: Sequence[str], tree: Path, module: str) -> float:
    """Seconds the unmutated tests take; ``SystemExit`` if they fail."""
    started = time.monotonic()
    passed, output = _passes(tests, tree, None)
    if not passed:
        raise SystemExit(f"{module}: its tests fail unmutated:\n{output}")
    return time.monotonic() - started


def _require_own_operators() -> None:
    """``SystemExit`` unless cosmic-ray lists the project's operators (a session without
    them would score the module on cosmic-ray's core operators alone, silently)."""
    import cosmic_ray.plugins  # type: ignore[import-untyped]

    names = set(cosmic_ray.plugins.operator_names())
    missing = [name for name in OWN_OPERATORS if f"kpurgatory/{name}" not in names]
    if missing:
        raise SystemExit(
            f"cosmic-ray does not list the project's operators {missing}: install "
            "tools/cosmic_ray_kpurgatory (make mutation does: pip install -e "
            "tools/cosmic_ray_kpurgatory)"
        )


def run_module(module: str, size: int, seed: int, out: Path, equivalents: dict[str, str]) -> str:
    """Sample, run and report one module; return its table row."""
    from cosmic_ray.work_db import WorkDB, use_db  # type: ignore[import-untyped]
    from cosmic_ray.work_item import (  # type: ignore[import-untyped]
        TestOutcome,
        WorkerOutcome,
        WorkResult,
    )

    started = time.monotonic()
    directory = out / _slug(module)
    tree = directory / "tree"
    _copy_tree(tree)
    quick, slow = MODULES[module]
    quick_s = _timed_baseline(quick, tree, module)
    timeout = round(3 * quick_s + 60)
    config = directory / "config.toml"
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{" ".join(_pytest(quick))}"\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n',
        encoding="utf-8",
    )
    session = directory / "session.sqlite"
    stamp = directory / "fingerprint"
    fingerprint = _fingerprint(tree, quick, seed, size)
    resumed = session.exists() and stamp.exists() and stamp.read_text() == fingerprint
    cosmic = [sys.executable, "-m", "cosmic_ray.cli"]
    if not resumed:  # else go on with the results of an interrupted run of the same code
        session.unlink(missing_ok=True)
        stamp.unlink(missing_ok=True)
        _run([*cosmic, "init", str(config), str(session)], tree)
        stamp.write_text(fingerprint)
    source = (tree / module).read_text(encoding="utf-8")
    spans = _annotation_spans(source)
    with use_db(str(session), WorkDB.Mode.open) as db:
        every = _mutants(db.work_items, module, source)
        runnable = [m for m in every if not _inside(m.location, spans)]
        sampled = _sample(runnable, size, seed, module)
        sampled_ids = {m.job_id for m in sampled}
        equivalent = [m for m in sampled if m.ident in equivalents]
        pending = {item.job_id for item in db.pending_work_items}
        unsampled = [m.job_id for m in every if m.job_id not in sampled_ids]
        skipped = WorkResult(output="not sampled", worker_outcome=WorkerOutcome.SKIPPED)
        db.set_multiple_results([job for job in unsampled if job in pending], skipped)
        for mutant in (m for m in equivalent if m.job_id in pending):
            why = f"equivalent: {equivalents[mutant.ident]}"
            db.set_result(
                mutant.job_id, WorkResult(output=why, worker_outcome=WorkerOutcome.SKIPPED)
            )
    _run([*cosmic, "exec", str(config), str(session)], tree)
    with use_db(str(session), WorkDB.Mode.open) as db:
        results = dict(db.results)
    killed: list[Mutant] = []
    survived: list[tuple[Mutant, str]] = []
    broken: list[tuple[Mutant, str]] = []
    for mutant in sampled:
        if mutant in equivalent:
            continue
        result = results[mutant.job_id]
        if result.test_outcome == TestOutcome.KILLED:
            killed.append(mutant)
        elif result.test_outcome == TestOutcome.SURVIVED:
            survived.append((mutant, result.diff or ""))
        else:
            broken.append((mutant, result.output or ""))
    slow_killed: list[Mutant] = []
    if survived and slow:
        slow_timeout = 3 * _timed_baseline(slow, tree, module) + 60
        for mutant, _ in survived:
            _run([*cosmic, "apply", module, mutant.operator, str(mutant.occurrence)], tree)
            try:
                passed, _ = _passes(slow, tree, slow_timeout)
            finally:
                shutil.copy2(ROOT / module, tree / module)
            if not passed:
                slow_killed.append(mutant)
        survived = [(m, diff) for m, diff in survived if m not in slow_killed]
        killed += slow_killed
    judged = len(killed) + len(survived)
    score = 100.0 * len(killed) / judged if judged else 100.0
    own = [m for m in sampled if m.operator.startswith("kpurgatory/")]
    elapsed = time.monotonic() - started
    current = {m.ident for m in every}
    stale = [i for i in equivalents if i.startswith(f"{module}:") and i not in current]
    lines = [
        f"module: {module}",
        f"seed {seed}: {len(sampled)} mutants sampled from {len(runnable)} at "
        f"{len({m.location for m in runnable})} places "
        f"({len(every)} in all, {len(every) - len(runnable)} inside annotations)",
        f"quick tier ({quick_s:.1f} s unmutated, timeout {timeout} s): {' '.join(quick)}",
        f"slow tier, for survivors: {' '.join(slow) or '-'}",
        f"killed {len(killed)} ({len(slow_killed)} by the slow tier), survived {len(survived)}, "
        f"equivalent {len(equivalent)}, not run {len(broken)}; "
        f"score excluding equivalents {score:.1f}%",
        f"of them the project's operators (statement, lock removal): {len(own)} sampled, "
        f"{sum(m in killed for m in own)} killed, {sum(m in equivalent for m in own)} "
        f"equivalent ({sum(m.operator.startswith('kpurgatory/') for m in runnable)} made)",
        f"wall time {elapsed:.0f} s",
    ]
    lines += [f"stale equivalent (matches no mutant now): {ident}" for ident in stale]
    lines += [f"killed by the slow tier: {m.ident}" for m in slow_killed]
    lines += [f"\nEQUIVALENT {m.ident} | {equivalents[m.ident]}" for m in equivalent]
    for mutant, diff in survived:
        lines += [f"\nSURVIVED {mutant.ident}", diff.rstrip()]
    for mutant, output in broken:
        lines += [f"\nNOT RUN {mutant.ident}", output.rstrip()[-2000:]]
    (directory / "report.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.rmtree(tree)
    return (
        f"| {module} | {len(sampled)} | {len(killed)} | {len(equivalent)} | {len(survived)} "
        f"| {score:.1f}% | {elapsed:.0f} s |"
    )


HEADER = (
    "| module | sampled | killed | equivalent | survived | score excl. equivalents | time |\n"
    "|---|---|---|---|---|---|---|"
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--module", action="append", choices=sorted(MODULES), default=[])
    parser.add_argument("--sample", type=int, default=25, help="mutants per module")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "mutation")
    args = parser.parse_args(argv)
    args.out = args.out.resolve()  # the cosmic-ray commands run in the copied tree
    if args.sample < 1:
        parser.error("--sample must be at least 1")
    equivalents = load_equivalents()
    _require_own_operators()
    modules = args.module or list(MODULES)
    print(HEADER, flush=True)
    rows = []
    for module in modules:
        row = run_module(module, args.sample, args.seed, args.out, equivalents)
        rows.append(row)
        print(row, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "scores.md").open("a", encoding="utf-8") as scores:
        scores.write(f"\nseed {args.seed}, sample {args.sample}\n{HEADER}\n")
        scores.write("\n".join(rows) + "\n")
    print(f"reports: {args.out}/<module>/report.txt; rows appended to {args.out}/scores.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
