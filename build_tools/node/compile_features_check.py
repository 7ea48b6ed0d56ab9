"""Which Inductor features a compiled flagos graph gets, against the same graph compiled for plain cuda.

torch gates several Inductor features on the device name ``cuda``; torch_fl opens them to flagos on a GPU vendor
(torch_fl/compile/_torch_compat/features.py). Here one workload is compiled in each arm's own process (a plain
arm never imports torch_fl) under mode="max-autotune-no-cudagraphs" with Triton as the only matmul backend, PDL and
the persistent TMA matmul on, and the generated code is counted:

  mixed-order reductions   torch._inductor.metrics.codegen_mix_order_reduction (RMSNorm's backward: the weight's
                           gradient sums over rows, the input's over columns, of the same tensors)
  mm templates             Triton template kernels (``triton_tem_``) in the code
  padded mm inputs         kernels that pad a matmul operand (``constant_pad_nd``): the sizes are 4095 wide
  online softmax           the one-pass max and sum of the loss's log_softmax (``online_softmax_`` helpers)
  TMA                      tensor descriptors in the code
  PDL                      programmatic dependent launch calls (``gdc_``) in the code

  python compile_features_check.py all        both arms, then the counts side by side and a verdict:
  compile features check: PASS      flagos has each feature the cuda graph has
  compile features check: FAIL (...)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROWS, WIDTH, OUT = 16384, 4095, 4096  # rows >= 2 x width: the shape mixed-order reduction fusion asks for
COUNTS = {
    "mm templates": "triton_tem_",
    "padded mm inputs": "constant_pad_nd",
    "online softmax": "online_softmax_",
    "TMA": "tensor_descriptor",
    "PDL": "gdc_",
}
SETTINGS = {
    "max_autotune_gemm_backends": "TRITON",
    "triton.enable_pdl": True,
    "triton.enable_persistent_tma_matmul": True,
}
RESULT = "@@features "
CHILD_TIMEOUT_S = 420


def run(arm: str) -> None:
    import torch

    device = "cuda"
    features: list[str] = []
    missing: dict[str, str] = {}
    if arm == "flagos":
        import torch_fl
        from torch_fl.compile import _torch_compat

        torch_fl.compile.register()
        device, features, missing = "flagos", _torch_compat.enabled_features(), _torch_compat.feature_problems()
    from torch._inductor import config, metrics
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    x = torch.randn(ROWS, WIDTH).to(device, torch.bfloat16).requires_grad_()
    g = torch.randn(WIDTH).to(device, torch.bfloat16).requires_grad_()
    w = torch.randn(WIDTH, OUT).to(device, torch.bfloat16).requires_grad_()

    def step(x: torch.Tensor, g: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * g
        loss = -torch.log_softmax((h @ w).float(), -1)[:, 0].mean()
        loss.backward()
        return loss

    metrics.reset()
    with config.patch(SETTINGS):
        loss, codes = run_and_get_code(torch.compile(step, mode="max-autotune-no-cudagraphs"), x, g, w)
    code = "\n".join(codes)
    counts = {"mixed-order reductions": getattr(metrics, "codegen_mix_order_reduction", None)}  # None: no such metric
    counts.update({name: code.count(word) for name, word in COUNTS.items()})
    print(
        RESULT
        + json.dumps(
            {
                "arm": arm,
                "torch": torch.__version__,
                "loss": float(loss.detach()),
                "counts": counts,
                "features": features,
                "missing": missing,
            }
        ),
        flush=True,
    )


def _child(arm: str) -> subprocess.Popen:
    env = dict(os.environ)
    if arm != "flagos":
        env.pop("FLAGOS_AUTOLOAD", None)  # the plain arm never loads torch_fl
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "run", "--arm", arm],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def check() -> int:
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/torch-fl-features-check-inductor")
    print(
        f"compile features check: RMSNorm + matmul + log_softmax, {ROWS}x{WIDTH} @ {WIDTH}x{OUT} bf16, forward "
        "and backward, max-autotune (Triton matmuls only), PDL and persistent TMA matmul on; flagos against "
        "plain cuda"
    )
    children = {arm: _child(arm) for arm in ("flagos", "cuda")}  # both at once: the node's time is short
    found: dict[str, dict] = {}
    for arm, proc in children.items():
        out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
        lines = [line for line in out.splitlines() if line.startswith(RESULT)]
        if proc.returncode or not lines:
            print(f"  {arm} failed (exit {proc.returncode}):\n{err[-3000:]}")
            print("compile features check: FAIL (an arm failed)")
            return 1
        found[arm] = json.loads(lines[-1][len(RESULT) :])
    print(f"  torch {found['cuda']['torch']}; flagos hooks enabled: {', '.join(found['flagos']['features']) or 'none'}")
    for key, why in found["flagos"]["missing"].items():
        print(f"  not hooked on this torch line: {key}: {why}")
    print(f"  {'':24s} {'flagos':>8s} {'cuda':>8s}")
    missing = []
    for name in found["cuda"]["counts"]:
        ours, theirs = found["flagos"]["counts"][name], found["cuda"]["counts"][name]
        print(f"  {name:24s} {ours if ours is not None else 'n/a':>8} {theirs if theirs is not None else 'n/a':>8}")
        if theirs and not ours:
            missing.append(name)
    print(f"  loss: flagos {found['flagos']['loss']:.6g}, cuda {found['cuda']['loss']:.6g}")
    verdict = "PASS" if not missing else f"FAIL (flagos lacks {', '.join(missing)})"
    print(f"compile features check: {verdict}")
    return int(bool(missing))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run").add_argument("--arm", required=True, choices=["flagos", "cuda"])
    sub.add_parser("all")
    args = p.parse_args()
    if args.cmd == "run":
        run(args.arm)
        return 0
    return check()


if __name__ == "__main__":
    sys.exit(main())
