"""The kit is robust to what ports and files really send: object key order, invalid shrinks,
bad input files.

- JSON objects are compared as objects: an adapter whose encoder sorts map keys (Go's
  does) passes; a wrong size names ``timer_sizes``, never an empty message.
- Shrinking keeps sequences valid (every label defined before use, inside a task's
  ``on_run`` too) and keeps the failure the search found.
- No input file makes ``--replay`` end in a traceback: an invalid sequence is one error
  naming its line.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from pathlib import Path

import pytest

from kpurgatory.conformance.driver import (
    Driver,
    DriverSide,
    Observation,
    StepError,
    compare_observations,
    sequence_error,
)
from kpurgatory.conformance.stateful import StatefulFailure, check_sequence, minimize
from kpurgatory.conformance.steps import (
    Add,
    Advance,
    Cancel,
    ForceComplete,
    Init,
    NextDueTime,
    SetReady,
    Step,
    Watch,
)
from tests.conformance.support import BROKEN
from tests.conformance.support import conformance_and_errors as conformance
from tests.support import load

# ---- objects compared as objects ------------------------------------------------------------


def test_an_adapter_that_sorts_object_keys_passes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    adapter = shlex.join([sys.executable, str(BROKEN), "--bug", "sorted-keys"])
    steps = tmp_path / "two-timers.jsonl"
    lines = [
        {"step": "init", "timers": ["main", "aux"]},
        {"step": "add", "task": "t", "delay_ms": 5, "timer": "aux"},
        {"step": "advance", "ms": 5, "timer": "aux"},
    ]
    steps.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, out, _ = conformance(capsys, "--adapter", adapter, "--replay", str(steps))
    assert code == 0, out
    code, out, _ = conformance(
        capsys, "--adapter", adapter, "--stateful", "--seed", "1", "--max-examples", "20"
    )
    assert code == 0, out


def test_a_state_difference_names_its_field_whatever_the_key_order() -> None:
    observation = _observe([Init(timers=("main", "aux")), Add("t", 5, "aux")])[-1]
    assert observation.state is not None
    reordered = dataclasses.replace(
        observation,
        state=dataclasses.replace(
            observation.state, timer_sizes=tuple(reversed(observation.state.timer_sizes))
        ),
    )
    assert compare_observations(observation, reordered) is None
    wrong = Observation.from_json(
        {
            **observation.to_json(),
            "state": {**observation.to_json()["state"], "timer_sizes": {"aux": 0, "main": 0}},
        }
    )
    message = compare_observations(observation, wrong)
    assert (
        message == 'state: timer_sizes: expected {"main": 0, "aux": 1}, got {"aux": 0, "main": 0}'
    )


def _observe(steps: list[Step]) -> list[Observation]:
    driver = Driver(load("reference"))
    try:
        return [driver.execute(step) for step in steps]
    finally:
        driver.close()


# ---- valid sequences ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "index", "words"),
    [
        ([Advance(1)], 0, "first step of a run must be init"),
        ([Init(), Cancel("t")], 1, "unknown task or operation label 't'"),
        ([Init(), Add("t", 5, on_run=(Cancel("gone"),))], 1, "on_run of 't'"),
        ([Init(), SetReady("op")], 1, "unknown operation label 'op'"),
        ([Init(), ForceComplete("op")], 1, "unknown operation label 'op'"),
        ([Init(), Add("t", 5, "aux")], 1, "unknown timer label 'aux'"),
        ([Init(), NextDueTime("aux")], 1, "unknown timer label 'aux'"),
        ([Init(), Add("t", 5), Add("t", 6)], 2, "must repeat its delay"),
        ([Init(), Watch("x", 5, ("k",)), Add("x", 5)], 2, "is an operation"),
        ([Init(), Add("x", 5), Watch("x", 5, ("k",))], 2, "is a task label"),
        ([Init(), Add("t", 5), Init(), Cancel("t")], 3, "unknown task or operation label"),
    ],
)
def test_sequence_error_names_the_first_step_that_does_not_fit(
    steps: list[Step], index: int, words: str
) -> None:
    problem = sequence_error(steps)
    assert problem is not None and problem[0] == index and words in problem[1], problem


def test_valid_sequences_have_no_error() -> None:
    steps: list[Step] = [
        Init(timers=("main", "aux")),
        Add("t", 5, on_run=(Cancel("t"),)),
        Watch("op", 5, ("k",)),
        Add(
            "u", 3, "aux", on_run=(Cancel("op"), Add("t", 5, on_run=(Cancel("t"),)), SetReady("op"))
        ),
        Cancel("op"),
        Watch("op", 5, ("k",)),
    ]
    assert sequence_error(steps) is None


def test_a_nested_step_on_an_unknown_label_is_a_step_error_not_a_task_failure() -> None:
    """The reference used to swallow it (a nested step that raises ends the task's run)."""
    driver = Driver(load("reference"))
    driver.execute(Init())
    driver.execute(Add("t", 2, on_run=(Cancel("gone"),)))
    with pytest.raises(StepError, match="cancel in the run of task 't'"):
        driver.execute(Advance(5))
    driver.close()


def test_minimize_never_runs_an_invalid_candidate_and_keeps_the_failure_kind() -> None:
    """A port whose advance answers a wrong result after a task was added, and a wrong
    clock on any advance of 7: the failure found is the result; deleting the add would
    leave only the clock, another failure, which minimize must not report."""
    reference = load("reference")

    class TwoBugs:
        def __init__(self) -> None:
            self.inner = DriverSide(reference)
            self.added = False
            self.seen: list[list[Step]] = []

        def execute(self, step: Step) -> Observation:
            if isinstance(step, Init):
                self.added = False
            self.added |= isinstance(step, Add)
            observation = self.inner.execute(step)
            if isinstance(step, Advance) and step.ms == 7:
                assert observation.state is not None
                state = dataclasses.replace(observation.state, clock_ms=-1)
                observation = dataclasses.replace(observation, state=state)
                if self.added:
                    observation = dataclasses.replace(observation, result="wrong")
            return observation

        def close(self) -> None:
            self.inner.close()

    steps: list[Step] = [
        Init(),
        Add("u", 60),
        Add("t", 50, on_run=(Cancel("u"),)),
        Advance(7),
    ]
    side = TwoBugs()
    found = check_sequence(steps, side, reference)
    assert found is not None and found.message.startswith("result:")
    shrunk = minimize(found, side, reference)
    assert shrunk.message.startswith("result:"), shrunk.message
    assert sequence_error(shrunk.steps) is None
    # removing u's add leaves t cancelling an undefined label: never a candidate
    assert all(isinstance(s, Init | Add | Advance) for s in shrunk.steps)
    assert any(isinstance(s, Add) for s in shrunk.steps)


def test_a_failure_kind_is_the_step_and_the_field() -> None:
    failure = StatefulFailure(
        [Init(), Advance(1)],
        "state: clock_ms: expected 1, got 0; watched: expected 0, got 1",
        None,
        None,
    )
    assert failure.kind == ("advance", "state clock_ms,watched")
    failure = StatefulFailure([Init(), Advance(1)], "events differ:\n  expected []", None, None)
    assert failure.kind == ("advance", "events differ")


# ---- no traceback from an input file ----------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        (['{"step": "init"}', '{"step": "cancel", "task": "t"}'], "line 2: cancel: unknown"),
        (
            [
                '{"step": "init"}',
                "",
                '{"step": "add", "task": "t", "delay_ms": 5, '
                '"on_run": [{"step": "cancel", "task": "gone"}]}',
            ],
            "line 3: add: cancel in the on_run of 't'",
        ),
        (['{"step": "advance", "ms": 5}'], "line 1: the first step of a run must be init"),
        (['{"step": "init"}', "[1, 2]"], "line 2:"),
        (['{"step": "init"}', '{"step": "add"}'], "line 2:"),
        (['{"step": "init"}', '{"step": "init", "timers": "main"}'], "line 2:"),
        (['{"step": "init"}', '{"step": "init", "timers": [1]}'], "line 2:"),
        (
            [
                '{"step": "init"}',
                '{"step": "watch", "operation": "o", "delay_ms": 1, "keys": [{}]}',
            ],
            "line 2:",
        ),
        (['{"step": "init"}', "nonsense"], "line 2: not JSON"),
        (["\ufeff{}"], "line 1:"),
    ],
)
def test_no_input_file_ends_in_a_traceback(
    lines: list[str], words: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err = conformance(capsys, "--adapter", "x", "--replay", str(path))
    assert code == 2, err
    assert "Traceback" not in err and words in err, err


def test_an_undecodable_replay_file_is_one_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_bytes(b'{"step": "init"}\n\xff\xfe\n')
    code, _, err = conformance(capsys, "--adapter", "x", "--replay", str(path))
    assert code == 2 and f"--replay {path}" in err and "Traceback" not in err, err
