"""The Python port with one catalogued bug planted, as a conformance adapter.

``python tests/conformance/ports/adapter.py --bug NAME`` applies the port bug ``NAME``
(``tests/conformance/ports/catalog.py``, a sequential or a concurrent one; ``--bug none``
for the port as it is) to
``kpurgatory.optimized`` and serves it with ``python_adapter.serve`` on stdin/stdout:
the adapter protocol of docs/conformance.md, exactly what a port in another language runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script: make ``tests`` importable
    sys.path.insert(0, str(ROOT))

from kpurgatory import optimized  # noqa: E402
from kpurgatory.conformance.python_adapter import serve  # noqa: E402
from tests.conformance.ports.catalog import (  # noqa: E402
    CONCURRENT_PORT_BUGS,
    PORT_BUGS,
    planted,
    port_bug,
)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--bug NAME`` (or ``none``); serves stdin to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--bug",
        required=True,
        choices=["none", *(b.name for b in (*PORT_BUGS, *CONCURRENT_PORT_BUGS))],
    )
    args = parser.parse_args(argv)
    if args.bug == "none":
        serve(optimized, sys.stdin, sys.stdout)
        return 0
    with planted(port_bug(args.bug)):
        serve(optimized, sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
