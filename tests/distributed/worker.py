"""One rank of the distributed suite: runs a scenario on flagos tensors and writes what it saw as JSON.

    python worker.py SCENARIO OUT_DIR         (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment)

Scenarios: ``collectives`` (every collective in float32 and bfloat16, contiguous and not, sync and async),
``ddp`` and ``ddp-encoder`` (a small MLP or a 2-layer TransformerEncoder trained with DistributedDataParallel),
``dead-peer`` (the last rank exits before an
all_reduce; the others must fail within the timeout, naming the collective). Each check computes its expected
value from the ranks' inputs, so the parent only reads verdicts.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

import torch_fl  # noqa: F401  (registers the flagos device and its collectives backend)

# Set by main() from the launcher's environment (the test imports this module for its model and batches).
RANK, WORLD, DEV = 0, 1, torch.device("flagos", 0)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def rank_tensor(rank: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Rank ``rank``'s input on the host: small integers, exact in bfloat16 and in every sum here."""
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float32).reshape(shape) % 7 + 10 * rank).to(dtype)


def on_device(host: torch.Tensor, contiguous: bool) -> torch.Tensor:
    """``host`` on flagos; the non-contiguous form is a transposed view of a device tensor."""
    if contiguous:
        return host.to(DEV)
    return host.t().contiguous().to(DEV).t()


def checks(dtype: torch.dtype, contiguous: bool, async_op: bool) -> dict[str, str]:
    """Every collective once; name -> "ok" or what went wrong."""
    results: dict[str, str] = {}
    shape = (4, 6)
    mine = rank_tensor(RANK, shape, dtype)
    every = [rank_tensor(r, shape, dtype) for r in range(WORLD)]

    def done(work: object) -> None:
        if async_op:
            assert work is not None, "async_op=True returned no work object"
            work.wait()

    def check(name: str, got: torch.Tensor, want: torch.Tensor, *, same_memory: torch.Tensor | None = None) -> None:
        try:
            assert got.device == DEV, f"result on {got.device}, expected {DEV}"
            assert got.dtype == want.dtype, f"dtype {got.dtype}, expected {want.dtype}"
            torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
            if same_memory is not None:
                assert got.data_ptr() == same_memory, "the result is not in the caller's memory"
            results[name] = "ok"
        except Exception as exc:  # a verdict per check: one failure must not hide the others
            results[name] = f"{type(exc).__name__}: {exc}"

    def run(name: str, fn) -> None:
        print(f"rank {RANK}: {name}", flush=True)  # the last name a crashed rank printed is the culprit
        try:
            fn()
        except Exception as exc:
            results[name] = f"{type(exc).__name__}: {exc}"

    def all_reduce() -> None:
        for op, want in ((dist.ReduceOp.SUM, sum(every)), (dist.ReduceOp.MAX, torch.stack(every).amax(0))):
            t = on_device(mine, contiguous)
            ptr = t.data_ptr()
            done(dist.all_reduce(t, op=op, async_op=async_op))
            check(f"all_reduce.{op}", t, want.to(dtype), same_memory=ptr)

    def broadcast() -> None:
        src = WORLD - 1
        t = on_device(mine, contiguous)
        done(dist.broadcast(t, src=src, async_op=async_op))
        check("broadcast", t, every[src])

    def reduce() -> None:
        t = on_device(mine, contiguous)
        done(dist.reduce(t, dst=0, async_op=async_op))
        if RANK == 0:  # the other ranks' tensors are the library's scratch space (torch.distributed.reduce)
            check("reduce", t, sum(every).to(dtype))
        else:
            results["reduce"] = "ok"

    def all_gather() -> None:
        outs = [torch.empty(shape, dtype=dtype, device=DEV) for _ in range(WORLD)]
        done(dist.all_gather(outs, on_device(mine, contiguous), async_op=async_op))
        for r in range(WORLD):
            check(f"all_gather[{r}]", outs[r], every[r])

    def all_gather_into_tensor() -> None:
        out = torch.empty((WORLD * shape[0], shape[1]), dtype=dtype, device=DEV)
        done(dist.all_gather_into_tensor(out, mine.to(DEV), async_op=async_op))
        check("all_gather_into_tensor", out, torch.cat(every))

    def reduce_scatter() -> None:
        out = torch.empty(shape, dtype=dtype, device=DEV)
        ins = [on_device(rank_tensor(RANK + r, shape, dtype), contiguous) for r in range(WORLD)]
        done(dist.reduce_scatter(out, ins, async_op=async_op))
        check("reduce_scatter", out, sum(rank_tensor(r + RANK, shape, dtype).float() for r in range(WORLD)).to(dtype))

    def reduce_scatter_tensor() -> None:
        out = torch.empty(shape, dtype=dtype, device=DEV)
        inp = torch.cat([rank_tensor(RANK + r, shape, dtype) for r in range(WORLD)]).to(DEV)
        done(dist.reduce_scatter_tensor(out, inp, async_op=async_op))
        want = sum(rank_tensor(src + RANK, shape, dtype).float() for src in range(WORLD)).to(dtype)
        check("reduce_scatter_tensor", out, want)

    def all_to_all_single() -> None:
        rows = 2
        inp = torch.cat([rank_tensor(RANK * WORLD + dst, (rows, 3), dtype) for dst in range(WORLD)]).to(DEV)
        out = torch.empty_like(inp)
        done(dist.all_to_all_single(out, inp, async_op=async_op))
        want = torch.cat([rank_tensor(src * WORLD + RANK, (rows, 3), dtype) for src in range(WORLD)])
        check("all_to_all_single", out, want)

    def send_recv() -> None:
        # a ring: each rank sends to the next and receives from the previous, batched as NCCL needs (two ranks
        # that each send first would otherwise wait on each other's unposted receive)
        nxt, prev = (RANK + 1) % WORLD, (RANK - 1) % WORLD
        got = torch.empty(shape, dtype=dtype, device=DEV)
        ops = [dist.P2POp(dist.isend, on_device(mine, contiguous), nxt), dist.P2POp(dist.irecv, got, prev)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        check("send/recv", got, every[prev])

    def barrier() -> None:
        done(dist.barrier(async_op=async_op))
        results["barrier"] = "ok"

    for name, fn in (
        ("all_reduce", all_reduce),
        ("broadcast", broadcast),
        ("reduce", reduce),
        ("all_gather", all_gather),
        ("all_gather_into_tensor", all_gather_into_tensor),
        ("reduce_scatter", reduce_scatter),
        ("reduce_scatter_tensor", reduce_scatter_tensor),
        ("all_to_all_single", all_to_all_single),
        ("send/recv", send_recv),
        ("barrier", barrier),
    ):
        run(name, fn)
    return results


def scenario_collectives() -> dict:
    dist.init_process_group()  # no backend named: the device map picks flagos for flagos tensors
    out = {"backend_for_flagos": str(dist.get_backend_config())}
    for dname, dtype in DTYPES.items():
        for contiguous in (True, False):
            for async_op in (False, True):
                key = f"{dname}/{'contiguous' if contiguous else 'strided'}/{'async' if async_op else 'sync'}"
                out[key] = checks(dtype, contiguous, async_op)
    dist.destroy_process_group()
    return out


# Models of the DDP scenarios: name -> (build, global batch maker). Batches split evenly over 1, 2 or 4 ranks.
def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def tiny_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(32, 8, generator=g), torch.randn(32, 4, generator=g)


def encoder_model() -> torch.nn.Module:
    """The 2-layer TransformerEncoder of the training checks (d_model 256, 4 heads, ffn 1024), dropout off."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def encoder_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    # sequence 32: the parameters (what DDP buckets and reduces) are the model's whatever the sequence; a longer one
    # only adds host arithmetic
    g = torch.Generator().manual_seed(200 + step)
    return torch.randn(8, 32, 256, generator=g), torch.randn(8, 32, 256, generator=g)


MODELS = {"tiny": (tiny_model, tiny_batch), "encoder": (encoder_model, encoder_batch)}
DDP_STEPS = 3


def train(name: str, model: torch.nn.Module, rank: int, world: int, device: torch.device) -> None:
    """DDP_STEPS SGD steps on this rank's share of each global batch (SGD: its steps follow the gradient, so
    summation-order rounding stays rounding; Adam would turn it into steps of its learning rate)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(DDP_STEPS):
        x, y = MODELS[name][1](step)
        per = x.shape[0] // world
        rows = slice(rank * per, (rank + 1) * per)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[rows].to(device)), y[rows].to(device))
        loss.backward()
        opt.step()


def scenario_ddp(name: str, backend: str | None = "flagos") -> dict:
    dist.init_process_group(backend)  # None: no backend named, as the README's example does
    from torch.nn.parallel import DistributedDataParallel

    chosen = str(dist.get_backend())
    model = DistributedDataParallel(MODELS[name][0]().to(DEV))
    train(name, model, RANK, WORLD, DEV)
    dist.destroy_process_group()
    return {"backend": chosen, "params": {n: p.detach().cpu().tolist() for n, p in model.module.named_parameters()}}


def scenario_dead_peer() -> dict:
    dist.init_process_group("flagos", timeout=timedelta(seconds=5))
    dist.barrier()
    if RANK == WORLD - 1:
        os._exit(0)  # dies without a word, as a crashed rank does
    start = time.monotonic()
    try:
        # waited on, as failures are observed: a synchronous NCCL collective returns no work to wait for
        dist.all_reduce(torch.ones(4, device=DEV), async_op=True).wait()
        error = None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    return {"error": error, "seconds": time.monotonic() - start}


def setup_rank() -> None:
    """This rank's number, world and device from the launcher's environment; its device made current before any
    group exists (as for cuda), and a hang dumped where it hangs."""
    global RANK, WORLD, DEV
    hang_s = float(os.environ.get("FLAGOS_DIST_HANG_DUMP_S", "0"))
    if hang_s > 0:  # a rank that hangs prints where, before the launcher kills it
        faulthandler.dump_traceback_later(hang_s, exit=True)
    RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    DEV = torch.device("flagos", RANK % torch.flagos.device_count())
    torch.flagos.set_device(DEV.index)


def write_result(out_dir: Path, result: dict) -> None:
    """This rank's result, replaced whole (a reader never sees half of it)."""
    tmp = out_dir / f".rank{RANK}.json.tmp"
    tmp.write_text(json.dumps(result))
    tmp.replace(out_dir / f"rank{RANK}.json")


def main() -> None:
    setup_rank()
    scenario, out_dir = sys.argv[1], Path(sys.argv[2])
    scenarios = {
        "collectives": scenario_collectives,
        "ddp": lambda: scenario_ddp("tiny"),
        "ddp-default": lambda: scenario_ddp("tiny", backend=None),
        "ddp-encoder": lambda: scenario_ddp("encoder"),
        "dead-peer": scenario_dead_peer,
    }
    write_result(out_dir, scenarios[scenario]())
    os._exit(0)  # skip interpreter teardown: a dead peer's group must not hold this rank at exit


if __name__ == "__main__":
    main()
