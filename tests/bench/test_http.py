"""The HTTP long-poll benchmark serves both ways of waiting and checks its own answers
(its figures are never asserted)."""

from __future__ import annotations

import importlib.util

import pytest

from kpurgatory.bench import http

pytestmark = [
    pytest.mark.realtime,
    pytest.mark.skipif(importlib.util.find_spec("aiohttp") is None, reason="needs aiohttp"),
]


def test_both_servers_answer_every_poll_and_report_cpu() -> None:
    """A round raises unless exactly the published polls were answered (the others expired)."""
    figures = http.measure(polls=20, rounds=1)
    assert set(figures["cpu_us_per_poll"]) == set(http.WAITS)
    assert all(value > 0 for value in figures["cpu_us_per_poll"].values())
    assert figures["aio_over_future"] > 0 and len(figures["load"]) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--polls", "3"], "--polls must be at least 10"), (["--rounds", "0"], "--rounds must")],
)
def test_bad_arguments_name_the_option(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        http.main(argv)
    assert message in capsys.readouterr().err
