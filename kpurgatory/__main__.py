"""``python -m kpurgatory``: the command line."""

import sys

from kpurgatory.cli import main

sys.exit(main())
