"""``python -m harness [options]`` from build_tools/bench: the benchmark harness on the installed torch_fl."""

import sys

from .cli import main

sys.exit(main())
