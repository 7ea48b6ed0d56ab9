"""The folders a node program imports from besides the installed torch_fl: the bench harness of this tooling tree
and the helpers of the suites under tests/.

A node program runs by its path with a working directory outside any checkout, so that ``import torch_fl`` is the
installed wheel; the repository root therefore never goes on ``sys.path``, only these folders, which hold no
torch_fl. The layout is the same in a checkout, on a GPU node and in a test image (build_tools/ beside tests/).
"""

from __future__ import annotations

import sys
from pathlib import Path

TREE = Path(__file__).resolve().parents[2]  # the checkout, or the image's copy of tests/ and the tools
FOLDERS = {
    "harness": TREE / "build_tools" / "bench",  # `import harness`
    "models": TREE / "tests" / "models",  # model_zoo, vision_import
    "distributed": TREE / "tests" / "distributed",  # the sharded suite's parts and checks
}


def reach(*names: str) -> None:
    """Put the folders ``names`` (keys of FOLDERS) first on ``sys.path``, once each."""
    for name in names:
        folder = str(FOLDERS[name])
        if folder not in sys.path:
            sys.path.insert(0, folder)
