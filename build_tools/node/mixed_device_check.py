"""Which calls with one host tensor among device tensors does each device accept? CUDA's verdict is the reference.

For every OpInfo of torch's op databases (op_db and the _foreach_ ones; first float32 sample, made on the host so
that both arms see the same sample), each tensor argument in turn (the input, a positional or keyword argument, one
of the first two elements of a tensor list, and an ``out=`` tensor where the op has an out variant) is left on the
host while every other tensor goes to the device; the call is then accepted or refused. Variants that would leave
no device tensor are skipped (the call would simply run on the host).

    python mixed_device_check.py all [--reference cuda|cpu] [--workers N] [--out report.txt]
        both arms, each in worker processes of its own (plain torch for the reference, never importing torch_fl;
        the flagos emulation, FLAGOS_ACCELERATOR=cpu, for the other), then the comparison. Exit 1 when an op
        that the reference refuses is accepted by the emulation (the acceptance: none).
    python mixed_device_check.py run --arm cuda|cpu|flagos [--first I --last J]
        one worker: JSON lines on stdout, one per variant
    python mixed_device_check.py compare REFERENCE.jsonl EMULATION.jsonl

With ``--reference cpu`` (any machine) the comparison is a smoke run only: the host accepts every mix.
A worker that dies (a crash, a poisoned CUDA context) costs only the op it was on: the driver starts a fresh
worker after it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

START = "@@start "  # a worker's line before each op: where a dead worker was
POISONED = 3  # a worker's exit status after a CUDA error that leaves the context unusable
OP_TIMEOUT = 60.0  # seconds without progress before a worker is given up on
LIST_ELEMENTS = 2  # the elements of a tensor list moved to the host in turn (a _foreach_ sample holds 20)


# ---- one worker ----------------------------------------------------------------------------------------------


def _ops():
    from torch.testing._internal import common_methods_invocations as db

    # the _foreach_ ops keep their OpInfos in databases of their own
    return db.op_db + [
        op
        for name in sorted(dir(db))
        if name.startswith("foreach_") and name.endswith("_op_db")
        for op in getattr(db, name)
    ]


def _label(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def _tensor_paths(value, path: str) -> Iterator[tuple[str, list[int]]]:
    import torch

    if isinstance(value, torch.Tensor):
        yield path, list(value.shape)
    elif isinstance(value, (list, tuple)):
        for k, item in enumerate(value[:LIST_ELEMENTS]):
            yield from _tensor_paths(item, f"{path}[{k}]")


def _paths(sample) -> list[tuple[str, list[int]]]:
    out = list(_tensor_paths(sample.input, "input"))
    for i, arg in enumerate(sample.args):
        out += _tensor_paths(arg, f"args[{i}]")
    for key, arg in sample.kwargs.items():
        out += _tensor_paths(arg, f"kwargs[{key}]")
    return out


def _placed(value, path: str, device: str, host_path: str | None):
    """`value` with every tensor on `device` except the one at `host_path`, which stays on the host."""
    import torch

    if isinstance(value, torch.Tensor):
        return value if path == host_path else value.to(device)
    if isinstance(value, (list, tuple)):
        items = [_placed(item, f"{path}[{k}]", device, host_path) for k, item in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    return value


def _call(op, sample, device: str, host_path: str | None, out=None):
    args = [_placed(a, f"args[{i}]", device, host_path) for i, a in enumerate(sample.args)]
    kwargs = {k: _placed(a, f"kwargs[{k}]", device, host_path) for k, a in sample.kwargs.items()}
    if out is not None:
        kwargs["out"] = out
    return op(_placed(sample.input, "input", device, host_path), *args, **kwargs)


def _synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "flagos":
        torch.flagos.synchronize()


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _poisoned(message: str) -> bool:
    return "CUDA error" in message or "illegal memory access" in message or "device-side assert" in message


def _verdicts(op, device: str) -> Iterator[dict]:
    """The variants of `op`'s first float32 sample, each accepted or refused on `device`."""
    import torch

    torch.manual_seed(0)
    try:
        sample = next(iter(op.sample_inputs("cpu", torch.float32, requires_grad=False)), None)
    except Exception as exc:  # noqa: BLE001  (a sample function that needs another device)
        yield {"skip": "sample: " + _first_line(exc)}
        return
    if sample is None:
        yield {"skip": "no float32 sample"}
        return
    try:
        result = _call(op.op, sample, device, None)
        _synchronize(device)
    except Exception as exc:  # noqa: BLE001
        yield {"skip": "all on the device: " + _first_line(exc)}
        return
    paths = _paths(sample)
    if len(paths) >= 2:
        for path, shape in paths:
            yield _verdict(lambda p=path: _call(op.op, sample, device, p), path, shape, device)
    if op.supports_out and isinstance(result, torch.Tensor) and paths:
        host_out = torch.empty_like(result, device="cpu")
        yield _verdict(lambda: _call(op.op, sample, device, None, out=host_out), "out", list(result.shape), device)


def _verdict(call, path: str, shape: list[int], device: str) -> dict:
    row = {"arg": path, "shape": shape}
    try:
        call()
        _synchronize(device)
        return {**row, "verdict": "accept"}
    except Exception as exc:  # noqa: BLE001
        return {**row, "verdict": "refuse", "error": _first_line(exc)}


def run_worker(arm: str, first: int, last: int) -> int:
    warnings.filterwarnings("ignore")
    if arm == "flagos":
        import torch_fl  # noqa: F401  (registers the device; FLAGOS_ACCELERATOR picks the runtime)
    ops = _ops()
    # plain torch's verdict only: torch_fl loaded would make flagos the process's accelerator
    assert arm == "flagos" or "torch_fl" not in sys.modules, "torch_fl was loaded in a reference worker"
    for index in range(first, min(last, len(ops))):
        op = ops[index]
        print(f"{START}{index} {_label(op)}", flush=True)
        for row in _verdicts(op, arm):
            row.update(op=_label(op), index=index)
            print(json.dumps(row), flush=True)
            if arm == "cuda" and _poisoned(row.get("error", "") + row.get("skip", "")):
                return POISONED  # the driver goes on with a fresh process
    return 0


# ---- the driver ----------------------------------------------------------------------------------------------


def _worker_env(arm: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS_")}
    env.update(PYTORCH_TEST_WITH_SLOW="1", PYTORCH_PRINT_REPRO_ON_FAILURE="0")
    if arm == "flagos":
        env["FLAGOS_ACCELERATOR"] = "cpu"
    return env


def _shard(arm: str, first: int, last: int) -> list[dict]:
    """The rows of ops [first, last) on `arm`, restarting a fresh worker after one that died or hung."""
    rows: list[dict] = []
    while first < last:
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(
                [sys.executable, __file__, "run", "--arm", arm, "--first", str(first), "--last", str(last)],
                stdout=out,
                stderr=err,
                env=_worker_env(arm),
                cwd=tempfile.gettempdir(),
            )
            # progress is a new line; a worker silent for OP_TIMEOUT is stopped (its start-up gets as long again)
            seen, since = 0, time.monotonic() + OP_TIMEOUT
            while proc.poll() is None:
                time.sleep(0.5)
                out.seek(0)
                lines = out.read().count("\n")
                if lines != seen:
                    seen, since = lines, time.monotonic()
                elif time.monotonic() - since > OP_TIMEOUT:
                    proc.kill()
                    proc.wait()
            out.seek(0)
            lines = out.read().splitlines()
            err.seek(0)
            errors = err.read()[-2000:]
        current, label = None, ""
        for line in lines:
            if line.startswith(START):
                index, _, label = line[len(START) :].partition(" ")
                current = int(index)
            elif line.startswith("{"):
                rows.append(json.loads(line))
        if proc.returncode == 0:
            break
        if current is None:
            raise RuntimeError(f"a {arm} worker ended ({proc.returncode}) before its first op:\n{errors}")
        if proc.returncode != POISONED:  # the op it was on ended the worker: noted, and skipped
            rows.append({"op": label, "index": current, "skip": f"worker ended ({proc.returncode})"})
        first = current + 1
    return rows


def run_arm(arm: str, workers: int, count: int) -> list[dict]:
    step = -(-count // workers)
    with ThreadPoolExecutor(workers) as pool:
        shards = pool.map(lambda i: _shard(arm, i, min(i + step, count)), range(0, count, step))
        return [row for shard in shards for row in shard]


def _key(row: dict) -> tuple[str, str]:
    return (row["op"], row["arg"])


def compare(reference: list[dict], emulation: list[dict], reference_name: str) -> tuple[str, bool]:
    ref = {_key(r): r for r in reference if "verdict" in r}
    emu = {_key(r): r for r in emulation if "verdict" in r}
    common = sorted(set(ref) & set(emu))
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for key in common:
        groups.setdefault((ref[key]["verdict"], emu[key]["verdict"]), []).append(key)
    loose = groups.get(("refuse", "accept"), [])
    strict = groups.get(("accept", "refuse"), [])
    lines = [
        f"mixed host/device verdicts, {reference_name} (reference) against the flagos emulation",
        f"samples compared (op, argument on the host): {len(common)} "
        f"(ops: {len({k[0] for k in common})}; only in {reference_name}: {len(set(ref) - set(emu))}, "
        f"only in the emulation: {len(set(emu) - set(ref))})",
        f"skipped ops: {reference_name} {sum('skip' in r for r in reference)}, "
        f"emulation {sum('skip' in r for r in emulation)}",
        f"both refuse: {len(groups.get(('refuse', 'refuse'), []))}",
        f"both accept: {len(groups.get(('accept', 'accept'), []))}",
        f"{reference_name} refuses, emulation accepts: {len(loose)}",
    ]
    lines += [f"  {op} {arg} {ref[(op, arg)]['shape']}: {ref[(op, arg)]['error']}" for op, arg in loose]
    lines.append(f"{reference_name} accepts, emulation refuses: {len(strict)}")
    lines += [f"  {op} {arg} {emu[(op, arg)]['shape']}: {emu[(op, arg)]['error']}" for op, arg in strict]
    return "\n".join(lines), not loose


def _read(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.startswith("{")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--arm", choices=("cuda", "cpu", "flagos"), required=True)
    run.add_argument("--first", type=int, default=0)
    run.add_argument("--last", type=int, default=1 << 30)
    both = sub.add_parser("all")
    both.add_argument("--reference", choices=("cuda", "cpu"), default="cuda")
    both.add_argument("--workers", type=int, default=4, help="worker processes per arm (default 4)")
    both.add_argument("--limit", type=int, default=0, help="only the first N OpInfos (0: all)")
    both.add_argument("--out", help="also write the report here")
    both.add_argument("--jsonl", help="keep both arms' rows under this folder")
    sub.add_parser("count")  # how many OpInfos the workers go through
    cmp = sub.add_parser("compare")
    cmp.add_argument("reference")
    cmp.add_argument("emulation")
    args = parser.parse_args()
    if args.command == "run":
        return run_worker(args.arm, args.first, args.last)
    if args.command == "count":
        print(len(_ops()))
        return 0
    if args.command == "compare":
        report, ok = compare(_read(args.reference), _read(args.emulation), Path(args.reference).stem)
        print(report)
        return 0 if ok else 1
    count = int(
        subprocess.run(
            [sys.executable, __file__, "count"],
            capture_output=True,
            text=True,
            check=True,
            env=_worker_env(args.reference),
            cwd=tempfile.gettempdir(),
        ).stdout
    )
    count = min(count, args.limit) if args.limit else count
    start = time.monotonic()
    with ThreadPoolExecutor(2) as pool:  # the two arms side by side
        ref_rows, emu_rows = pool.map(lambda arm: run_arm(arm, args.workers, count), (args.reference, "flagos"))
    if args.jsonl:
        Path(args.jsonl).mkdir(parents=True, exist_ok=True)
        for name, rows in ((args.reference, ref_rows), ("flagos", emu_rows)):
            Path(args.jsonl, f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report, ok = compare(ref_rows, emu_rows, args.reference)
    report += f"\n{count} ops in {time.monotonic() - start:.0f} s, {args.workers} workers per arm"
    if args.reference == "cpu":
        report += "\n(smoke run: the host accepts every mix, so this is not the acceptance check; that is CUDA's)"
    print(report)
    if args.out:
        Path(args.out).write_text(report + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
