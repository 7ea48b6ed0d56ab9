"""The model zoo (harness/zoo.py) in its emulation dry run, with the profile diff of one model (harness/profdiff.py):
three processes (flagos, the host, the host again) train every zoo architecture tiny, eager, one of them compiled
(traced), decode greedily with the decoders, and profile the Llama's step. The test holds the reports to their
structure and flagos to plain CPU's numbers: its training losses within the dtype's tolerance, its tokens identical.
What the dry run says about speed is printed, never judged here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from harness import zoo_models

DECODERS = [n for n, a in zoo_models.ARCHS.items() if a.decoder]


@pytest.fixture(scope="module")
def zoo_run(emulation_cli, tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("zoo")
    args = ["--modes", "train-eager,decode-eager", "--also", "llama-gqa:train-compiled"]
    args += ["--profdiff", "llama-gqa", "--profile-steps", "2", "--out", str(out)]
    proc = emulation_cli("harness.zoo")(*args, check=False)
    return proc, out


def test_the_zoo_passes_and_every_pair_is_reported(zoo_run):
    proc, out = zoo_run
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-4000:]}"
    assert "zoo check: PASS" in proc.stdout
    result = json.loads((out / "zoo.json").read_text())
    assert result["complete"] and result["settings"]["size"] == "tiny"
    assert result["settings"]["arms"] == ["flagos", "cpu", "cpu-again"]
    assert sorted(result["models"]) == sorted(zoo_models.ARCHS)
    expected = {(m, "train-eager") for m in zoo_models.ARCHS} | {(m, "decode-eager") for m in DECODERS}
    expected.add(("llama-gqa", "train-compiled"))
    ran = {(m, mode) for m, model in result["models"].items() for mode in model["modes"]}
    assert ran == expected
    for model in result["models"].values():
        for entry in model["modes"].values():
            assert entry["status"] == "ok", entry
            assert set(entry["ms"]) == {"flagos", "cpu", "cpu-again"} and all(v > 0 for v in entry["ms"].values())
            assert entry["ratio"] > 0 and entry["aa"] > 0 and entry["rounds"] == result["settings"]["rounds"]
            q1, q3 = entry["aa_quartiles"]
            assert q1 <= entry["aa"] <= q3 and entry["turn"] == result["settings"]["turn"] == 1  # tiny: no sizing
            assert entry["judged"] == (0.98 <= entry["aa"] <= 1.02 and q3 - q1 <= 0.04), entry
    table = (out / "zoo.md").read_text()
    unjudged = sum(not e["judged"] for m in result["models"].values() for e in m["modes"].values())
    assert table.count("not judged: A/A too wide (raw") == unjudged  # the table's cells, not the log's lines
    assert table.count("| train-eager |") == len(zoo_models.ARCHS)
    assert (out / "zoo.png").read_bytes()[:4] == b"\x89PNG"


def test_flagos_trains_and_decodes_as_plain_cpu_does(zoo_run):
    _, out = zoo_run
    result = json.loads((out / "zoo.json").read_text())
    for name, model in result["models"].items():
        tolerance = {"bfloat16": 2e-2, "float16": 1e-2}[model["dtype"]]
        for mode, entry in model["modes"].items():
            check = entry["check"]
            if mode.startswith("train"):
                losses = check["values"]
                assert len(losses["flagos"]) == len(losses["cpu"]) == 3
                for f, p, again in zip(losses["flagos"], losses["cpu"], losses["cpu-again"], strict=True):
                    assert abs(f - p) <= tolerance * abs(p), (name, mode, losses)
                    assert again == p, (name, mode, "the host is deterministic", losses)
            else:
                assert check == {"what": "tokens", "ok": True, "detail": "tokens identical", "first_difference": None}


def test_the_profile_diff_compares_the_llamas_ops(zoo_run):
    _, out = zoo_run
    report = json.loads((out / "profdiff.json").read_text())
    (item,) = report["profdiff"]
    assert item["model"] == "llama-gqa" and item["steps"] == 2
    d = item["diff"]
    # beside the emulation: host activity only, so no kernels on either side, and the ops sorted by calls
    assert not d["device_time"] and d["sorted_by"] == "calls"
    assert d["totals"]["kernels"] == [0, 0, 0] and d["only_flagos"] == d["only_plain"] == []
    ops = {r["op"]: r for r in d["ops"]}
    assert ops["aten::mm"]["calls"][0] == ops["aten::mm"]["calls"][1] > 0  # the same matmuls on both sides
    assert d["totals"]["calls"][0] > 0 and d["totals"]["host_us"][1] > 0
    calls = [abs(r["calls"][2]) for r in d["ops"]]
    assert calls == sorted(calls, reverse=True)
    assert item["control"]["totals"]["calls"][2] == 0  # the host again runs the very same ops
    text = (out / "profdiff.md").read_text()
    assert "## llama-gqa" in text and "No device time on either side" in text
