"""A history checker for the purgatory on real threads (Wing-Gong style, with a model).

Record what 2-4 real threads did to one shared purgatory (``recorder``), search for an
interleaving of the specification's own atomic steps that explains every return value
and callback (``model``, ``search``), shrink a history none explains to a small program
(``shrink``) and print it (``format``). ``campaign`` runs many such histories and
counts what was explained, rejected and left undecided. The technique and its limits:
docs/testing-techniques.md; the figures: docs/verification.md.
"""

from kpurgatory.history.campaign import CampaignResult, run_campaign
from kpurgatory.history.format import format_history
from kpurgatory.history.program import Call, OpSpec, Program, random_program
from kpurgatory.history.recorder import Implementation, implementation, record
from kpurgatory.history.search import Verdict, check

__all__ = [
    "Call",
    "CampaignResult",
    "Implementation",
    "OpSpec",
    "Program",
    "Verdict",
    "check",
    "format_history",
    "implementation",
    "random_program",
    "record",
    "run_campaign",
]
