"""The ``kpurgatory`` command line: help texts a user can read, and exit codes.

Every command has a description, every option a help text; no reStructuredText markup
or internal note reaches ``--help``; bad arguments exit 2 naming the flag (not an
internal parameter name) and, for ``--impl``, saying a module path is wanted.
"""

from __future__ import annotations

import argparse

import pytest

from kpurgatory.cli import build_parser, main

COMMANDS = [
    ["demo"],
    ["bench"],
    ["conformance"],
    ["pipeline"],
    ["pipeline", "run"],
    ["pipeline", "vectors"],
    ["replay"],
]


def subparser(path: list[str]) -> argparse.ArgumentParser:
    """The parser of ``kpurgatory <path...>``."""
    parser = build_parser()
    for name in path:
        (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = action.choices[name]
    return parser


def help_text(path: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*path, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_is_plain_text_with_a_description(
    path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--help`` exits 0, has a description, and shows no RST backticks, no note meant for
    developers and no hidden flag."""
    text = help_text(path, capsys)
    assert subparser(path).description, f"{' '.join(path)} has no description"
    assert "``" not in text
    for internal in ("kpurgatory.cli's rule", "json-only", "imported only inside"):
        assert internal not in text


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_option_has_help(path: list[str]) -> None:
    """Each option and argument of each command says what it is for."""
    for action in subparser(path)._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        assert action.help, f"{' '.join(path)} {action.option_strings or action.dest}: no help"


def test_version_and_missing_command(capsys: pytest.CaptureFixture[str]) -> None:
    """``kpurgatory`` without a command is a usage error (exit 2)."""
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "--scenario", "adversarial", "--preset", "tiny", "--seed", "1", "--ops", "0"],
        ["pipeline", "run", "--ops", "0"],
        ["pipeline", "run", "--partitions", "-1"],
        ["pipeline", "vectors", "--out", "x", "--ops", "0"],
    ],
    ids=["replay", "pipeline-run", "partitions", "vectors"],
)
def test_non_positive_counts_name_the_flag(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--ops 0`` (and friends) exit 2 with argparse's message naming the CLI flag."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    flag = argv[-2]
    assert f"argument {flag}: must be >= " in err
    assert "n_ops" not in err


def test_replay_with_an_unknown_impl_asks_for_a_module_path(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``replay --impl foo``: exit 2, and the message says a module path is wanted."""
    argv = ["replay", "--scenario", "adversarial", "--preset", "tiny", "--seed", "1"]
    assert main([*argv, "--ops", "5", "--impl", "foo"]) == 2
    err = capsys.readouterr().err
    assert "impl 'foo'" in err and "module path" in err and "e.g. mypkg.port" in err


def test_demo_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """``kpurgatory demo`` exits 0 with its story on stdout."""
    assert main(["demo"]) == 0
    assert capsys.readouterr().out.strip()
