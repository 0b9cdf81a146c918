"""The catalogue of hand-written rule vectors: one short run per rule or group of rules.

Each ``RuleRun`` names a vector, says what it shows, lists the rules it checks and writes
its steps (``timer``: the timing wheel's rules; ``purgatory``: the purgatory's;
``reentrancy``: calls back in from callbacks, R63-R69);
``kpurgatory.conformance.vectors.rule_vectors`` runs them on the reference and packages
the expectations.
"""

from kpurgatory.conformance.catalogue.purgatory import PURGATORY_RUNS
from kpurgatory.conformance.catalogue.reentrancy import REENTRANT_RUNS, TIMER_REENTRANT_RUNS
from kpurgatory.conformance.catalogue.run import RULE_GENERATOR_VERSION, RuleRun
from kpurgatory.conformance.catalogue.timer import TIMER_RUNS

__all__ = ["RULE_GENERATOR_VERSION", "RULE_RUNS", "RuleRun"]

RULE_RUNS: tuple[RuleRun, ...] = TIMER_RUNS + TIMER_REENTRANT_RUNS + PURGATORY_RUNS + REENTRANT_RUNS
"""Every hand-written vector, the timer's first."""
