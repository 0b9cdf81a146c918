"""The demo runs and tells the expected story (R22, R25, R17 end to end)."""

from __future__ import annotations

from kpurgatory.cli import main
from kpurgatory.demo import run_demo


def test_demo_story_is_deterministic() -> None:
    first = run_demo()
    assert first == run_demo()
    text = "\n".join(first)
    assert "[t=  50 ms] produce-1: responds, offset 150: all replicas have it" in text
    assert "[t= 150 ms] produce-2: ...because its 100 ms timeout passed" in text
    assert "[t= 200 ms] fetch-B: ...because its 200 ms timeout passed" in text


def test_cli_demo_exit_code(capsys: object) -> None:
    assert main(["demo"]) == 0
