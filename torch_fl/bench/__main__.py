"""``python -m torch_fl.bench [options]``: the node check on the installed torch_fl (docs/bench.md)."""

import sys

from .run import main

sys.exit(main())
