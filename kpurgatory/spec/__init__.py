"""The specification of kpurgatory, as executable Python.

- ``rules``: the index of the numbered rules (R1, R2, ...): ids, sections and titles of
  docs/spec.md, where alone the rules are worded, and who owes each rule (every port, a
  port that offers a feature, or no port: Python only).
- ``protocols``: the interfaces every implementation provides (``Clock``, ``Timer``, ...).
- ``arithmetic``: the time arithmetic the rules are stated in, with PEP 316 contracts.
- ``events``: the event model that machines, replays and conformance vectors record.
- ``known_differences``: upstream Kafka's documented differences from the rules, as data
  (the "Kafka:" notes of docs/spec.md; ``kpurgatory conformance --allow``).

Nothing here implements a timer or a purgatory, and nothing here imports one.
"""

from kpurgatory.spec.rules import RULES, SPEC_VERSION, Rule, rule

__all__ = ["RULES", "SPEC_VERSION", "Rule", "rule"]
