"""``python -m kpurgatory.pipeline ...`` = ``kpurgatory pipeline ...``; also spark-submit's script.

``spark-submit --master spark://HOST:7077 kpurgatory/pipeline/__main__.py run --grid default``
runs the job with the master spark-submit chose (docs/pipeline.md).
"""

from __future__ import annotations

import sys

from kpurgatory.cli import main

if __name__ == "__main__":
    sys.exit(main(["pipeline", *sys.argv[1:]]))
