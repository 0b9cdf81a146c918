"""A Spark standalone cluster on this machine, from what the pyspark package ships.

``standalone_cluster(workers=2)`` starts one master and ``workers`` workers, each a JVM
launched with pyspark's ``bin/spark-class`` (``org.apache.spark.deploy.master.Master``,
``org.apache.spark.deploy.worker.Worker``; the pip package has no ``sbin/start-*``
scripts), all bound to 127.0.0.1 (``--host`` and ``SPARK_LOCAL_IP``, which the web UIs
bind to as well; their ports are random), waits until every worker has registered,
yields the master URL ``spark://127.0.0.1:PORT``, and stops every process it started,
and every process those started (executors and their Python workers), on exit. Logs go
to ``log_dir``. The slow tests run the pipeline against it (docs/pipeline.md shows the
same commands for a cluster of one's own).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Cluster",
    "ClusterError",
    "descendants",
    "spark_class",
    "standalone_cluster",
    "still_running",
]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
REGISTERED = "Successfully registered with master"


class ClusterError(RuntimeError):
    """The cluster did not come up (the message quotes the end of the log that says why)."""


@dataclass
class Cluster:
    """A running cluster: its master URL, log folder and the processes started."""

    master_url: str
    log_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def pids(self) -> set[int]:
        """The processes started and all their descendants, now."""
        started = {process.pid for process in self.processes if process.poll() is None}
        return started | {pid for root in started for pid in descendants(root)}

    def snapshot(self) -> dict[int, str]:
        """``pids()`` with each one's command line (to tell a reused pid from the process)."""
        return {pid: command for pid in self.pids() if (command := _command(pid))}


def still_running(snapshot: dict[int, str]) -> list[int]:
    """The pids of ``snapshot`` still running the same command (zombies do not count)."""
    return sorted(pid for pid, command in snapshot.items() if _command(pid) == command)


def spark_class() -> Path:
    """pyspark's ``bin/spark-class``; ``ClusterError`` if pyspark is not installed."""
    try:
        import pyspark
    except ImportError:
        raise ClusterError("pyspark is not installed: pip install -e '.[pipeline]'") from None
    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.exists():
        raise ClusterError(f"{path} is missing from the pyspark package")
    return path


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from ``ps -A -o pid=,ppid=``)."""
    listing = subprocess.run(
        ["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True, check=True
    ).stdout
    children: dict[int, list[int]] = {}
    for line in listing.splitlines():
        child, parent = (int(value) for value in line.split())
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextlib.contextmanager
def standalone_cluster(
    workers: int = 2,
    *,
    cores: int = 1,
    memory: str = "1g",
    log_dir: Path | None = None,
    timeout_s: float = 120.0,
) -> Iterator[Cluster]:
    """Start a master and ``workers`` workers on 127.0.0.1; yield; stop them all.

    ``ClusterError`` (with the log's end) if the master does not listen or a worker does
    not register within ``timeout_s``.
    """
    if workers < 1 or cores < 1:
        raise ValueError(f"workers and cores must be >= 1, got {workers} and {cores}")
    command = spark_class()
    folder = log_dir or Path(tempfile.mkdtemp(prefix="kpurgatory-standalone-"))
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    cluster = Cluster(f"spark://127.0.0.1:{port}", folder)
    launcher = _Launcher(cluster, command)
    deadline = time.monotonic() + timeout_s
    try:
        master_log = launcher.launch(
            "master", MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port),
            "--webui-port", "0",
        )  # fmt: skip
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            if time.monotonic() > deadline or cluster.processes[0].poll() is not None:
                raise ClusterError(f"the master did not listen on {port}:\n{_tail(master_log)}")
            time.sleep(0.5)
        logs = [
            launcher.launch(
                f"worker-{number}",
                WORKER_CLASS,
                "--host",
                "127.0.0.1",
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--webui-port",
                "0",
                "--work-dir",
                str(folder / f"work-{number}"),
                cluster.master_url,
            )
            for number in range(1, workers + 1)
        ]
        for log in logs:
            while REGISTERED not in log.read_text(errors="replace"):
                if time.monotonic() > deadline:
                    raise ClusterError(f"a worker did not register:\n{_tail(log)}")
                time.sleep(0.5)
        yield cluster
    finally:
        _stop(cluster)


class _Launcher:
    """Starts the cluster's processes with Spark's ``spark-class``, each in its own
    process group, logging to ``<name>.log`` in the cluster's log folder."""

    def __init__(self, cluster: Cluster, command: Path) -> None:
        self.cluster = cluster
        self.command = str(command)
        self.env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
        self.env.pop("SPARK_HOME", None)  # spark-class finds the package's own

    def launch(self, name: str, *argv: str) -> Path:
        """Start ``spark-class argv...``; return its log file."""
        folder = self.cluster.log_dir
        log = folder / f"{name}.log"
        with log.open("wb") as handle:
            self.cluster.processes.append(
                subprocess.Popen(
                    [self.command, *argv],
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self.env,
                    cwd=folder,
                    start_new_session=True,  # its own group: stopped with its children
                )
            )
        return log


def _stop(cluster: Cluster, grace_s: float = 20.0) -> None:
    """SIGTERM each process group started (workers first), then SIGKILL what is left,
    including descendants that left the group."""
    left = cluster.snapshot()
    for process in reversed(cluster.processes):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for process in cluster.processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
    for process in cluster.processes:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
    for pid in still_running(left):  # only if it is still the same process
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _command(pid: int) -> str:
    """The command line of ``pid`` ("" if it is gone or a zombie)."""
    done = subprocess.run(
        ["ps", "-p", str(pid), "-o", "stat=,args="], capture_output=True, text=True, check=False
    )
    state, _, command = done.stdout.strip().partition(" ")
    return "" if not state or state.startswith("Z") else command.strip()
