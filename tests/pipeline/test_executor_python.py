"""``--executor-python``: which interpreter the executors replay with, and its errors.

The candidates are fake interpreters: executable scripts that print what a real one's
probe prints (``builds.describe()`` as JSON), changed to the case under test (compiled or
pure, other sources, another Python, missing pyarrow, a crash). So the selection runs
for real (subprocess, JSON, checks) in well under a second per case, without building
a compiled venv; the slow tests (test_cluster.py, test_compiled_executors.py) run
Spark on a real compiled build when there is one.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from kpurgatory.cli import build_parser
from kpurgatory.pipeline.builds import describe
from kpurgatory.pipeline.cli import run_with
from kpurgatory.pipeline.executor_python import (
    OPTION,
    ExecutorPythonError,
    compiled_candidates,
    probe,
    select,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="fake interpreters are sh scripts")

LOCAL = "local[2]"


def driver(build: str = "pure") -> dict[str, Any]:
    """This process described as the driver, with ``build`` (tests fix it: the suite also
    runs in the compiled venv)."""
    return {**describe(), "build": build}


def fake_python(
    folder: Path, name: str = "python", *, exit_status: int = 0, stdout: str | None = None,
    **changes: Any,
) -> Path:  # fmt: skip
    """An executable that answers the probe like a compiled build of this checkout's
    sources installed in ``folder/site-packages``, unless ``changes`` say otherwise."""
    answer = {
        **describe(),
        "executable": str(folder / name),
        "kpurgatory_path": str(folder / "site-packages" / "kpurgatory"),
        "build": "compiled",
        **changes,
    }
    text = json.dumps(answer) if stdout is None else stdout
    script = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    script.write_text(
        f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(text)}\n"
        + (f"echo 'SomeError: it broke' >&2\nexit {exit_status}\n" if exit_status else "")
    )
    script.chmod(0o755)
    return script


def test_auto_picks_a_compiled_interpreter_when_present(tmp_path: Path) -> None:
    """auto + a compiled build of the driver's sources: the executors run it, importing
    its own install (PYTHONSAFEPATH, its site-packages first) and no shipped zip."""
    compiled = fake_python(tmp_path / "venv")
    chosen = select("auto", LOCAL, environ={}, candidates=[compiled], driver=driver())
    assert chosen.executable == str(compiled)
    assert (chosen.build, chosen.chosen_by) == ("compiled", "auto")
    assert chosen.digest == describe()["digest"]
    assert chosen.worker_env == {
        "PYTHONSAFEPATH": "1",
        "PYTHONPATH": str(tmp_path / "venv" / "site-packages"),
    }
    assert not chosen.ship_package and chosen.set_interpreter
    assert chosen.message.startswith(f"executors replay with the compiled build: {compiled}")


def test_auto_picks_it_on_local_cluster_too(tmp_path: Path) -> None:
    compiled = fake_python(tmp_path / "venv")
    chosen = select(
        "auto", "local-cluster[2,1,1024]", environ={}, candidates=[compiled], driver=driver()
    )
    assert chosen.executable == str(compiled) and not chosen.ship_package


def test_auto_keeps_a_driver_that_is_compiled(tmp_path: Path) -> None:
    compiled = fake_python(tmp_path / "venv")
    chosen = select("auto", LOCAL, environ={}, candidates=[compiled], driver=driver("compiled"))
    assert chosen.executable == describe()["executable"] and chosen.build == "compiled"
    assert chosen.worker_env == {} and "it runs the compiled build" in chosen.message


def test_auto_falls_back_to_the_driver_when_there_is_no_compiled_build(tmp_path: Path) -> None:
    absent = tmp_path / "build" / "compiled" / "venv" / "bin" / "python"
    chosen = select("auto", LOCAL, environ={}, candidates=[absent], driver=driver())
    assert chosen.executable == describe()["executable"]
    assert (chosen.build, chosen.chosen_by) == ("pure", "auto")
    assert chosen.worker_env == {} and chosen.ship_package
    assert f"no compiled build at {absent}" in chosen.message
    assert "`make run` builds the compiled build" in chosen.message
    assert "the driver's interpreter" in chosen.message


def test_default_candidate_is_the_checkouts_compiled_venv() -> None:
    root = Path("/src/checkout")
    assert compiled_candidates(root)[0] == root / "build" / "compiled" / "venv" / "bin" / "python"
    assert compiled_candidates(None) == []


UNUSABLE: list[tuple[dict[str, Any], str]] = [
    ({"build": "pure"}, "runs the pure build"),
    ({"digest": "0" * 64}, "built from other sources than the driver's"),
    ({"missing": ["pyarrow"]}, "lacks pyarrow"),
    ({"python": "3.9.18"}, "is Python 3.9.18"),
    ({"build": "partly compiled"}, "a broken install"),
    ({"exit_status": 1}, "failed (exit status 1): SomeError: it broke"),
    ({"stdout": "hello"}, "printed no description of itself"),
]
"""Candidates auto must skip (with this reason in its message)."""


@pytest.mark.parametrize(("changes", "reason"), UNUSABLE)
def test_auto_falls_back_with_the_reason(
    tmp_path: Path, changes: dict[str, Any], reason: str
) -> None:
    """A candidate that cannot replay (or replays no faster) is not taken; the message
    says why, so the user can fix it."""
    candidate = fake_python(tmp_path / "venv", **changes)
    chosen = select("auto", LOCAL, environ={}, candidates=[candidate], driver=driver())
    assert chosen.executable == describe()["executable"] and chosen.build == "pure"
    assert f"{candidate} " in chosen.message and reason in chosen.message


@pytest.mark.parametrize(
    ("changes", "reason"), [u for u in UNUSABLE if u[0].get("build") != "pure"]
)
def test_an_explicit_unusable_interpreter_is_an_error_naming_the_option(
    tmp_path: Path, changes: dict[str, Any], reason: str
) -> None:
    """``--executor-python PATH`` that cannot replay: an error naming the option, the
    path and the reason; never a fallback."""
    bad = fake_python(tmp_path / "venv", **changes)
    with pytest.raises(ExecutorPythonError) as info:
        select(str(bad), LOCAL, environ={}, candidates=[], driver=driver())
    message = str(info.value)
    assert message.startswith(f"{OPTION} {bad}") and reason in message
    assert f"{OPTION} auto" in message  # and what to do instead


@pytest.mark.parametrize("name", ["missing/python", "not-executable", "no-such-python-here"])
def test_an_explicit_path_that_is_no_interpreter_is_an_error(tmp_path: Path, name: str) -> None:
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    value = name if "/" not in name and name != "not-executable" else str(tmp_path / name)
    with pytest.raises(ExecutorPythonError, match=f"^{OPTION} "):
        select(value, LOCAL, environ={"PATH": str(tmp_path)}, candidates=[], driver=driver())


def test_an_explicit_pure_interpreter_of_the_same_sources_is_taken(tmp_path: Path) -> None:
    """The user asked for it: a pure build is fine, and the message says it is pure."""
    pure = fake_python(tmp_path / "venv", build="pure")
    chosen = select(str(pure), LOCAL, environ={}, candidates=[], driver=driver())
    assert (chosen.executable, chosen.build, chosen.chosen_by) == (str(pure), "pure", OPTION)
    assert chosen.message.startswith("executors replay with the pure build")


def test_driver_is_the_driver_whatever_exists(tmp_path: Path) -> None:
    compiled = fake_python(tmp_path / "venv")
    chosen = select("driver", LOCAL, environ={}, candidates=[compiled], driver=driver())
    assert chosen.executable == describe()["executable"] and chosen.chosen_by == OPTION


def test_auto_honours_pyspark_python_and_checks_it(tmp_path: Path) -> None:
    """PYSPARK_PYTHON set by the user is an explicit choice: taken when usable, an error
    naming PYSPARK_PYTHON when not (auto does not silently replace it)."""
    good = fake_python(tmp_path / "good")
    chosen = select("auto", LOCAL, environ={"PYSPARK_PYTHON": str(good)}, driver=driver())
    assert chosen.executable == str(good) and chosen.chosen_by == "PYSPARK_PYTHON"
    bad = fake_python(tmp_path / "bad", missing=["pandas"])
    with pytest.raises(ExecutorPythonError, match=f"^PYSPARK_PYTHON {bad} lacks pandas"):
        select("auto", LOCAL, environ={"PYSPARK_PYTHON": str(bad)}, driver=driver())


def test_a_cluster_runs_the_shipped_sources_and_refuses_an_explicit_interpreter(
    tmp_path: Path,
) -> None:
    """On a cluster the executors' Python comes with it: auto says they replay the pure
    shipped sources; an explicit choice could not be honoured and is an error."""
    chosen = select("auto", "spark://host:7077", environ={}, driver=driver())
    assert (chosen.build, chosen.chosen_by) == ("pure", "cluster")
    assert chosen.ship_package and not chosen.set_interpreter
    for value in ("driver", str(fake_python(tmp_path / "venv"))):
        with pytest.raises(ExecutorPythonError, match=f"^{OPTION} .*only for local"):
            select(value, "spark://host:7077", environ={}, driver=driver())


def test_probe_asks_a_real_interpreter() -> None:
    """This interpreter, probed as a candidate would be: its own install, described."""
    found = probe(sys.executable)
    assert found["executable"] == sys.executable
    assert found["build"] in ("pure", "compiled") and len(found["digest"]) == 64


def _run(tmp_path: Path, *extra: str, session: Any = None) -> int:
    args = ["pipeline", "run", "--grid", "small", "--out", str(tmp_path / "out"), *extra]
    return run_with(build_parser().parse_args(args), session)


def test_cli_exits_2_naming_the_option_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad ``--executor-python``: exit status 2 and the message on stderr, before
    Spark starts (no session is given and none is built: nothing else is written)."""
    bad = fake_python(tmp_path / "venv", digest="0" * 64)
    for value in (str(tmp_path / "absent" / "python"), str(bad)):
        assert _run(tmp_path, "--executor-python", value) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"kpurgatory pipeline run: {OPTION} {value}")
    assert not (tmp_path / "out").exists()


def test_cli_refuses_to_change_a_given_sessions_executors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(tmp_path, "--executor-python", "driver", session=object()) == 2
    assert f"{OPTION} driver: a running session" in capsys.readouterr().err
