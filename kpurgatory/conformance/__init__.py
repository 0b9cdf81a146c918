"""Conformance: a language-neutral way to drive any implementation and compare what it does.

- ``steps``: the step language, a run as a list of JSON-serializable calls (``init``,
  ``add``, ``advance``, ``watch``, ``check_and_complete``, ...).
- ``driver``: the interpreter that executes steps on an implementation package and
  returns an ``Observation`` after each (``observation``: return value, events,
  observable state; ``recording``: the tasks and operations it submits; ``sequence``:
  which step lists are valid runs).
- ``compare``: ``compare_observations``, the one definition of "these two runs agree".
- ``vectors``: conformance vectors (steps plus the reference's expected observations,
  with provenance), their export, loading, validation and replay; ``catalogue``: the
  hand-written rule vectors.
- ``adapter``: replaying vectors through a port's adapter (``adapter_process``: the
  subprocess client; ``vector_report``: the report).
- ``stateful``: the Hypothesis search against a port (``machine``, ``search_machines``:
  the state machine; ``side_by_side``: one sequence on the reference and the port).
- ``differences`` and ``kafka_model``: ``--allow``, comparing a port with the reference
  that behaves like upstream Kafka in each allowed respect.
- ``capabilities``: what a port declares it lacks (steps, features, inline running).

docs/vectors.md documents the format for porters; conformance/schema/ holds its JSON Schema.
"""

from kpurgatory.conformance.driver import (
    Driver,
    Observation,
    compare_observations,
    first_divergence,
    run_steps,
)
from kpurgatory.conformance.steps import Step, step_from_json, step_to_json

__all__ = [
    "Driver",
    "Observation",
    "Step",
    "compare_observations",
    "first_divergence",
    "run_steps",
    "step_from_json",
    "step_to_json",
]
