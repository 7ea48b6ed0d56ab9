"""Greedy decoding of a small LLM at batch 1 on flagos against the plain vendor device: eager, compiled and
compiled with mode="reduce-overhead" (graphs), in tokens/s (issue 34).

The model: a Hugging Face Llama built from a config (8 layers, hidden 1024, 16 attention heads over 4 key/value
heads, MLP 2816, vocab 32000), weights in bf16, built on the host from one seed and moved. A fixed random prompt of
32 tokens is prefilled eagerly into transformers' StaticCache; a step then decodes 32 tokens greedily from there,
each a call of the arm's callable (``model(input_ids=token, cache_position=position, past_key_values=cache,
use_cache=True)``) with no host sync inside the step. Every step decodes from the same prefilled state, so every
step yields the same tokens.

Arms, one process each (PyTorch allows one accelerator per process once torch_fl is imported; the plain arms never
import it): plain eager, compiled (default mode, fullgraph), reduce-overhead and reduce-overhead again (the A/A
control); flagos eager, compiled and reduce-overhead. They are timed in --sets lockstep sets (lockstep.py): after
a warm-up of 3 steps (compiles and recordings), turns of synchronized steps, one arm at a time, the order rotated
per round. It prints tokens/s per arm (median over every round of every set), flagos / plain per mode and the A/A,
the token ids of each flagos arm against the plain arm of its mode (plain arms against plain eager), then

  decode check: PASS     every flagos arm decodes the tokens of plain in the same mode, flagos reduce-overhead >=
                         0.95x plain reduce-overhead (plain across modes is printed, not judged: bf16 rounding)
  decode check: FAIL (...)

and exits 1 on a FAIL.

  python -m harness.decode all [--sets 3] [--tiny]     from build_tools/bench (cuda_node.sh decode)
  python -m harness --decode SETS                       the same as a case of the bench, in bench.json and bench.md

--tiny (the default beside the CPU emulation): a 1-layer model of hidden 32 against the host, eager and compiled
(traced as torch.compile traces it, as llm.py's dry run), and reduce-overhead asserted refused on the emulation
with its message: a dry run of the case in seconds (timings printed, not judged).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from . import arms, llm, lockstep

FULL = {"layers": 8, "hidden": 1024, "heads": 16, "kv_heads": 4, "mlp": 2816, "vocab": 32000}
TINY = {"layers": 1, "hidden": 32, "heads": 2, "kv_heads": 1, "mlp": 64, "vocab": 128}
PROMPT, TOKENS = 32, 32
WARM_STEPS = 3
TURNS = {"full": (8, 3), "tiny": (1, 1)}  # (rounds per set, synchronized steps per turn)
RO_BAR = 0.95
CHILD_TIMEOUT_S = 540
MODES = ("eager", "compiled", "reduce-overhead")


def _model(size: dict, device: str):
    import torch
    from transformers import LlamaForCausalLM

    config = llm.llama_config(size, PROMPT + TOKENS)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    return config, model.to(device)


def _callable(model, mode: str, tiny: bool):
    import torch

    if mode == "eager":
        return model
    if tiny and mode == "compiled":  # the dry run: Dynamo and AOTAutograd, no Inductor C++ compile
        from .llm import _traced_only

        return torch.compile(model, backend=_traced_only([]), fullgraph=True)
    return torch.compile(model, fullgraph=True, **({"mode": "reduce-overhead"} if mode == "reduce-overhead" else {}))


def _refusal(model, step_args: dict) -> str | None:
    """The message reduce-overhead is refused with on this process's flagos runtime, or None when it runs."""
    import torch

    try:
        with torch.inference_mode():
            torch.compile(model, mode="reduce-overhead", fullgraph=True)(**step_args)
        return None
    except Exception as exc:  # noqa: BLE001  (Dynamo wraps the backend's error: the message is what counts)
        return str(exc)


def _watch_runners() -> list:
    """The graph runners torch_fl makes for this process's compiled flagos graphs (a flagos reduce-overhead arm
    that replays no graph is timing compiled code, whatever its skip count says)."""
    from torch_fl.compile import graph_runner

    made: list = []
    original = graph_runner.make_runner

    def watched(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    graph_runner.make_runner = watched
    return made


def _graphs(runners: list) -> dict:
    """How many graph runners there are, how many recordings they hold, and why those that skip skip."""
    from torch_fl.compile import graph_runner

    recorded = [r for r in runners if any(isinstance(v, graph_runner.Recording) for v in r.recordings.values())]
    return {
        "runners": len(runners),
        "replaying": len(recorded),
        "recordings": sum(len(r.recordings) for r in recorded),
        "skipped": sorted({why for why in map(_why_no_graph, runners) if why}),
    }


def _why_no_graph(runner) -> str | None:
    """The runner's reason for replaying nothing: a skip, or keys that never came twice (older wheels: skips only)."""
    reason = getattr(runner, "reason", None)
    return reason() if callable(reason) else runner.skipped


def _rewind(cache) -> None:
    """Back to the prefilled state: transformers lines that count the cache's length themselves (a static device
    tensor per layer) are set back to the prompt; the others write where ``cache_position`` says."""
    import torch

    for layer in getattr(cache, "layers", ()):
        length = getattr(layer, "cumulative_length", None)
        if isinstance(length, torch.Tensor):
            length.fill_(PROMPT)
        # A sliding-window layer also counts on the host: left alone, every step after the first would decode with
        # a full window (another code path) and hand compiled graphs an int input never seen before on every call
        if isinstance(getattr(layer, "cumulative_length_int", None), int):
            layer.cumulative_length_int = PROMPT


def run(arm: str, mode: str, device: str, tiny: bool, serve_cpu: int | None) -> None:
    import torch

    arms.import_torchvision()
    from transformers import StaticCache

    if serve_cpu is not None and device == "cpu":
        torch.set_num_threads(1)  # every thread is pinned to one CPU for the timing
    info: dict = {"arm": f"{arm}-{mode}", "torch": torch.__version__}
    if arm == "flagos":
        import torch_fl

        device = "flagos"
        info["flagos_runtime"] = torch_fl.accelerator()
    elif device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("the plain arm asks for cuda, but torch.cuda.is_available() is False here")
    config, model = _model(TINY if tiny else FULL, device)
    cache = StaticCache(config=config, max_cache_len=PROMPT + TOKENS)
    prompt = torch.randint(0, config.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(1)).to(device)
    positions = [torch.tensor([PROMPT + i], device=device) for i in range(TOKENS)]
    sync = {"flagos": lambda: torch.flagos.synchronize(), "cuda": torch.cuda.synchronize}.get(device, lambda: None)
    with torch.inference_mode():
        logits = model(
            input_ids=prompt, past_key_values=cache, use_cache=True, cache_position=torch.arange(PROMPT, device=device)
        ).logits
        first = logits[:, -1:].argmax(-1)
    if mode == "reduce-overhead":
        import torch._inductor.config as inductor_config

        # a graph skipped for any reason (mutated inputs, an uncapturable op, ...) stops the arm with the reason:
        # timing compiled code as reduce-overhead would say nothing about graphs
        inductor_config.triton.cudagraph_or_error = True
    runners = _watch_runners() if arm == "flagos" and mode == "reduce-overhead" else None
    forward = _callable(model, mode, tiny)

    def step() -> torch.Tensor:
        token, out = first, []
        with torch.inference_mode():
            _rewind(cache)
            for position in positions:
                logits = forward(input_ids=token, cache_position=position, past_key_values=cache, use_cache=True).logits
                token = logits[:, -1:].argmax(-1)
                out.append(token)
        return torch.cat(out, dim=1)

    start = time.perf_counter()
    info["tokens"] = step().reshape(-1).tolist()
    info["first_step_s"] = round(time.perf_counter() - start, 2)
    for _ in range(WARM_STEPS - 1):
        step()
    sync()
    from torch._dynamo.utils import counters

    info["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"]
    if runners is not None:
        info["graphs"] = _graphs(runners)
    if arm == "flagos" and mode == "compiled" and info["flagos_runtime"] == "cpu":
        info["refusal"] = _refusal(
            model, {"input_ids": first, "cache_position": positions[0], "past_key_values": cache, "use_cache": True}
        )
    if serve_cpu is not None:
        lockstep.pin_all_threads(serve_cpu)
    lockstep.serve(step, sync, info)


def _arms(plain: str, tiny: bool) -> dict[str, tuple[str, str]]:
    """name -> (process kind, mode)."""
    if tiny:
        return {
            f"{plain}-eager": ("plain", "eager"),
            f"{plain}-compiled": ("plain", "compiled"),
            f"{plain}-eager-again": ("plain", "eager"),
            "flagos-eager": ("flagos", "eager"),
            "flagos-compiled": ("flagos", "compiled"),
        }
    named = {f"{plain}-{m}": ("plain", m) for m in MODES}
    named[f"{plain}-reduce-overhead-again"] = ("plain", "reduce-overhead")
    named.update({f"flagos-{m}": ("flagos", m) for m in MODES})
    return named


def case(sets: int, tiny: bool = False) -> dict:
    """The case: its lines are printed as they come and kept, with the figures, for the harness's report."""
    runtime, plain = arms.devices()
    tiny = tiny or plain == "cpu"  # the emulation decodes the full model at seconds per token
    size = TINY if tiny else FULL
    result: dict = {"size": size, "sets": sets, "judged": not tiny, "lines": [], "failures": []}
    say = arms.sayer(result)

    say(
        f"decode check: HF Llama {size['layers']} layers, hidden {size['hidden']}, {size['heads']} heads / "
        f"{size['kv_heads']} kv heads, vocab {size['vocab']}, bf16, StaticCache, batch 1, prompt {PROMPT}, "
        f"{TOKENS} greedy tokens per step; flagos on {runtime} against plain {plain}"
    )
    named = _arms(plain, tiny)
    cpu = max(os.sched_getaffinity(0)) if plain == "cpu" else None
    commands = {}
    for name, (kind, mode) in named.items():
        args = ["run", "--arm", kind, "--mode", mode, "--device", plain] + ["--tiny"] * tiny
        commands[name] = arms.command("decode", kind == "flagos", args + ["--serve-cpu", str(cpu)] * (cpu is not None))
    try:
        rounds, info = arms.timed_sets(commands, sets, TURNS["tiny" if tiny else "full"], CHILD_TIMEOUT_S, say)
    except lockstep.LockstepError as exc:
        say(f"an arm failed: {exc}")
        result.update(failures=["an arm failed"], verdict="FAIL (an arm failed)")
        say(f"decode check: {result['verdict']}")
        return result
    result["arms"] = {}
    for name in named:
        per_s = [TOKENS * 1e3 / r[name] for r in rounds]
        result["arms"][name] = {"tokens_per_s": statistics.median(per_s), "first_step_s": info[name]["first_step_s"]}
        say(
            f"  {name:28s} {statistics.median(per_s):9.1f} tokens/s (first step, compile included: "
            f"{info[name]['first_step_s']} s; cudagraph skips {info[name]['cudagraph_skips']})"
        )
        if "graphs" in info[name]:
            graphs = info[name]["graphs"]
            skipped = "; skipped: " + " | ".join(graphs["skipped"]) if graphs["skipped"] else ""
            say(
                f"    flagos graphs: {graphs['runners']} runners, {graphs['replaying']} replaying "
                f"({graphs['recordings']} recordings){skipped}"
            )
            if not tiny and not graphs["replaying"]:
                result["failures"].append(f"{name} replayed no graph")
    base = f"{plain}-eager" if tiny else f"{plain}-reduce-overhead"
    again = f"{base}-again"
    aa = statistics.median(r[base] / r[again] for r in rounds)
    say(f"  A/A {again} / {base} tokens/s = {aa:.3f}")
    ratios = {}
    for mode in MODES if not tiny else ("eager", "compiled"):
        ratios[mode] = statistics.median(r[f"{plain}-{mode}"] / r[f"flagos-{mode}"] for r in rounds)
        say(f"  flagos / {plain} tokens/s, {mode}: {ratios[mode]:.3f}")
    result.update(ratios=ratios, aa_ratio=aa)
    # flagos is judged against plain in the same mode. Across modes plain itself may differ: compiled bf16 code
    # rounds otherwise than eager code, and a near-tie of two logits then picks another greedy token
    for name in named:
        kind, mode = named[name]
        against = f"{plain}-{mode}" if kind == "flagos" else f"{plain}-eager"
        got, reference = info[name]["tokens"], info[against]["tokens"]
        where = next((i for i, (a, b) in enumerate(zip(got, reference, strict=True)) if a != b), None)
        verdict = "identical" if where is None else f"DIFFER from position {where}"
        judged = kind == "flagos"
        say(f"  tokens {name:28s} {verdict} to {against}{'' if judged else ' (plain across modes: not judged)'}")
        if judged and where is not None:
            result["failures"].append(f"{name} tokens differ from {against}")
    if not tiny and ratios["reduce-overhead"] < RO_BAR:
        result["failures"].append(f"flagos reduce-overhead at {ratios['reduce-overhead']:.3f}x plain (bar {RO_BAR})")
    if tiny and runtime == "cpu":
        message = info["flagos-compiled"].get("refusal") or ""
        refused = "reduce-overhead" in message and "CUDA or DCU" in message
        say(f"  reduce-overhead on the emulation: {'refused with its message' if refused else 'NOT REFUSED'}")
        if not refused:
            result["failures"].append("reduce-overhead was not refused on the emulation")
    result["verdict"] = "PASS" if not result["failures"] else "FAIL (" + "; ".join(result["failures"]) + ")"
    say(f"decode check: {result['verdict']}")
    if tiny:
        say("(tiny: a dry run of the case; the timings are not judged)")
    return result


def main() -> int:
    args = arms.case_args(__doc__, sets=3, per_set="seven", modes=MODES)
    if args.cmd == "run":
        run(args.arm, args.mode, args.device, args.tiny, args.serve_cpu)
        return 0
    return int(bool(case(args.sets, args.tiny)["failures"]))


if __name__ == "__main__":
    sys.exit(main())
