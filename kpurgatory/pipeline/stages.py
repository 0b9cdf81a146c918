"""The pipeline's stages: one Spark action each, timed, with a progress bar if asked.

``Stages`` runs each stage's action (which triggers Spark jobs) under a job group of its
own, and while it runs shows the group's completed and total tasks with ``rich`` (the
``[pipeline]`` extra); without a display it only times the action.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Stages"]

T = TypeVar("T")


class Stages:
    """Runs one Spark action per stage and shows its task progress (rich) if asked."""

    def __init__(self, spark: SparkSession, show: bool) -> None:
        self.spark = spark
        self.show = show
        self.seconds: dict[str, float] = {}
        self._progress: Any = None

    def __enter__(self) -> Stages:
        if self.show:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]{task.description:<10}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("tasks"),
                TimeElapsedColumn(),
            )
            self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def run(self, name: str, action: Callable[[], T]) -> T:
        """Run ``action`` (which triggers Spark jobs) as stage ``name``; returns its result."""
        started = time.perf_counter()
        if self._progress is None:
            direct = action()
            self.seconds[name] = time.perf_counter() - started
            return direct
        context = self.spark.sparkContext
        group = f"kpurgatory-{name}-{uuid.uuid4().hex[:8]}"
        box: dict[str, Any] = {}

        def target() -> None:
            context.setJobGroup(group, name)
            try:
                box["result"] = action()
            except BaseException as exc:  # handed to the caller's thread below
                box["error"] = exc

        task = self._progress.add_task(name, total=None)
        worker = threading.Thread(target=target, name=f"stage-{name}", daemon=True)
        worker.start()
        tracker = context.statusTracker()
        while worker.is_alive():
            worker.join(0.25)
            done = total = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job is not None else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
                        total += stage.numTasks
            if total:
                self._progress.update(task, completed=done, total=total)
        final = self._progress.tasks[task].total or 1
        self._progress.update(task, completed=final, total=final)
        self.seconds[name] = time.perf_counter() - started
        if "error" in box:
            raise box["error"]
        result: T = box["result"]
        return result
