"""The step language, under the conformance kit's name: a re-export of ``kpurgatory.steps``.

The language lives in ``kpurgatory.steps`` so that the workload generator can use it
without importing the kit (the kit imports the generator to build vectors, never the
other way round). Every name here is the same object as there.
"""

from kpurgatory.steps import *  # noqa: F403  (the whole language, as it is there)
from kpurgatory.steps import __all__ as __all__
