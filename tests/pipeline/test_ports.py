"""A port replayed at scale through its conformance adapter (``pipeline run --adapter``).

The ports are the kit's Python adapter (a correct port) and the deliberately broken
adapters of tests/conformance/broken_adapter.py, run as subprocesses: one that fires a
tick late (a wrong answer the pipeline must find, shrink and write as a step file the
kit's ``--replay`` reproduces), one that crashes, one that hangs and one that writes
garbage (their streams fail with a clear message; the job ends). Then the shrinking,
the rule attribution and the bad inputs of ``pipeline run`` on their own.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kpurgatory.cli import build_parser
from kpurgatory.conformance.steps import (
    ClockAdvance,
    Init,
    PurgatoryAdvance,
    SetReady,
    Step,
    Watch,
    steps_from_json,
)
from kpurgatory.pipeline.cli import run_with
from kpurgatory.pipeline.ports import (
    Port,
    diverges,
    replay_through_port,
    rule_of,
    shrink,
    unit_of,
    without,
)
from kpurgatory.pipeline.replay import resolve_impl
from kpurgatory.pipeline.rows import replay_rows_through_port
from kpurgatory.workloads import stream_steps

ROOT = Path(__file__).resolve().parents[2]
PYTHON_PORT = f"{sys.executable} -m kpurgatory.conformance.python_adapter --impl optimized"


def broken(bug: str) -> str:
    """The command of a broken adapter (absolute paths: the executors run it)."""
    return f"{sys.executable} {ROOT / 'tests' / 'conformance' / 'broken_adapter.py'} --bug {bug}"


def run_cli(argv: list[str], session: Any = None) -> int:
    args = build_parser().parse_args(["pipeline", "run", "--quiet", *argv])
    return run_with(args, session)


# ---- on Spark (the session of conftest.py) -------------------------------------------------


def test_a_correct_port_agrees_on_every_stream(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = run_cli(
        [
            *("--adapter", PYTHON_PORT, "--scenario", "adversarial", "--scenario", "join_group"),
            *("--preset", "tiny", "--preset", "tick5", "--grid", "small", "--ops", "40"),
            *("--out", str(tmp_path)),
        ],
        spark,
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert "4 of 4 streams agreed at every step" in out
    assert not list((tmp_path / "counterexamples").glob("*.jsonl"))


def test_r5_a_port_firing_a_tick_late_is_found_shrunk_and_reproduced(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command = broken("late")
    status = run_cli(
        [
            *("--adapter", command, "--scenario", "fetch_long_poll", "--scenario", "adversarial"),
            *("--preset", "kafka", "--grid", "small", "--ops", "60", "--out", str(tmp_path)),
        ],
        spark,
    )
    out = capsys.readouterr().out
    assert status == 1, out
    assert "- R5: " in out
    files = sorted((tmp_path / "counterexamples").glob("*.jsonl"))
    assert files, out
    for path in files:
        steps = steps_from_json([json.loads(line) for line in path.read_text().splitlines()])
        assert len(steps) <= 8, path  # shrunk from hundreds of steps
        assert f"--replay {path}" in out
        argv = ["conformance", "--adapter", command, "--replay", str(path)]
        replayed = subprocess.run(
            [sys.executable, "-m", "kpurgatory", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert replayed.returncode == 1, replayed.stdout + replayed.stderr
        assert "FAIL replay" in replayed.stdout
        assert "expired" in replayed.stdout


def test_an_adapter_that_hangs_fails_its_streams_and_the_job_ends(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    status = run_cli(
        [
            # 3 s: a fresh adapter's start-up (its first answer) took over 1 s at load 10
            *("--adapter", broken("stall"), "--step-timeout", "3", "--grid", "small"),
            *("--scenario", "join_group", "--ops", "30", "--partitions", "1"),
            *("--out", str(tmp_path)),
        ],
        spark,
    )
    out = capsys.readouterr().out
    assert status == 1, out
    # it stops answering in its third run: the task's third stream
    assert "- protocol: 1 stream(s)" in out and "no answer within 3 s" in out, out
    assert "3 of 4 streams agreed" in out
    assert time.monotonic() - started < 120


@pytest.mark.parametrize(
    ("bug", "message", "failed"),
    [
        ("crash", "exited with code 3", 1),  # in its fourth run: the fourth stream
        ("garbage", "answer is not JSON", 4),  # every run: two, then the task gives up
    ],
)
def test_an_adapter_that_crashes_or_writes_garbage_fails_its_streams_with_the_reason(
    bug: str, message: str, failed: int
) -> None:
    port = Port(broken(bug), step_timeout_s=5)
    rows = [("join_group", "tiny", seed, 0, 20) for seed in range(1, 5)]
    columns = replay_rows_through_port(rows, port, ("reference", resolve_impl("reference")))
    streams = [i for i, kind in enumerate(columns["kind"]) if kind == "stream"]
    reasons = [columns["divergence"][i] for i in streams if columns["divergence"][i]]
    assert len(reasons) == failed, reasons
    assert message in reasons[0]
    assert {columns["rule"][i] for i in streams if columns["divergence"][i]} == {"protocol"}


# ---- without Spark --------------------------------------------------------------------------


def late_port() -> Port:
    return Port(broken("late"), step_timeout_s=5)


def test_the_shrunk_run_of_a_late_port_is_an_init_a_watch_and_the_drain_at_its_due_time() -> None:
    steps = stream_steps("fetch_long_poll", "kafka", 1, 0, 100)
    reference = resolve_impl("reference")
    port = late_port()
    with port.adapter() as adapter:
        found = replay_through_port(steps, adapter, port, reference)
        assert found.rule == "R5" and found.shrunk is not None
        assert [type(step) for step in found.shrunk] == [
            Init,
            PurgatoryAdvance,
            Watch,
            PurgatoryAdvance,
        ]
        assert diverges(found.shrunk, adapter, port, reference) == 3
        assert diverges(found.shrunk[:3], adapter, port, reference) is None


def test_shrink_removes_chunks_of_operations_and_keeps_the_failure() -> None:
    steps: list[Step] = [Init()]
    for i in range(40):
        steps += [Watch(f"op{i}", 100, ("k",)), SetReady(f"op{i}"), ClockAdvance(1)]

    def fails(candidate: list[Step]) -> int | None:  # fails iff op17 is watched
        for index, step in enumerate(candidate):
            if isinstance(step, Watch) and step.operation == "op17":
                return index
        return None

    shrunk, runs = shrink(steps, fails)
    assert shrunk[0] == Init() and shrunk[-1] == Watch("op17", 100, ("k",))
    assert len(shrunk) <= 3 and runs < 60
    with pytest.raises(ValueError, match="steps"):
        shrink([Init()], fails)


def test_removing_steps_keeps_the_time_of_every_step_left() -> None:
    steps: list[Step] = [
        Init(),
        PurgatoryAdvance(5),
        Watch("a", 10, ("k",)),
        ClockAdvance(3),
        SetReady("a"),
        PurgatoryAdvance(7),
        Watch("b", 10, ("k",)),
    ]
    keys = [unit_of(step) or index for index, step in enumerate(steps[1:])]
    assert without(steps, keys, {"a"}) == [
        Init(),
        PurgatoryAdvance(5),
        ClockAdvance(3),
        PurgatoryAdvance(7),
        Watch("b", 10, ("k",)),
    ]
    # the moves of a chunk removed become one move as long, a drain if any of them drained
    assert without(steps, keys, {"a", 2, 4}) == [
        Init(),
        PurgatoryAdvance(5),
        PurgatoryAdvance(10),
        Watch("b", 10, ("k",)),
    ]
    # a clock move removed alone comes back as a move as long: no shorter run (shrink
    # skips such candidates)
    assert without(steps, keys, {2}) == steps


def test_rule_of_names_the_rule_each_kind_of_difference_breaks() -> None:
    late = (None, None, (), (), None)
    early = (None, None, (("expired", "a", 5, None, "a", 5),), (), None)
    assert rule_of("purgatory_advance", "events differ: ...", early, late) == "R5"
    assert rule_of("purgatory_advance", "events differ: ...", late, early) == "R4"
    assert rule_of("check_and_complete", "result: expected 1, got 2", late, late) == "R25"
    assert rule_of("watch", 'raised: expected "ValueError", got null', late, late) == "R36"
    assert rule_of("watch", "state: num_purged: expected 1, got 0", late, late) == "R30"
    assert rule_of("watch", "the adapter did not answer properly: exited", late, None) == "protocol"


def test_a_task_gives_up_on_an_adapter_that_stopped_answering_twice_in_a_row() -> None:
    port = Port(broken("silent"), step_timeout_s=0.5)
    rows = [("join_group", "kafka", seed, 0, 10) for seed in range(1, 5)]
    started = time.monotonic()
    columns = replay_rows_through_port(rows, port, ("reference", resolve_impl("reference")))
    assert time.monotonic() - started < 30
    reasons = [
        r for k, r in zip(columns["kind"], columns["divergence"], strict=True) if k == "stream"
    ]
    assert all("no answer within 0.5 s" in reason for reason in reasons[:2]), reasons
    assert all("stopped answering 2 streams in a row" in reason for reason in reasons[2:]), reasons
    assert "outcome" not in columns["kind"]  # no outcome rows for streams never answered


# ---- bad input: exit 2 naming the option, before Spark starts ------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--master", "spark://127.0.0.1:PORT"], "--master"),
        (["--adapter", "/nonexistent/port-adapter --serve"], "--adapter"),
        (["--adapter", PYTHON_PORT, "--allow", "no-such-difference"], "--allow"),
        (["--adapter", PYTHON_PORT, "--mode", "rdd"], "--mode"),
        (["--out", "FILE/out"], "--out"),  # under a file (root may write anywhere else)
        (["--allow", "kafka"], "--allow"),
    ],
)
def test_bad_run_arguments_exit_2_naming_the_option(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("not a folder")
    argv = [
        a.replace("PORT", str(free_port())).replace("FILE", str(tmp_path / "file")) for a in argv
    ]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path)]
    started = time.monotonic()
    assert run_cli(["--grid", "small", *argv]) == 2
    assert option in capsys.readouterr().err
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("option", ["--scenario", "--preset"])
def test_an_unknown_scenario_or_preset_exits_2_naming_the_option(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["pipeline", "run", option, "no-such-name"])
    assert exit_info.value.code == 2
    assert option in capsys.readouterr().err
