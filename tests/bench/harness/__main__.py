"""``python -m harness [options]`` from tests/bench: the benchmark harness on the installed torch_fl."""

import sys

from .cli import main

sys.exit(main())
