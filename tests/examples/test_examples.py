"""Every program under examples/ runs, as a script, and says what the spec says it must.

The virtual-time examples are deterministic (ManualClock + InlineExecutor), so their
whole narration is checked line by line against the rules they illustrate. The
long-poll server and client have their own loopback test (test_long_poll.py). A
meta-test makes sure no example is left out.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

TESTED_ELSEWHERE = {
    "long_poll_server.py": "tests/examples/test_long_poll.py",
    "long_poll_client.py": "tests/examples/test_long_poll.py",
    "long_poll_aio_server.py": "tests/examples/test_long_poll_aio.py",
}

EXPECTED: dict[str, list[str]] = {
    "timer_basics.py": [
        "t=0: at-once ran",  # R3: due 0 <= current time 0, handed over inside add
        "scheduled: size=2",  # R12
        "t=20: soon ran",  # R1: 25 rounds down to 20 with tick 10
        "advance_clock(20) -> True, current_time=20",  # R2, R8
        "cancelled later: size=0",  # R9
        "advance_clock(100) -> False (nothing was due)",  # R8
        "re-added: size=1",  # R10
        "t=200: again ran",  # R10: the first schedule (due 170) is gone
    ],
    "purgatory_basics.py": [
        "join-m1 waits: True, watched=2, delayed=1",  # R22
        "join-m2 waits: watched=4, delayed=2",
        "join-m1: complete, members=['m1', 'm2', 'm3']",  # R25: watch order
        "join-m2: complete, members=['m1', 'm2', 'm3']",
        "check_and_complete(group-g) -> 2",
        "after: watched=0, delayed=0",  # R61: nothing unfinished, all unlinked at once
        "after purge: watched=0, purged=3",  # R61 unlinked 3 pairs; R30 had nothing left
        "join-m4: complete, members=['m1', 'm2', 'm3']",
        "join-m4 completed at once: True",  # R23
        "t=299: join-x1 still waiting: True",  # R4
        "join-x1: complete, members=['x1']",  # R17: on_complete, then on_expiration
        "join-x1: ...by expiry",
        "t=300: join-x1 completed: True",  # R5
        "cancelled ['join-y1']: completed=False, delayed=0",  # R29
        "second submission of join-y1 refused",  # R34
    ],
}


def test_every_example_is_exercised() -> None:
    """A new file under examples/ must get an expected narration or its own test."""
    scripts = {path.name for path in EXAMPLES.glob("*.py") if path.name != "__init__.py"}
    assert scripts == set(EXPECTED) | set(TESTED_ELSEWHERE)
    for test_file in TESTED_ELSEWHERE.values():
        assert (ROOT / test_file).is_file()


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_runs_as_a_script(script: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Run ``python examples/<script>`` in-process and compare its narration."""
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    assert exited.value.code == 0
    assert capsys.readouterr().out.splitlines() == EXPECTED[script]
