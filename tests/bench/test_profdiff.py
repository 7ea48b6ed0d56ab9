"""The profile diff's comparison (harness/opdiff.py) on made-up profiles: what it sorts first, which kernels it
names as one side's own, and its totals. The profiling itself runs in test_zoo_case.py."""

from __future__ import annotations

from harness import opdiff


def _profile(ops: dict[str, list[float]], kernels: dict[str, float], device: bool = True, **us: float) -> dict:
    return {
        "steps": 2,
        "device": device,
        "ops": ops,
        "kernels": {
            k: {"launches": n, "device_us": us.get(k, 3.0 * n), "ops": {"aten::mul": n}} for k, n in kernels.items()
        },
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


def test_a_kernel_both_launch_alike_but_slower_on_flagos_is_named():
    # the same copies, as many, one of them 40 µs slower on flagos: no count differs, the time does
    plain = _profile({"aten::copy_": [5, 20.0, 60.0, 5]}, {"copy_kernel": 4, "memcpy": 1}, copy_kernel=50.0)
    flagos = _profile({"aten::copy_": [5, 20.0, 100.0, 5]}, {"copy_kernel": 4, "memcpy": 1}, copy_kernel=90.0)
    d = opdiff.diff(flagos, plain)
    assert d["launch_counts_differ"] == [] and d["only_flagos"] == d["only_plain"] == []
    assert [(k["kernel"], k["device_us"]) for k in d["kernel_time_differs"]][0] == ("copy_kernel", [50.0, 90.0])


def test_kernels_that_differ_past_the_cut_stay_apart():
    from harness.profile_ops import KERNEL_NAME_CHARS, kernel_key

    head = "void at::native::vectorized_elementwise_kernel<4, " + "x" * KERNEL_NAME_CHARS
    to_float, to_half = kernel_key(head + "{lambda(float)#1}"), kernel_key(head + "{lambda(c10::Half)#1}")
    assert to_float != to_half and to_float.startswith(head[:KERNEL_NAME_CHARS])
    assert kernel_key("mul_kernel") == "mul_kernel"


def test_runtime_calls_are_not_scopes():
    # a runtime call the profiler links a kernel to (beside the op that launched it) must not count that kernel again
    from harness.profile_ops import RUNTIME_CALL

    assert all(RUNTIME_CALL.match(n) for n in ("cudaStreamIsCapturing", "cudaMalloc", "cuLaunchKernel", "hipMemcpy"))
    assert not any(RUNTIME_CALL.match(n) for n in ("aten::mul", "cudnn_convolution", "custom_scope", "cuda_graph"))


def test_the_markdown_lists_kernel_time_gaps_beside_the_controls_largest():
    from harness import zoo_report

    plain = _profile({"aten::copy_": [5, 20.0, 60.0, 5]}, {"copy_kernel": 4}, copy_kernel=50.0)
    slower = _profile({"aten::copy_": [5, 20.0, 100.0, 5]}, {"copy_kernel": 4}, copy_kernel=90.0)
    again = _profile({"aten::copy_": [5, 20.0, 61.0, 5]}, {"copy_kernel": 4}, copy_kernel=51.0)
    item = opdiff.entry("m", {"flagos": slower, "cuda": plain, "cuda-again": again}, "cuda")
    result = {"environment": {"flagos_runtime": "cuda"}, "settings": {"arms": ["flagos", "cuda"]}, "profdiff": [item]}
    text = zoo_report.profdiff_markdown(result)
    assert "Kernels both launch, by the gap in device µs per step (largest +40.0; the A/A's largest is +1.0 µs)" in text
    assert "| `copy_kernel` | 50.0 / 90.0 | aten::mul 4 |" in text
