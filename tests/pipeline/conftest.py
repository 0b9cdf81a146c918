"""A session-scoped local SparkSession for the pipeline tests (tiny grids only).

Built by ``kpurgatory.pipeline.spark.build_session`` itself (local[2], UI off, quiet
log4j2, SPARK_LOCAL_IP=127.0.0.1, PYSPARK_PYTHON = this interpreter), so the tests run
the job's own configuration. The repository root is put on the workers' PYTHONPATH so
they can import the mutant module ``tests.pipeline.mutants``. The Spark tests are
skipped only if pyspark is not installed; a missing Java fails them (the pipeline needs
it, and the message says how to install it).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[2] SparkSession shared by every Spark test of the run."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from kpurgatory.pipeline.spark import build_session

    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    session = build_session("local[2]", "kpurgatory-tests", shuffle_partitions=2)
    yield session
    session.stop()


PIPELINE_EXTRA_MISSING = [
    name for name in ("pyspark", "pyarrow", "pandas") if importlib.util.find_spec(name) is None
]
"""The pipeline extra's packages this interpreter lacks (the free-threaded venv has none)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Without the pipeline extra, every test of this directory skips, saying what is
    missing (they drive the pipeline's executors, ports and Spark)."""
    if not PIPELINE_EXTRA_MISSING:
        return
    here = Path(__file__).resolve().parent
    skip = pytest.mark.skip(
        reason=f"the pipeline extra is not installed ({', '.join(PIPELINE_EXTRA_MISSING)})"
    )
    for item in items:
        if here in Path(str(item.path)).resolve().parents:
            item.add_marker(skip)
