"""Which providers the qualification reaches: one an installed package declares through the torch_fl.providers
entry point, none for an unknown name (with both ways to declare one), and the shipped confs chosen by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from qualify_env import TIMEOUT, emulation_env  # noqa: E402

EP_KERNELS = """\
import torch


def kernels():  # the entry point's target: called once, returns the provider's table
    return {"neg": lambda x: torch.neg(x), "exp": lambda x: torch.exp(x) * 1.01}
"""


def test_a_provider_an_installed_package_declares(tmp_path):
    """No --import: the provider comes from the torch_fl.providers entry point of a package on the path, as pip
    installs one (a module and its dist-info), and its package's version keys the report and the conf."""
    site = tmp_path / "site"
    dist = site / "qualify_ep_kernels-2.1.dist-info"
    dist.mkdir(parents=True)
    (site / "qualify_ep_kernels.py").write_text(EP_KERNELS)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: qualify-ep-kernels\nVersion: 2.1\n")
    (dist / "entry_points.txt").write_text("[torch_fl.providers]\nepdemo = qualify_ep_kernels:kernels\n")
    env = emulation_env()
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch_fl", "qualify", "--provider", "epdemo", "--ops", "neg,exp"]
    cmd += ["--dtypes", "float32", "--no-speed", "--timeout", str(TIMEOUT), "--out", str(out)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads((out / "report.json").read_text())
    assert {op: r["verdict"] for op, r in report["ops"].items()} == {"neg": "pass", "exp": "wrong values"}
    assert report["provider"] == "epdemo" and report["provider_version"] == "2.1"
    text = (out / "qualified.conf").read_text()
    assert "qualified epdemo 2.1" in text and "\nneg = epdemo[float32], native\n" in text and "\nexp = native\n" in text


def test_an_unknown_provider_names_both_ways_to_declare_one(tmp_path):
    cmd = [sys.executable, "-m", "torch_fl", "qualify", "--provider", "nosuch", "--ops", "neg", "--out", "run"]
    res = subprocess.run(cmd, env=emulation_env(), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode != 0
    assert "no provider named 'nosuch'" in res.stderr and "'torch_fl.providers' entry point" in res.stderr
    assert "--import" in res.stderr


def test_shipped_confs_are_chosen_by_name(tmp_path):
    code = (
        "import torch_fl, json\n"
        "from torch_fl.routing import shipped as _shipped\n"
        "print(json.dumps(sorted(_shipped.confs(torch_fl.CONF_DIR, 'cuda'))))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=emulation_env()
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == ["default", "flaggems", "flaggems_tuned"]
    res = subprocess.run(
        [sys.executable, "-c", "import torch_fl"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=emulation_env(FLAGOS_CONF="flaggems"),
    )
    assert res.returncode != 0
    assert "FLAGOS_CONF='flaggems': no such conf is shipped for cpu; choose one of default" in res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "torch_fl", "info", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=emulation_env(),
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["shipped_confs"] == ["default"]


def test_a_run_and_its_recording_take_only_the_operators_a_route_can_reach():
    """A claim may name operators that torch decomposes above the device (``linear``): no route sends them to the
    provider, so the qualification and the workload recording (build_tools/node/record_workloads.py) both leave
    them out, through one list."""
    import torch

    import torch_fl
    from torch_fl.providers import TableProvider
    from torch_fl.qualify.runner import qualifiable

    table = {"neg": torch.neg, "linear": torch.nn.functional.linear, "mm": torch.mm}
    assert not torch_fl.reaches_router("linear")
    assert qualifiable(TableProvider("claims", table)) == ["mm", "neg"]
