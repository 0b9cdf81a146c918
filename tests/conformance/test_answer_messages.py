"""Every adapter-protocol mistake gets a message a porter can act on.

A porter's adapter is written in Go, Rust, Java or TypeScript: a message about its answer
names the field (``events[0].at_ms``, ``state.timer_sizes``), shows the JSON the adapter
sent and says what was expected, and never carries a Python value or exception name.
Each mistake is made by ``answer_mistake_adapter.py`` (the reference's answers with one
rewrite) or ``broken_adapter.py --bug buffered`` and run through the CLI as a porter runs
it; ``parse_answer`` is also checked line by line on a table of mistakes.

The rule for null (docs/conformance.md): Go's nil slice and nil map encode as null, so
``events: null`` and ``tries: null`` read as empty; a list result must still be a list.
"""

from __future__ import annotations

import copy
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from kpurgatory.cli import main
from kpurgatory.conformance.answer import AnswerError, parse_answer
from tests.conformance.support import BROKEN, ROOT

MISTAKES = ROOT / "tests" / "conformance" / "answer_mistake_adapter.py"
VECTORS = ROOT / "conformance" / "vectors"
CANCEL_FOR_KEY = VECTORS / "r29-cancel-for-key.json"
HAND_OVER = VECTORS / "r06-hand-over-order.json"
PYTHON_WORDS = ("None", "True", "False", "TypeError", "KeyError", "AttributeError", "Traceback")

GOOD: dict[str, Any] = {
    "result": None,
    "raised": None,
    "events": [{"kind": "task_ran", "task": "t1", "at_ms": 5, "unit": "t1", "due_ms": 5}],
    "tries": {"o1": 1},
    "state": {
        "clock_ms": 5,
        "timer_sizes": {"main": 0},
        "watched": 0,
        "num_delayed": 0,
        "watched_keys": 0,
        "num_purged": 0,
        "estimated_total_operations": 0,
    },
}


def _run(capsys: pytest.CaptureFixture[str], adapter: str, *vectors: Path) -> tuple[int, str]:
    args = ["conformance", "--adapter", adapter, "--timeout", "5"]
    for vector in vectors:
        args += ["--vectors", str(vector)]
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _mistake(name: str) -> str:
    return shlex.join([sys.executable, str(MISTAKES), "--mistake", name])


def _kit_lines(out: str) -> list[str]:
    """The report's own lines (the steps and observations it quotes are the port's JSON)."""
    return [
        line
        for line in out.splitlines()
        if not line.lstrip().startswith(("step:", "expected:", "actual:", "vector:", "replay:"))
    ]


def _no_python(out: str) -> None:
    """No Python value or exception name in the kit's own lines (the flush advice for an
    adapter written in Python, ``print(..., flush=True)``, is meant)."""
    for line in _kit_lines(out.replace("flush=True", "")):
        for word in PYTHON_WORDS:
            assert word not in line, (word, line)


def test_a_go_nil_slice_or_map_reads_as_empty_and_a_nil_list_result_says_how_to_fix_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Null list and null map: every empty list and object of the answers sent as null."""
    code, out = _run(capsys, _mistake("nil-slices"), CANCEL_FOR_KEY, HAND_OVER)
    assert code == 1, out
    assert "PASS r06-hand-over-order" in out, out  # events: null and tries: null read as empty
    assert (
        "FAIL r29-cancel-for-key: step 6 of 9 (cancel_for_key): result: expected [], got null "
        "(an empty list is [], never null: a Go adapter that returns a nil slice sends null; "
        "send make([]string, 0) instead)"
    ) in out, out
    _no_python(out)


def test_a_missing_field_is_named_with_what_the_answer_has(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _run(capsys, _mistake("no-raised"), HAND_OVER)
    assert code == 1, out
    assert (
        "NOT CONSUMED r06-hand-over-order: step 1 of 11 (init): raised: missing; expected null "
        'or the name of an exception (the object has ["events", "result", "state", "tries"])'
    ) in out, out
    _no_python(out)


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        ("string-clock", 'step 1 of 11 (init): state.clock_ms: expected an integer, got "0"'),
        ("float-at-ms", "step 10 of 11 (advance): events[0].at_ms: expected an integer, got 5.0"),
    ],
)
def test_a_value_of_the_wrong_type_is_shown_as_json(
    capsys: pytest.CaptureFixture[str], mistake: str, message: str
) -> None:
    code, out = _run(capsys, _mistake(mistake), HAND_OVER)
    assert code == 1, out
    assert f"NOT CONSUMED r06-hand-over-order: {message}" in out, out
    _no_python(out)


def test_null_sizes_need_the_size_capability(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, _mistake("null-sizes"), HAND_OVER)
    assert code == 1, out
    assert (
        'state.timer_sizes: expected an object of timer label to size, e.g. {"main": 0}, got '
        'null (a port without sizes declares it at init: "capabilities": {"without": ["size"]})'
    ) in out, out
    _no_python(out)
    code, out = _run(capsys, _mistake("sizes-absent"), HAND_OVER, CANCEL_FOR_KEY)
    assert code == 0, out
    assert "not checked: declared without size" in out, out


def test_an_adapter_that_never_flushes_is_told_to_flush(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Buffered output: the answers arrive only when the adapter exits."""
    adapter = shlex.join([sys.executable, str(BROKEN), "--bug", "buffered"])
    code, out = _run(capsys, adapter, HAND_OVER)
    assert code == 2, out
    assert "the adapter buffers its stdout" in out and "flush stdout after it" in out, out
    _no_python(out)


def _mutated(path: str, value: object) -> str:
    answer = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    target = answer
    for name in parents:
        target = target[int(name)] if isinstance(target, list) else target[name]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return json.dumps(answer)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("events", None, None),  # a nil slice: no events
        ("tries", None, None),  # a nil map: no tries
        ("events", {}, "events: expected a list of events ([] when none), got {}"),
        (
            "tries",
            [],
            "tries: expected an object of operation label to count ({} when none), got []",
        ),
        ("tries.o1", "1", 'tries.o1: expected an integer, got "1"'),
        ("state", None, "state: expected the state object"),
        ("result", KeyError, "result: missing; expected the call's result"),
        (
            "events.0.kind",
            "ran",
            'events[0].kind: expected "task_ran", "completed" or "expired", got "ran"',
        ),
        ("events.0.task", None, "events[0].task: expected a string, got null"),
        (
            "events.0.unit",
            KeyError,
            "events[0].unit: missing; expected the hand-over's label or null",
        ),
        ("events.0.due_ms", True, "events[0].due_ms: expected an integer, got true"),
        (
            "raised",
            3,
            'raised: expected null or "ValueError", "TypeError" or "RuntimeError", got 3',
        ),
        ("state.watched", None, "state.watched: expected an integer, got null"),
        (
            "state.num_purged",
            "0",
            'state.num_purged: expected an integer, or null to declare it absent, got "0"',
        ),
        ("state.timer_sizes.main", None, "state.timer_sizes.main: expected an integer, got null"),
        (
            "state.num_delayed",
            KeyError,
            "state.num_delayed: missing; expected an integer (a port of the timer alone",
        ),
    ],
)
def test_each_answer_mistake_names_its_field(path: str, value: object, message: str | None) -> None:
    line = _mutated(path, value)
    if message is None:
        observation, _ = parse_answer(line)
        assert getattr(observation, path) == ()
        return
    with pytest.raises(AnswerError) as raised:
        parse_answer(line)
    assert str(raised.value).startswith(message), str(raised.value)
    for word in PYTHON_WORDS:
        assert word not in str(raised.value).replace('"TypeError"', ""), str(raised.value)


def test_a_completion_names_its_via_and_an_unknown_one_is_refused() -> None:
    event = {
        "kind": "completed",
        "operation": "o",
        "at_ms": 1,
        "via": "expiry",
        "unit": "o",
        "due_ms": 1,
    }
    observation, _ = parse_answer(json.dumps({**GOOD, "events": [event]}))
    assert observation.events[0].unit == "o"
    with pytest.raises(AnswerError, match=r'events\[0\]\.via: expected "try_complete_else_watch"'):
        parse_answer(json.dumps({**GOOD, "events": [{**event, "via": "timer"}]}))


def test_an_answer_that_is_not_an_object_shows_what_it_got() -> None:
    with pytest.raises(AnswerError, match=r"answer is not a JSON object: got \[1, 2\]; expected"):
        parse_answer("[1, 2]")
    with pytest.raises(AnswerError, match=r"answer is not JSON \(Expecting value\): nope"):
        parse_answer("nope")
    with pytest.raises(AnswerError, match=r"the adapter reported an error: \{\"code\": 3\}"):
        parse_answer('{"error": {"code": 3}}')
