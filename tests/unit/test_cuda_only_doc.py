"""torch_fl/_cuda_only.py and docs/device.md give the same list of torch.cuda names torch.flagos leaves out, each
with its reason (tests/correctness/test_device_api.py holds torch.flagos to the list)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cuda_only() -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("torch_fl_cuda_only", ROOT / "torch_fl" / "_cuda_only.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CUDA_ONLY


def documented() -> dict[str, str]:
    text = (ROOT / "docs" / "device.md").read_text()
    section = text.split("## torch.cuda's device API on flagos", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| (.+) \|$", section, re.M))


def test_the_doc_lists_every_cuda_only_name_with_its_reason() -> None:
    assert documented() == cuda_only()


def test_every_reason_says_something() -> None:
    assert all(len(reason.split()) >= 5 for reason in cuda_only().values())
