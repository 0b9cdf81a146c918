"""The step language, under the conformance kit's name: a re-export of ``kpurgatory.steps``.

The language lives in ``kpurgatory.steps`` so that the workload generator can use it
without importing the kit (the kit imports the generator to build vectors, never the
other way round). Every name here is the same object as there.
"""

from kpurgatory.steps import (
    NESTED_STEPS,
    TIMER_STEP_KINDS,
    Add,
    Advance,
    Cancel,
    CancelForKey,
    CheckAndComplete,
    ClockAdvance,
    ForceComplete,
    Init,
    Key,
    NextDueTime,
    PurgatoryAdvance,
    SetReady,
    Shutdown,
    Step,
    Watch,
    step_from_json,
    step_to_json,
    steps_from_json,
    steps_to_json,
)

__all__ = [
    "NESTED_STEPS",
    "TIMER_STEP_KINDS",
    "Add",
    "Advance",
    "Cancel",
    "CancelForKey",
    "CheckAndComplete",
    "ClockAdvance",
    "ForceComplete",
    "Init",
    "Key",
    "NextDueTime",
    "PurgatoryAdvance",
    "SetReady",
    "Shutdown",
    "Step",
    "Watch",
    "step_from_json",
    "step_to_json",
    "steps_from_json",
    "steps_to_json",
]
