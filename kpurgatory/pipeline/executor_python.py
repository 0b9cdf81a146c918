"""Which Python the pipeline's executors replay with (``pipeline run --executor-python``).

The replay stage runs ``kpurgatory.optimized`` in Spark's Python workers, so its speed
is the speed of the build those workers import: the mypyc-compiled one (``make
compiled-venv``, several times faster) or the pure-Python one. ``select`` picks the
interpreter before Spark starts, for masters whose executors run on this machine
(``local[...]`` and ``local-cluster[...]``):

- ``auto`` (the default): ``PYSPARK_PYTHON`` if the environment sets it (the user's
  explicit choice, checked as below); else the driver's interpreter if its
  ``kpurgatory.optimized`` is compiled; else the checkout's compiled build
  (``build/compiled/venv/bin/python`` beside the driver's package, what ``make run``
  builds) if it is compiled, has the replay's modules and the driver's sources; else the
  driver's interpreter (pure), with a message saying why no compiled build was taken.
- ``driver``: the driver's interpreter (``sys.executable``), whatever its build.
- a path (or a command on ``PATH``): that interpreter. If it cannot run, is another
  Python version, lacks pyarrow/pandas or kpurgatory, or its kpurgatory is built from
  other sources than the driver's, ``ExecutorPythonError`` names the option and the
  fix: a choice the user made explicitly never silently falls back.

Why the worker environment matters: Spark starts workers with ``python -m
pyspark.daemon`` in the driver's working directory and with the driver's
``PYTHONPATH``, so run from a checkout they would import the checkout's pure sources
even from a compiled interpreter. For an interpreter other than the driver's, the
workers therefore get ``PYTHONSAFEPATH=1`` (no working directory on ``sys.path``) and
the folder holding that interpreter's own kpurgatory first on ``PYTHONPATH``
(``ExecutorPython.worker_env``, passed as ``spark.executorEnv.*``); and the package zip
that ``local-cluster`` executors otherwise get (``addPyFile``, which would shadow an
installed build too) is not shipped (``ship_package``). After Spark starts,
``kpurgatory.pipeline.spark.check_executors`` asks every executor which build and
sources it really imported, and stops the run if that is not what was selected.

Other masters (a real cluster): the executors' Python comes with the cluster and the
driver ships kpurgatory's sources to them, so they replay the pure build; an explicit
``--executor-python`` there is an error (it could not be honoured).

Stdlib only: runs before any extra is imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from kpurgatory.pipeline import builds

__all__ = [
    "OPTION",
    "PROBE_TIMEOUT_S",
    "ExecutorPython",
    "ExecutorPythonError",
    "compiled_candidates",
    "is_local_cluster_master",
    "is_local_master",
    "probe",
    "project_root",
    "select",
]

OPTION = "--executor-python"
"""The command-line option this module serves (named in every error)."""

PROBE_TIMEOUT_S = 120.0
"""How long a candidate interpreter may take to describe itself (a cold start on a busy
2-core machine imports kpurgatory.optimized in well under a second; this is a hang guard)."""

COMPILED_VENV = Path("build", "compiled", "venv")
"""Where ``make compiled-venv`` (and ``make run``) put the compiled build, per checkout."""


class ExecutorPythonError(ValueError):
    """The executors' interpreter cannot be used; the message names the option and the fix."""


@dataclass(frozen=True)
class ExecutorPython:
    """The interpreter chosen for the executors, and how Spark must start it.

    ``build`` and ``digest`` are what every executor must report once Spark runs (None:
    not checked); ``message`` says which build replays and why (printed, and kept in
    the report); ``worker_env`` goes to ``spark.executorEnv.*``; ``set_interpreter``:
    ``PYSPARK_PYTHON`` is set to ``executable`` for the session (local masters);
    ``ship_package``: a non-local master's executors get the package zip (addPyFile).
    """

    executable: str
    chosen_by: str
    build: str | None
    digest: str | None
    message: str
    worker_env: Mapping[str, str] = field(default_factory=dict)
    set_interpreter: bool = True
    ship_package: bool = True

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (for the run's ``run.json``)."""
        data = asdict(self)
        data["worker_env"] = dict(self.worker_env)
        return data


def is_local_master(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: executors in the driver's JVM."""
    return master == "local" or master.startswith("local[")


def is_local_cluster_master(master: str) -> bool:
    """``local-cluster[N,cores,mem]``: separate executor JVMs, but on this machine."""
    return master.startswith("local-cluster[")


def project_root() -> Path | None:
    """The source checkout holding the driver's ``kpurgatory`` package (the folder with
    ``pyproject.toml`` beside it), or None for an installed package."""
    import kpurgatory

    root = Path(kpurgatory.__file__ or ".").resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def compiled_candidates(root: Path | None) -> list[Path]:
    """The compiled-build interpreters ``auto`` considers: ``make compiled-venv``'s in
    ``root`` (POSIX and Windows venv layouts); none without a checkout."""
    if root is None:
        return []
    venv = root / COMPILED_VENV
    return [venv / "bin" / "python", venv / "Scripts" / "python.exe"]


def _probe_source() -> str:
    return resources.files("kpurgatory.pipeline").joinpath("builds.py").read_text("utf-8")


def probe(
    executable: str, *, environ: Mapping[str, str] | None = None, timeout: float = PROBE_TIMEOUT_S
) -> dict[str, Any]:
    """What ``executable`` runs (``builds.describe()``), asked in a subprocess.

    It runs from a temporary folder, without ``PYTHONPATH`` and with ``PYTHONSAFEPATH=1``,
    so the answer is the interpreter's *own* installation, not a checkout on a path.
    ``ExecutorPythonError`` (without the option's name: the caller adds it) if it cannot
    run, fails, hangs or prints no description.
    """
    env = {k: v for k, v in (os.environ if environ is None else environ).items()}
    env.pop("PYTHONPATH", None)
    env["PYTHONSAFEPATH"] = "1"
    try:
        done = subprocess.run(
            [executable, "-c", _probe_source()],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=tempfile.gettempdir(),
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ExecutorPythonError(f"did not answer within {timeout:.0f} s") from None
    except OSError as exc:
        raise ExecutorPythonError(f"cannot be run ({exc.strerror or exc})") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        if len(last) > 200:
            last = last[:200] + "..."
        raise ExecutorPythonError(f"failed (exit status {done.returncode}): {last}")
    lines = done.stdout.strip().splitlines()
    try:
        found: Any = json.loads(lines[-1]) if lines else None
    except ValueError:
        found = None
    if not isinstance(found, dict) or "executable" not in found:
        raise ExecutorPythonError(
            "printed no description of itself (is it a Python 3 interpreter?)"
        )
    return found


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _problem(found: Mapping[str, Any], driver: Mapping[str, Any]) -> tuple[str, str] | None:
    """Why the interpreter ``found`` describes cannot replay for ``driver``, and the fix
    (None: it can)."""
    executable = found.get("executable", "?")
    if _minor(str(found.get("python"))) != _minor(str(driver["python"])):
        return (
            f"is Python {found.get('python')}, the driver Python {driver['python']}",
            f"Spark's workers must run the driver's Python {_minor(str(driver['python']))}",
        )
    if found.get("missing"):
        missing = " ".join(found["missing"])
        return (
            f"lacks {', '.join(found['missing'])}, which the replay stage imports",
            f"install them with {executable} -m pip install {missing}, as make run does "
            f"for {COMPILED_VENV}",
        )
    if "error" in found:
        return str(
            found["error"]
        ), "install kpurgatory in it, e.g. the compiled build with make compiled-venv"
    if found.get("build") not in ("compiled", "pure"):
        return (
            f"runs a {found.get('build')} build of kpurgatory.optimized (a broken install)",
            "rebuild it with make compiled-venv",
        )
    if found.get("digest") != driver["digest"]:
        return (
            f"has kpurgatory {found.get('kpurgatory_version')} at {found.get('kpurgatory_path')}"
            f" built from other sources than the driver's ({driver['kpurgatory_path']})",
            "rebuild it from this checkout with make compiled-venv, as make run does when the "
            "sources change",
        )
    return None


def _worker_env(found: Mapping[str, Any]) -> dict[str, str]:
    """Workers of another interpreter import its own kpurgatory, not a checkout's."""
    return {
        "PYTHONSAFEPATH": "1",
        "PYTHONPATH": str(Path(str(found["kpurgatory_path"])).parent),
    }


def _as_executable(value: str, label: str, environ: Mapping[str, str]) -> str:
    """``value`` as an absolute interpreter path (a bare name is looked up on ``PATH``)."""
    if os.sep in value or (os.altsep is not None and os.altsep in value):
        path = Path(value).expanduser().absolute()
    else:
        which = shutil.which(value, path=environ.get("PATH", os.defpath))
        if which is None:
            raise ExecutorPythonError(f"{label} {value}: no such command on PATH")
        path = Path(which).absolute()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ExecutorPythonError(f"{label} {value}: no executable file at {path}")
    return str(path)


def _driver(driver: Mapping[str, Any], chosen_by: str, why: str) -> ExecutorPython:
    build = str(driver["build"])
    return ExecutorPython(
        executable=str(driver["executable"]),
        chosen_by=chosen_by,
        build=build,
        digest=str(driver["digest"]),
        message=f"executors replay with the {build} build: the driver's interpreter "
        f"{driver['executable']} ({why})",
    )


def _explicit(
    value: str, label: str, driver: Mapping[str, Any], environ: Mapping[str, str]
) -> ExecutorPython:
    """The interpreter the user named (``label``: the option or PYSPARK_PYTHON), or an
    ``ExecutorPythonError`` naming ``label``: never a fallback."""
    executable = _as_executable(value, label, environ)
    if executable == os.path.abspath(str(driver["executable"])):
        return _driver(driver, label, f"{label} {value}")
    try:
        found = probe(executable, environ=environ)
    except ExecutorPythonError as exc:
        raise ExecutorPythonError(
            f"{label} {value}: {exc}; pass an interpreter of this Python with kpurgatory, "
            f"or {OPTION} auto or {OPTION} driver"
        ) from None
    problem = _problem(found, driver)
    if problem is not None:
        raise ExecutorPythonError(
            f"{label} {value} {problem[0]}: {problem[1]}; or pass {OPTION} auto or {OPTION} driver"
        )
    build = str(found["build"])
    return ExecutorPython(
        executable=executable,
        chosen_by=label,
        build=build,
        digest=str(driver["digest"]),
        message=f"executors replay with the {build} build: {executable} ({label}; "
        f"kpurgatory from {found['kpurgatory_path']}, same sources as the driver)",
        worker_env=_worker_env(found),
        ship_package=False,
    )


def select(
    choice: str,
    master: str,
    *,
    environ: Mapping[str, str] | None = None,
    candidates: Sequence[Path] | None = None,
    driver: Mapping[str, Any] | None = None,
) -> ExecutorPython:
    """The interpreter the executors of ``master`` replay with, for ``choice`` (``auto``,
    ``driver`` or an interpreter path/command); see the module docstring.

    ``environ`` (default ``os.environ``) is read for ``PYSPARK_PYTHON``; ``candidates``
    are the compiled-build interpreters ``auto`` tries in order (default:
    ``compiled_candidates(project_root())``); ``driver`` is the driver's own description
    (default: ``builds.describe()`` of this process). ``ExecutorPythonError`` naming
    the option for an unusable explicit choice.
    """
    environ = os.environ if environ is None else environ
    if not choice:
        raise ExecutorPythonError(f"{OPTION} must be auto, driver or an interpreter path")
    me = dict(builds.describe()) if driver is None else dict(driver)
    if "error" in me:
        raise ExecutorPythonError(f"the driver {me['error']}")
    if not (is_local_master(master) or is_local_cluster_master(master)):
        return _cluster(choice, master, me, environ)
    if choice == "driver":
        return _driver(me, OPTION, f"{OPTION} driver")
    if choice != "auto":
        return _explicit(choice, OPTION, me, environ)
    if environ.get("PYSPARK_PYTHON"):
        return _explicit(environ["PYSPARK_PYTHON"], "PYSPARK_PYTHON", me, environ)
    if me["build"] == "compiled":
        return _driver(me, "auto", "auto: it runs the compiled build")
    if candidates is None:
        candidates = compiled_candidates(project_root())
    return _auto(candidates, me, environ)


def _cluster(
    choice: str, master: str, me: Mapping[str, Any], environ: Mapping[str, str]
) -> ExecutorPython:
    """A cluster master's executors: the cluster's Python, on the sources the driver
    ships (only ``auto`` is allowed there)."""
    if choice != "auto":
        raise ExecutorPythonError(
            f"{OPTION} {choice}: only for local[...] and local-cluster[...] masters "
            f"(executors on this machine); on master {master} the executors' Python comes "
            "with the cluster (PYSPARK_PYTHON, or a packed environment shipped with "
            "spark-submit --archives: docs/pipeline.md)"
        )
    python = environ.get("PYSPARK_PYTHON", "python3 (PYSPARK_PYTHON unset)")
    return ExecutorPython(
        executable=python,
        chosen_by="cluster",
        build="pure",
        digest=str(me["digest"]),
        message=f"executors replay with the pure build: master {master} runs the "
        f"cluster's Python ({python}) on kpurgatory's sources, shipped by the driver",
        set_interpreter=False,
    )


def _auto(
    candidates: Sequence[Path], me: Mapping[str, Any], environ: Mapping[str, str]
) -> ExecutorPython:
    """``auto`` with a pure driver: the first of ``candidates`` that runs the compiled
    build of the driver's sources, else the driver itself (saying why)."""
    reasons = []
    for candidate in candidates:
        if not candidate.is_file():
            continue
        try:
            found = probe(str(candidate), environ=environ)
        except ExecutorPythonError as exc:
            reasons.append(f"{candidate} {exc}")
            continue
        problem = _problem(found, me)
        if problem is None and found["build"] != "compiled":
            problem = ("runs the pure build", "make compiled-venv")
        if problem is not None:
            reasons.append(f"{candidate} {problem[0]} ({problem[1]})")
            continue
        return ExecutorPython(
            executable=str(candidate),
            chosen_by="auto",
            build="compiled",
            digest=str(me["digest"]),
            message=f"executors replay with the compiled build: {candidate} (auto: "
            f"kpurgatory.optimized compiled with mypyc, same sources as the driver)",
            worker_env=_worker_env(found),
            ship_package=False,
        )
    if not reasons:
        reasons.append(
            f"no compiled build at {candidates[0]}" if candidates else "no checkout to look in"
        )
    why = "; ".join(reasons)
    return _driver(
        me,
        "auto",
        f"auto: {why}; `make run` builds the compiled build, or pass {OPTION} PATH",
    )
