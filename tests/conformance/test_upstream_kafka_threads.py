"""The threads mode on upstream Apache Kafka's own purgatory and timer.

``run_adapter.sh --threads`` compiles Kafka 4.x's DelayedOperationPurgatory and
SystemTimer with the adapter's threads mode (``adapter-threads/``) and serves programs
run on real Java threads. Kafka differs from the spec in two races no sequential run
can show (expiry without the operation's lock, KAFKA-19312's shape; ``cancelForKey``
cancelling timer entries without it), in a third found here (its sweep may try
operations watched after it began, R75) and in the documented known differences, so:

- with ``--allow kafka`` the programs leave out what those differences touch (no
  ``cancel_for_key``, ``purgatory_advance`` only in the clean-up, every delay >= 1 ms;
  Kafka lacks ``abandon``, ``maybe_try_complete`` and a public ``safe_try_complete``
  and declares so), the R75 sweep is accepted as behaviour, and Kafka's classes pass:
  seed 1 here, seeds 1-10 in the slow tier;
- without it the threads mode rejects Kafka's classes (slow tier: some seed of 1-10
  fails, with a rule line; which rules the shrunk histories showed is in
  docs/conformance.md: the two races, and Kafka's documented differences such as when
  an operation due at once runs).

They run only where ``KAFKA_SOURCE`` names a Kafka 4.x source tree with the
purgatory's Java sources and a JDK is installed.
"""

from __future__ import annotations

import subprocess

import pytest

from kpurgatory.cli import main
from tests.conformance.test_upstream_kafka import (
    KAFKA_SOURCE,
    LAUNCHER,
    SEEDS,
    TIMEOUT,
    adapter,
    needs_kafka,
    needs_purgatory,
)

pytestmark = [needs_kafka, needs_purgatory, pytest.mark.realtime]


def threads(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["conformance", "--timeout", TIMEOUT, "--adapter", adapter("--threads"), *args])
    return code, capsys.readouterr().out


def test_the_launcher_refuses_threads_with_timer_only() -> None:
    done = subprocess.run(
        ["sh", str(LAUNCHER), "--threads", "--timer-only"],
        input="",
        capture_output=True,
        text=True,
        env={"KAFKA_SOURCE": KAFKA_SOURCE, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2 and "--threads needs the purgatory" in done.stderr


def test_kafkas_purgatory_passes_a_few_threads_histories_with_allow_kafka(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = threads(capsys, "--threads", "--allow", "kafka", "--seed", "1", "--histories", "40")
    assert code == 0, out
    assert (
        "declared without abandon, callbacks, close, executor_shutdown, maybe_try_complete, "
        "negative_time, next_due_time, safe_try_complete" in out
    ), out
    assert "no cancel_for_key (--allow kafka-cancel-for-key-race: not checked)" in out
    assert "purgatory_advance only in the clean-up" in out
    assert "threads: PASS (40 histories, every one explained)" in out


@pytest.mark.slow
def test_kafkas_purgatory_passes_the_threads_mode_on_every_seed_with_allow_kafka(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for seed in SEEDS:
        code, out = threads(capsys, "--threads", "--allow", "kafka", "--seed", str(seed))
        figures = [line for line in out.splitlines() if line.startswith(("  explained", "  acc"))]
        with capsys.disabled():
            print(f"\nseed {seed}: " + "; ".join(line.strip() for line in figures))
        assert code == 0, out


@pytest.mark.slow
def test_without_allow_kafka_the_threads_mode_rejects_kafkas_races(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rules = {}
    for seed in SEEDS:
        code, out = threads(capsys, "--threads", "--seed", str(seed), "--shrink-attempts", "5")
        rule = next((line for line in out.splitlines() if line.startswith("  rule:")), "")
        with capsys.disabled():
            print(f"\nseed {seed}: exit {code} {rule.strip()}")
        if code:
            rules[seed] = rule
    assert rules, "no seed rejected Kafka's classes without --allow kafka"
    assert all(rule.startswith("  rule: R") for rule in rules.values()), rules
