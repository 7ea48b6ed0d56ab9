"""A compiled decoder LLM's training step on flagos against the same step on the plain vendor device.

The model: a Hugging Face Llama built from a config (8 layers, hidden 1024, 16 attention heads over 4 key/value
heads, MLP 2816, vocab 32000: about 155M parameters), sequence 1024, batch 4, bf16 autocast, fused AdamW, the
model under torch.compile's default mode (the optimizer eager, the same in every arm). Weights and tokens are
built on the host from one seed, then moved. PyTorch allows one accelerator per process once torch_fl is
imported, so each arm has a process of its own and the plain arms (cuda; cpu beside the CPU emulation) never
import torch_fl.

  python -m harness.llm all [--sets 2] [--tiny]     the whole check, from build_tools/bench (cuda_node.sh llm)
  python -m harness.llm run --arm ARM ...           one arm's process (lockstep protocol)
  python -m harness --llm SETS                      the same as a case of the bench, in bench.json and bench.md

It is a module of the harness package, which imports nothing at import: a plain arm never loads torch_fl.

`all` runs --sets lockstep sets (build_tools/bench/harness/lockstep.py) of three processes: compiled flagos, compiled
plain and compiled plain again (the A/A control). Each builds the model, profiles one eager forward+backward for the
attention kernels it takes, compiles (counting the fused attention ops the generated code calls) and warms up (3
steps, out of the timing), measures its peak memory over 2 more steps, and then serves turns of 5 synchronized
steps, one arm at a time, the order rotated per round, 8 rounds per set (--tiny: 2 rounds of 2 steps). Ratios are
taken within each round; the figures are medians over every round of every set. It prints ms/step (median and
quartiles) per arm, compiled flagos / compiled plain, the A/A ratio, the peak memory ratio, the attention ops and
kernels each arm took in eager mode and whether flagos takes the fused (flash) kernel where the plain device does,
the fused attention calls of each compiled graph, then

  llm compile check: PASS     time ratio <= 1.10 and peak memory ratio <= 1.05
  llm compile check: FAIL (...numbers...)

--tiny (the default where the plain device is the CPU): a 1-layer model of hidden 32 at sequence 32 on the CPU
emulation, traced as torch.compile traces it (Dynamo and AOTAutograd; the graphs run as traced, Inductor's C++
compile left to tests/compile): a dry run of the case in seconds (the verdict is printed, not judged: exit status 0
unless an arm failed).
The compiled flagos graph's Inductor features (torch_fl/compile/_torch_compat/features.py) are listed beside it.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from . import arms, lockstep

FULL = {"layers": 8, "hidden": 1024, "heads": 16, "kv_heads": 4, "mlp": 2816, "vocab": 32000, "seq": 1024, "batch": 4}
TINY = {"layers": 1, "hidden": 32, "heads": 2, "kv_heads": 1, "mlp": 64, "vocab": 128, "seq": 32, "batch": 2}
TIME_BAR, MEMORY_BAR = 1.10, 1.05
WARM_STEPS, PEAK_STEPS = 3, 2
TURNS = {"full": (8, 5), "tiny": (2, 2)}  # (rounds per set, synchronized steps per turn)
CHILD_TIMEOUT_S = 480
ATTENTION_WORDS = ("attention", "flash", "fmha", "cudnn", "sdp")
COMPILED_ATTENTION = (  # the fused attention ops a compiled graph may call as extern kernels
    "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_fused_attention_overrideable_backward",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_cudnn_attention_backward",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_efficient_attention_backward",
)


def _attention_seen(step, device: str) -> dict:
    """The attention ops (ATen) and device kernels one eager step runs."""
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if (device == "cuda" or device == "flagos" and _gpu_vendor()) and torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        step()
        if device != "cpu":
            torch.accelerator.synchronize()  # the kernels' records reach the profiler
    ops, kernels = set(), set()
    for event in prof.events():
        name = event.name
        if not any(w in name.lower() for w in ATTENTION_WORDS):
            continue
        if name.startswith("aten::"):
            ops.add(name[6:])
        elif getattr(event, "device_type", None) is not None and "CUDA" in str(event.device_type):
            kernels.add(name[:90])
    return {"ops": sorted(ops), "kernels": sorted(kernels)}


def _traced_only(codes: list[str]):
    """A torch.compile backend that traces the forward and the backward graphs (Dynamo and AOTAutograd), keeps
    their code in ``codes`` and runs them as traced."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def keep(gm, example_inputs):
        codes.append(gm.code)
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=keep, bw_compiler=keep)


def _gpu_vendor() -> bool:
    import torch_fl

    return torch_fl.accelerator() in ("cuda", "dcu")


def llama_config(size: dict, positions: int):
    """The Llama of a size table (vocab, hidden, mlp, layers, heads, kv_heads) with ``positions`` positions and
    torch's fused attention: this case's model and the decoding case's."""
    from transformers import LlamaConfig

    config = LlamaConfig(
        vocab_size=size["vocab"],
        hidden_size=size["hidden"],
        intermediate_size=size["mlp"],
        num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"],
        num_key_value_heads=size["kv_heads"],
        max_position_embeddings=positions,
        tie_word_embeddings=False,
    )
    config._attn_implementation = "sdpa"
    return config


def run(arm: str, device: str, tiny: bool, serve_cpu: int | None) -> None:
    import torch

    arms.import_torchvision()
    from transformers import LlamaForCausalLM

    if serve_cpu is not None and device == "cpu":
        torch.set_num_threads(1)  # every thread is pinned to one CPU for the timing
    info: dict = {"arm": arm, "torch": torch.__version__}
    if arm == "flagos":
        import torch_fl

        device = "flagos"
        info["flagos_runtime"] = torch_fl.accelerator()
        try:  # now, not on Inductor's import: the traced-only dry run never imports Inductor, and AOTAutograd needs
            torch_fl.compile.register()  # the fused attention ops' Meta kernels the registration supplies
        except RuntimeError as exc:
            info["registration_failed"] = str(exc)
    elif device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("the plain arm asks for cuda, but torch.cuda.is_available() is False here")
    size = TINY if tiny else FULL
    config = llama_config(size, size["seq"])
    torch.manual_seed(0)
    host_model = LlamaForCausalLM(config)
    info["params_m"] = round(sum(p.numel() for p in host_model.parameters()) / 1e6, 1)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, size["vocab"], (size["batch"], size["seq"]), generator=g).to(device) for _ in range(4)]
    model = host_model.to(device)
    autocast_type = "flagos" if device == "flagos" else device
    sync = {"flagos": lambda: torch.flagos.synchronize(), "cuda": torch.cuda.synchronize}.get(device, lambda: None)
    module = {"flagos": "flagos", "cuda": "cuda"}.get(device)  # the host keeps no peak statistics
    memory = None
    if module is not None:
        stats = getattr(torch, module)
        memory = (stats.reset_peak_memory_stats, stats.max_memory_allocated)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def make_step(forward):
        counter = iter(range(1 << 62))

        def step() -> None:
            tokens = batches[next(counter) % 4]
            with torch.autocast(autocast_type, dtype=torch.bfloat16):
                loss = forward(input_ids=tokens, labels=tokens).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return step

    info["eager_attention"] = _attention_seen(make_step(model), device)
    if tiny:  # the dry run traces as torch.compile does, without Inductor's C++ compile (tests/compile has that)
        codes: list[str] = []
        step = make_step(torch.compile(model, backend=_traced_only(codes)))
        step()
    else:
        from torch._inductor.utils import run_and_get_code

        step = make_step(torch.compile(model))
        _, codes = run_and_get_code(step)  # the first step compiles the forward and the backward graphs
    code = "\n".join(codes)
    calls = {op: code.count(f"aten.{op}.default(") for op in COMPILED_ATTENTION}
    info["compiled_attention"] = {op: n for op, n in calls.items() if n}
    if device == "flagos":
        from torch_fl.compile import _torch_compat

        info["inductor_features"] = _torch_compat.enabled_features()
    for _ in range(WARM_STEPS - 1):
        step()
    sync()
    if memory is not None:
        memory[0]()
        for _ in range(PEAK_STEPS):
            step()
        sync()
        peak = memory[1]()
        info["peak_gib"] = peak / 2**30 if peak else None  # the emulation keeps no peak statistics
    if serve_cpu is not None:
        lockstep.pin_all_threads(serve_cpu)
    lockstep.serve(step, sync, info)


def _command(arm: str, plain: str, tiny: bool, serve_cpu: int | None) -> tuple[list[str], dict]:
    args = ["run", "--arm", arm, "--device", plain]
    args += ["--tiny"] * tiny + ["--serve-cpu", str(serve_cpu)] * (serve_cpu is not None)
    return arms.command("llm", arm == "flagos", args)


def _takes_fused_where_plain_does(flagos: dict, plain: dict) -> tuple[bool, str]:
    """flagos takes a fused kernel where the plain device does: flash through torch's overrideable hook (the
    same device kernels on a GPU), the cuDNN and memory-efficient kernels by name."""
    fused = {"_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu"}
    plain_flash = bool(fused & set(plain["ops"]))
    flagos_ops = set(flagos["ops"])
    if plain_flash and "_scaled_dot_product_fused_attention_overrideable" not in flagos_ops:
        return False, "plain takes flash, flagos does not"
    others = {op for op in plain["ops"] if "cudnn" in op or "efficient" in op}
    if not others <= flagos_ops:
        return False, f"plain takes {sorted(others - flagos_ops)}, flagos does not"
    if "_scaled_dot_product_attention_math" in flagos_ops and "_scaled_dot_product_attention_math" not in plain["ops"]:
        return False, "flagos takes the math path"
    # the profiler of a flagos process records no vendor kernels: their names are compared where both arms have them
    if plain["kernels"] and flagos["kernels"] and set(plain["kernels"]) != set(flagos["kernels"]):
        return False, "the device kernels differ"
    return True, "flash" if plain_flash else ", ".join(sorted(others)) or "math on both"


def case(sets: int, tiny: bool = False) -> dict:
    """The case: its lines are printed as they come and kept, with the figures, for the harness's report."""
    runtime, plain = arms.devices()
    tiny = tiny or plain == "cpu"  # the full model takes minutes per step on the emulation
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/torch-fl-llm-check-inductor")
    size = TINY if tiny else FULL
    result: dict = {"size": size, "sets": sets, "judged": not tiny, "lines": []}
    say = arms.sayer(result)

    say(
        f"llm compile check: HF Llama {size['layers']} layers, hidden {size['hidden']}, {size['heads']} heads / "
        f"{size['kv_heads']} kv heads, vocab {size['vocab']}, seq {size['seq']}, batch {size['batch']}, bf16 "
        f"autocast, fused AdamW, torch.compile default; flagos on {runtime} against plain {plain}"
    )
    names = ("flagos", plain, plain + "-again")
    cpu = max(os.sched_getaffinity(0)) if plain == "cpu" else None
    ms: dict[str, list[float]] = {a: [] for a in names}
    ratios: dict[str, list[float]] = {"flagos": [], "again": []}
    info: dict = {}
    start = time.perf_counter()
    for number in range(sets):
        children = {a: _command("flagos" if a == "flagos" else "plain", plain, tiny, cpu) for a in names}
        try:
            with lockstep.Group(children, CHILD_TIMEOUT_S) as group:
                info = group.info
                rounds = group.rounds(*TURNS["tiny" if tiny else "full"])
        except lockstep.LockstepError as exc:
            say(f"set {number + 1} failed: {exc}")
            result.update(failures=["an arm failed"], verdict="FAIL (an arm failed)")
            say(f"llm compile check: {result['verdict']}")
            return result
        med = [{k: statistics.median(t) for k, t in r.items()} for r in rounds]
        for a in names:
            ms[a] += [m[a] for m in med]
        ratios["flagos"] += [m["flagos"] / m[plain] for m in med]
        ratios["again"] += [m[plain + "-again"] / m[plain] for m in med]
        say(
            f"  set {number + 1} ({time.perf_counter() - start:.0f} s): "
            + ", ".join(f"{a} {statistics.median(m[a] for m in med):.2f} ms" for a in names)
        )
    say(f"  model: {info['flagos']['params_m']}M parameters; torch {info['flagos']['torch']}")
    result["arms"] = {}
    for a in names:
        q = statistics.quantiles(ms[a], n=4) if len(ms[a]) > 1 else [ms[a][0]] * 3
        peak = info[a].get("peak_gib")
        result["arms"][a] = {"ms_median": q[1], "ms_quartiles": [q[0], q[2]], "peak_gib": peak}
        say(
            f"  {a:12s} ms/step median {q[1]:.2f} (quartiles {q[0]:.2f} to {q[2]:.2f})"
            + (f", peak memory {peak:.2f} GiB" if peak is not None else "")
        )
    ratio, aa = statistics.median(ratios["flagos"]), statistics.median(ratios["again"])
    say(
        f"  time: compiled flagos / compiled {plain} = {ratio:.3f} per round (bar {TIME_BAR:.2f}); "
        f"A/A {plain}-again / {plain} = {aa:.3f}"
    )
    peaks = [info[a].get("peak_gib") for a in ("flagos", plain)]
    memory = peaks[0] / peaks[1] if None not in peaks else None
    result.update(time_ratio=ratio, aa_ratio=aa, memory_ratio=memory)
    say(
        f"  memory: peak flagos / {plain} = "
        + (f"{memory:.3f} (bar {MEMORY_BAR:.2f})" if memory else "not measured (the host keeps no peak statistics)")
    )
    if info["flagos"].get("registration_failed"):
        say(f"  flagos compile registration failed: {info['flagos']['registration_failed']}")
    result["inductor_features"] = info["flagos"].get("inductor_features", [])
    say(
        "  Inductor features of the flagos graph (those torch gates on the name cuda): "
        + (", ".join(result["inductor_features"]) or f"none (the {runtime} runtime compiles C++ kernels)")
    )
    for a in ("flagos", plain):
        seen = info[a]["eager_attention"]
        say(
            f"  eager attention on {a}: ops {', '.join(seen['ops']) or 'none'}"
            + (f"; kernels {', '.join(seen['kernels'])}" if seen["kernels"] else "")
        )
    for a in ("flagos", plain):
        calls = info[a]["compiled_attention"]
        say(
            f"  compiled graph on {a}: fused attention calls "
            + (", ".join(f"{op} x{n}" for op, n in calls.items()) or "none (attention was decomposed)")
        )
    same, what = _takes_fused_where_plain_does(info["flagos"]["eager_attention"], info[plain]["eager_attention"])
    say(f"  eager attention: flagos takes the plain device's fused kernel: {'yes' if same else 'NO'} ({what})")
    failures = []
    if ratio > TIME_BAR:
        failures.append(f"time ratio {ratio:.3f} > {TIME_BAR:.2f} (A/A {aa:.3f})")
    if memory is not None and memory > MEMORY_BAR:
        failures.append(f"memory ratio {memory:.3f} > {MEMORY_BAR:.2f}")
    if not same:
        failures.append(f"eager attention: {what}")
    if info["flagos"].get("registration_failed"):
        failures.append("flagos compile registration failed")
    if info[plain]["compiled_attention"] and not info["flagos"]["compiled_attention"]:
        failures.append("the compiled flagos graph decomposes attention")
    result.update(failures=failures, verdict="PASS" if not failures else "FAIL (" + "; ".join(failures) + ")")
    say(f"llm compile check: {result['verdict']} ({time.perf_counter() - start:.0f} s)")
    if tiny:
        say("(tiny: a dry run of the case on the emulation; the verdict is not judged)")
    return result


def check(sets: int, tiny: bool) -> int:
    """The node's entry: exit 1 on a judged failure or a failed arm."""
    result = case(sets, tiny)
    return int(bool(result["failures"]) and (result["judged"] or "an arm failed" in result["failures"]))


def main() -> int:
    args = arms.case_args(__doc__, sets=2, per_set="three")
    if args.cmd == "run":
        run(args.arm, args.device, args.tiny, args.serve_cpu)
        return 0
    return check(args.sets, args.tiny)


if __name__ == "__main__":
    sys.exit(main())
