"""The profile diff's comparison (harness/opdiff.py) on made-up profiles: what it sorts first, which kernels it
names as one side's own, and its totals. The profiling itself runs in test_zoo_case.py."""

from __future__ import annotations

from harness import opdiff


def _profile(ops: dict[str, list[float]], kernels: dict[str, float], device: bool = True) -> dict:
    return {
        "steps": 2,
        "device": device,
        "ops": ops,
        "kernels": {k: {"launches": n, "ops": {"aten::mul": n}} for k, n in kernels.items()},
    }


def test_the_diff_sorts_by_device_gap_and_names_each_sides_kernels():
    # flagos runs 2 more muls per step (2 more kernels, 6 µs more device time) and a copy plain does not; plain
    # launches a fused kernel flagos does not; add costs the same on both sides
    plain = _profile(
        {"aten::mul": [10, 50.0, 30.0, 10], "aten::add": [4, 20.0, 8.0, 4], "aten::fused": [1, 5.0, 9.0, 1]},
        {"mul_kernel": 10, "add_kernel": 4, "fused_kernel": 1},
    )
    flagos = _profile(
        {"aten::mul": [12, 61.0, 36.0, 12], "aten::add": [4, 21.0, 8.0, 4], "aten::_copy_from": [3, 9.0, 1.0, 1]},
        {"mul_kernel": 12, "add_kernel": 4, "copy_kernel": 1},
    )
    d = opdiff.diff(flagos, plain)
    assert d["device_time"] and d["sorted_by"] == "device_us"
    assert [r["op"] for r in d["ops"]] == ["aten::fused", "aten::mul", "aten::_copy_from", "aten::add"]
    assert d["ops"][1]["kernels"] == [10, 12, 2] and d["ops"][1]["device_us"] == [30.0, 36.0, 6.0]
    assert [k["kernel"] for k in d["only_flagos"]] == ["copy_kernel"]
    assert [k["kernel"] for k in d["only_plain"]] == ["fused_kernel"]
    assert d["launch_counts_differ"] == [{"kernel": "mul_kernel", "launches": [10, 12], "ops": {"aten::mul": 12}}]
    assert d["totals"]["calls"] == [15, 19, 4]
    assert d["totals"]["device_us"] == [47.0, 45.0, -2.0]


def test_without_device_time_the_extra_calls_come_first():
    # beside the emulation no side records a device: an op flagos calls more often leads, whatever the host µs
    plain = _profile({"aten::mm": [4, 900.0, 0, 0], "aten::mul": [10, 40.0, 0, 0]}, {}, device=False)
    flagos = _profile({"aten::mm": [4, 300.0, 0, 0], "aten::mul": [13, 50.0, 0, 0]}, {}, device=False)
    d = opdiff.diff(flagos, plain)
    assert not d["device_time"] and d["sorted_by"] == "calls"
    assert [r["op"] for r in d["ops"]] == ["aten::mul", "aten::mm"]
    assert d["only_flagos"] == d["only_plain"] == d["launch_counts_differ"] == []


def test_an_entry_carries_the_control_and_the_summary_names_both():
    same = _profile({"aten::mul": [10, 50.0, 30.0, 10]}, {"mul_kernel": 10})
    more = _profile({"aten::mul": [11, 55.0, 33.0, 11]}, {"mul_kernel": 11, "extra": 1})
    item = opdiff.entry("m", {"flagos": more, "cuda": same, "cuda-again": same}, "cuda")
    assert item["control"]["only_flagos"] == [] and item["control"]["totals"]["calls"][2] == 0
    line = opdiff.summary_line(item, "cuda")
    assert "kernels only on flagos 1" in line and "launch counts differing 1" in line
    assert "A/A: 0 kernels of one side only, 0 counts differing" in line
