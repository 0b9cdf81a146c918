"""Tests of the data pipeline: workloads, replay, cost models, the Spark job, the CLI."""
