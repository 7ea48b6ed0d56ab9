"""One arm of the model zoo (zoo.py): a process that sets the zoo's (model, mode) pairs up one after another and
serves lockstep turns of whichever is set up.

    python -m harness.zoo_arm --arm flagos|plain --device cuda|cpu --plan JSON [--tiny]

PLAN is the list of [model, mode] pairs the parent may ask for; ``prepare i`` (a lockstep request) drops the pair
set up before and sets up pair i: the model built on the host from the zoo's seed and moved, its checked steps
(losses, or the decoded tokens), warm-up and peak memory; the reply says what it found, or the error that stopped
it (the arm keeps serving: one pair that fails costs that pair, not the zoo). ``run n`` times n steps of the pair,
``profile n`` profiles n steps (profile_ops.py). One process serves every model, so the zoo pays for one start-up
per arm and not per model; each pair starts from freshly built weights and a reset compiler, so pairs do not see
each other's compiled code or weights.

A plain arm never imports torch_fl (arms.command starts it so); torch is imported here, in the arm's process.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from . import arms, failure, lockstep, profile_ops, zoo_models

MODES = ("train-eager", "decode-eager", "train-compiled", "decode-reduce-overhead")  # the order they run in
CHECKED_STEPS, WARM_STEPS, PEAK_STEPS = 3, 2, 2
LR = {"adamw": 1e-4, "sgd": 1e-2}


class Arm:
    """What one arm's process has set up: the device's functions and the current pair's step."""

    def __init__(self, arm: str, device: str, tiny: bool) -> None:
        import torch

        self.torch, self.tiny, self.arm = torch, tiny, arm
        self.info: dict[str, Any] = {"arm": arm, "torch": torch.__version__}
        if arm == "flagos":
            import torch_fl

            device = "flagos"
            self.info["flagos_runtime"] = runtime = torch_fl.accelerator()
            self.gpu = runtime in ("cuda", "dcu")
        else:
            if device == "cuda" and not torch.cuda.is_available():
                raise SystemExit("the plain arm asks for cuda, but torch.cuda.is_available() is False here")
            self.gpu = device == "cuda"
        if not self.gpu:
            torch.set_num_threads(1)  # the emulation's arms share a few cores; one thread each keeps them apart
        elif device == "cuda":  # the plain arm names the card (a flagos process leaves torch.cuda alone)
            self.info["gpu"] = torch.cuda.get_device_name()
        self.device = device
        self.module = getattr(torch, device) if device in ("flagos", "cuda") else None  # the host keeps no peaks
        self.step: Callable[[], Any] | None = None
        self.teardown: list[Callable[[], None]] = []

    def sync(self) -> None:
        if self.module is not None:
            self.module.synchronize()

    # ---- requests ----

    def prepare(self, pair: list[str]) -> dict[str, Any]:
        self._drop()
        name, mode = pair
        reply: dict[str, Any] = {"model": name, "mode": mode}
        started = time.perf_counter()
        try:
            setup = self._train if mode.startswith("train") else self._decode
            reply.update(setup(zoo_models.ARCHS[name], mode))
            reply["peak_gib"] = self._peak()
            reply["ok"] = True
        except Exception as exc:  # noqa: BLE001  (any failure of one pair is reported, and the arm serves on)
            self._drop()
            reply.update(ok=False, error=failure.describe(exc), traceback=failure.traceback_tail(exc))
        reply["setup_s"] = round(time.perf_counter() - started, 1)
        return reply

    def profile(self, steps: int) -> dict[str, Any]:
        assert self.step is not None, "profile before prepare"
        return profile_ops.collect(self.step, self.sync, steps, device=self.gpu)

    # ---- the pairs ----

    def _train(self, arch: zoo_models.Arch, mode: str) -> dict[str, Any]:
        torch = self.torch
        model, _, batch, loss_of = zoo_models.build(arch.name, self.tiny)
        reply: dict[str, Any] = {"params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1)}
        if arch.name.endswith("moe"):  # transformers picks the experts' kernels (grouped_mm or a loop) by device
            reply["experts"] = getattr(model.config, "_experts_implementation", None)
        model = model.to(self.device)
        batch = {k: v.to(self.device) for k, v in batch.items()}
        params = list(model.parameters())
        if arch.optimizer == "sgd":
            opt = torch.optim.SGD(params, lr=LR["sgd"], momentum=0.9, foreach=True)
        else:
            opt = torch.optim.AdamW(params, lr=LR["adamw"], fused=True)
        kind = self.device  # autocast's device type: flagos, cuda or cpu
        dtype = getattr(torch, arch.dtype)
        scaler = torch.amp.GradScaler(kind, enabled=arch.scaler)
        forward = self._compiled(model, "default") if mode == "train-compiled" else model

        def step():
            with torch.autocast(kind, dtype=dtype):
                loss = loss_of(forward, batch)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        reply["losses"] = [float(step()) for _ in range(CHECKED_STEPS)]  # the first compiles
        for _ in range(WARM_STEPS):
            step()
        self.step = step
        return reply

    def _decode(self, arch: zoo_models.Arch, mode: str) -> dict[str, Any]:
        from transformers import StaticCache

        from . import decode

        torch = self.torch
        model, config, _, _ = zoo_models.build(arch.name, self.tiny)
        model = model.to(torch.bfloat16).eval().to(self.device)
        cache = StaticCache(config=config, max_cache_len=decode.PROMPT + decode.TOKENS)
        g = torch.Generator().manual_seed(1)
        prompt = torch.randint(3, config.vocab_size, (1, decode.PROMPT), generator=g).to(self.device)
        positions = [torch.tensor([decode.PROMPT + i], device=self.device) for i in range(decode.TOKENS)]
        with torch.inference_mode():
            first = (
                model(
                    input_ids=prompt,
                    past_key_values=cache,
                    use_cache=True,
                    cache_position=torch.arange(decode.PROMPT, device=self.device),
                )
                .logits[:, -1:]
                .argmax(-1)
            )
        runners = None
        if mode == "decode-reduce-overhead":
            import torch._inductor.config as inductor_config

            # a graph skipped for any reason stops the pair with the reason: timing compiled code under the name
            # reduce-overhead would say nothing about graphs
            inductor_config.triton.cudagraph_or_error = True
            self.teardown.append(lambda: setattr(inductor_config.triton, "cudagraph_or_error", False))
            if self.arm == "flagos":
                from torch_fl.compile import graph_runner

                # decode.py's watch wraps the runner factory; unwrapped again here, so that a later pair's
                # runners are not kept (with their graphs) by this pair's list
                factory = graph_runner.make_runner
                self.teardown.append(lambda: setattr(graph_runner, "make_runner", factory))
                runners = decode._watch_runners()
            forward = self._compiled(model, "reduce-overhead")
        else:
            forward = model

        def step():
            token, out = first, []
            with torch.inference_mode():
                decode._rewind(cache)
                for position in positions:
                    logits = forward(
                        input_ids=token, cache_position=position, past_key_values=cache, use_cache=True
                    ).logits
                    token = logits[:, -1:].argmax(-1)
                    out.append(token)
            return torch.cat(out, dim=1)

        reply: dict[str, Any] = {"tokens": step().reshape(-1).tolist()}
        for _ in range(WARM_STEPS):
            step()
        if runners is not None:
            reply["graphs"] = decode._graphs(runners)
        self.step = step
        return reply

    def _compiled(self, model, mode: str):
        torch = self.torch
        if not self.gpu:  # the emulation traces as torch.compile does, without Inductor's C++ compile (llm.py)
            if mode == "reduce-overhead":
                raise RuntimeError("reduce-overhead needs a GPU runtime (graphs); the emulation refuses it")
            from .llm import _traced_only

            return torch.compile(model, backend=_traced_only([]))
        if self.arm == "flagos":
            import torch_fl

            torch_fl.compile.register()
        if mode == "reduce-overhead":
            return torch.compile(model, mode="reduce-overhead", fullgraph=True)
        return torch.compile(model)

    def _peak(self) -> float | None:
        if self.module is None:
            return None
        self.sync()
        self.module.reset_peak_memory_stats()
        for _ in range(PEAK_STEPS):
            self.step()
        self.sync()
        return self.module.max_memory_allocated() / 2**30

    def _drop(self) -> None:
        """Forget the pair set up before: its step (and with it model, optimizer, batch), compiled code, graphs."""
        self.step = None
        for undo in self.teardown:
            undo()
        self.teardown.clear()
        self.torch._dynamo.reset()
        gc.collect()
        if self.module is not None:
            self.sync()
            self.module.empty_cache()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arm", required=True, choices=["flagos", "plain"])
    p.add_argument("--device", default="cuda", help="the plain arm's device (cuda, or cpu beside the emulation)")
    p.add_argument("--plan", required=True, help="JSON list of [model, mode] pairs")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--turn-cpu", type=int, help="the CPU every thread runs on during a timed turn (zoo.py's --cpu)")
    args = p.parse_args(argv)
    plan = json.loads(args.plan)
    arms.import_torchvision()
    arm = Arm(args.arm, args.device, args.tiny)

    def step():
        assert arm.step is not None, "run before prepare"
        return arm.step()

    requests = {"prepare": lambda i: arm.prepare(plan[i]), "profile": arm.profile}
    lockstep.serve(step, arm.sync, arm.info, requests=requests, turn_cpu=args.turn_cpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
