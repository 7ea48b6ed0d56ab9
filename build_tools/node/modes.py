"""What each mode runs after the common start (__main__.py: install, checks), written against an ``Executor``.
A mode returns its status: 0 when every check it makes passed. The table in ``--help`` says what each writes."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from .executor import Executor
from .logged import Logged, last_line, needs
from .model_modes import flaggems, flaggems_time, models
from .steps import ALL_NATIVE, TESTS, Node


def suites(node: Node, ex: Executor) -> int:
    """full, index and bench: the routing and correctness suites (not for bench), then the benchmark."""
    status, t0 = 0, time.monotonic()
    if node.mode != "bench":
        workers = node.workers
        args = [
            "routing",
            "correctness",
            "-rs",
            *(["-n", workers] if workers else []),
            f"--junitxml={node.out}/junit.xml",
        ]
        status = ex.run(node.suite(*args, *shlex.split(node.knobs.PYTEST_ARGS)), log="pytest.txt")
        took = round(time.monotonic() - t0)
        ex.note(f"routing and correctness suites: {took} s: {last_line(node.out / 'pytest.txt')}")
        t0 = time.monotonic()
    # Straight into OUT: the bench rewrites its reports after every part, and what is under OUT comes back even
    # from a call cut at its time limit. The report names the checkout's HEAD, which only the caller can ask.
    commit = node.knobs.TORCH_FL_COMMIT or ex.output(node.command("HEAD", "git", "-C", node.repo, "rev-parse", "HEAD"))
    args = [
        "--accelerator",
        node.knobs.BENCH_ACCELERATOR,
        "--out",
        str(node.out / "bench"),
        *shlex.split(node.bench_args),
    ]
    rc = ex.run(node.harness("harness", *args, TORCH_FL_COMMIT=commit), log="bench.txt")
    if node.mode == "index":  # at most 7 files come back
        ex.remove(node.out / "bench" / "bench.png")
    ex.note(f"bench: {round(time.monotonic() - t0)} s")
    return status or rc


def checks(node: Node, ex: Executor) -> int:
    """The suites and the exit check while the model suite runs (the machine's cores are many)."""
    junit = f"--junitxml={node.out}/junit.xml"

    def exits() -> int:
        driver = TESTS / "routing" / "exit_driver.py"
        for settle in ("--no-settle", ""):
            argv = [driver, "--runs", "200", "--parallel", "16", *([settle] if settle else [])]
            line = ex.output(node.python("exit check", *argv, FLAGOS_ACCELERATOR="cpu")).splitlines()
            ex.note(f"exit_driver {settle}: {line[-1] if line else ''}", "exit.txt")
        return 0

    def models_then_math() -> int:
        rc = models(node, ex)
        log = Logged(ex, "models.txt")
        log.started = True  # after the model suite's own lines
        ex.remove(Path("/tmp/math-cuda.jsonl"), Path("/tmp/math-flagos.jsonl"))
        for config in ("bf16-autocast", "fp16-autocast-gradscaler"):
            arm = ("run", "--arm", "cuda", "--config", config, "--math-attention")
            ex.output(node.program("train_check.py", *arm), append_to=Path("/tmp/math-cuda.jsonl"))
            arm = ("run", "--arm", "flagos", "--config", config)
            native = node.program("train_check.py", *arm, FLAGOS_BACKEND_CONFIG=str(ALL_NATIVE))
            ex.output(native, append_to=Path("/tmp/math-flagos.jsonl"))
        log.say("flagos (every op native) against plain cuda with math attention:")
        compare = ("compare", "/tmp/math-cuda.jsonl", "/tmp/math-flagos.jsonl")
        return rc or log.run(node.program("train_check.py", *compare))

    suite = node.suite("routing", "correctness", "-rs", "-n", "8", junit)
    rcs = ex.together([lambda: ex.run(suite, log="pytest.txt", show=False), exits, models_then_math])
    for line in (node.out / "pytest.txt").read_text().splitlines()[-3:] if (node.out / "pytest.txt").is_file() else []:
        print(line)
    return int(any(rcs))


def dist(node: Node, ex: Executor) -> int:
    """2 GPUs: the distributed suite, then the all_reduce bandwidth against plain NCCL; a failing suite stops."""
    log = Logged(ex, "dist.txt")
    bandwidth = ("-m", "torch.distributed.run", "--nproc-per-node", "2", TESTS / "distributed" / "bandwidth.py")
    return log.run(node.suite("distributed", "-rs")) or log.run(node.python("bandwidth", *bandwidth))


def fsdp(node: Node, ex: Executor) -> int:
    return Logged(ex, "fsdp.txt").run(node.program("fsdp_check.py"))


def mixed(node: Node, ex: Executor) -> int:
    """Fails where the emulation takes a host tensor that plain cuda (the reference, no torch_fl) refuses."""
    if not needs(node, ex, "expecttest", "mixed needs expecttest: carry its wheel in .whl/"):
        return 1
    k = node.knobs
    argv = ("all", "--reference", "cuda", "--workers", k.MIXED_WORKERS, "--out", node.out / "mixed.txt")
    return ex.run(node.program("mixed_device_check.py", *argv), timeout=float(k.MIXED_TIMEOUT))


def opinfo(node: Node, ex: Executor) -> int:
    """The op database under the native and the cpu-default conf, side by side."""
    why = "opinfo needs expecttest and pytest-xdist: carry their wheels in .whl/ (pure Python)"
    if not needs(node, ex, "expecttest, xdist", why):
        return 1
    k = node.knobs

    def conf(name: str) -> Callable[[], int]:
        args = ("opinfo", "-n", k.OPINFO_WORKERS, "--max-worker-restart=1000", "--flagos-conf", name)
        counts = (
            "--opinfo-samples",
            k.OPINFO_SAMPLES,
            "--opinfo-counts",
            str(node.out / f"opinfo-{name}.json"),
            "-rfE",
        )
        cmd = node.suite(*args, *counts)
        return lambda: ex.run(cmd, log=f"opinfo-{name}.txt", show=False, timeout=float(k.OPINFO_TIMEOUT))

    rcs = ex.together([conf("native"), conf("cpu")])
    for name in ("native", "cpu"):
        path = node.out / f"opinfo-{name}.txt"
        lines = path.read_text().splitlines() if path.is_file() else []
        start = next((i for i, line in enumerate(lines) if "opinfo counts" in line), len(lines))
        end = next((i for i, line in enumerate(lines) if line.startswith("counts written") and i >= start), start)
        print("\n".join([*lines[start : end + 1], *lines[-1:]]))
    return int(any(rcs))


def compile_(node: Node, ex: Executor) -> int:
    """torch.compile flagos against cuda in lockstep sets, and Inductor's features; COMPILE_SUITE first."""
    log, tests = Logged(ex, "compile.txt"), node.knobs.COMPILE_SUITE
    tests = "compile" if tests == "1" else tests
    rc = log.run(node.suite(*tests.split(), "-rs")) if tests != "0" else 0
    rc |= log.run(node.program("compile_check.py", "all", "--pairs", node.knobs.TIME_PAIRS))
    return rc | log.run(node.program("compile_features_check.py", "all"))


def llm(node: Node, ex: Executor) -> int:
    return Logged(ex, "llm.txt").run(node.harness("harness.llm", "all", "--sets", node.knobs.LLM_SETS))


def decode(node: Node, ex: Executor) -> int:
    log = Logged(ex, "decode.txt")
    rc = log.run(node.suite("-rs", "compile/test_reduce_overhead.py", "compile/test_graph_runner.py"))
    return rc | log.run(node.harness("harness.decode", "all", "--sets", node.knobs.DECODE_SETS))


def zoo(node: Node, ex: Executor) -> int:
    """zoo: the model zoo flagos against cuda and cuda again (harness.zoo), then the profile diff of
    PROFDIFF_MODELS; profdiff: the profile diff alone (harness.profdiff). The reports go straight into OUT and are
    rewritten after every pair, so a call cut at its limit leaves what it measured."""
    k = node.knobs
    commit = k.TORCH_FL_COMMIT or ex.output(node.command("HEAD", "git", "-C", node.repo, "rev-parse", "HEAD"))
    if node.mode == "zoo":
        args = ["--models", k.ZOO_MODELS, "--modes", k.ZOO_MODES, "--arms", k.ZOO_ARMS, "--budget", k.ZOO_BUDGET]
        profiled = "" if k.PROFDIFF_MODELS == "none" else k.PROFDIFF_MODELS  # an empty knob reads as unset
        args += ["--profdiff", profiled, "--profile-steps", k.PROFDIFF_STEPS]
        args += ["--rounds", k.ZOO_ROUNDS] if k.ZOO_ROUNDS else []
        args += ["--cpu", k.ZOO_CPU]
        module = "harness.zoo"
    else:
        args, module = ["--models", k.PROFDIFF_MODELS, "--steps", k.PROFDIFF_STEPS], "harness.profdiff"
    cmd = node.harness(module, *args, "--out", str(node.out), TORCH_FL_COMMIT=commit)
    return Logged(ex, "zoo.txt").run(cmd)


def interop(node: Node, ex: Executor) -> int:
    """DLPack of a flagos tensor as a CUDA capsule, then the DLPack, queue-sharing and sparse tests."""
    log = Logged(ex, "interop.txt", noise=False)
    tests = ("correctness/test_dlpack.py", "correctness/test_multiprocessing.py", "correctness/test_layouts.py")
    return log.run(node.program("dlpack_check.py")) or log.run(node.suite("-rs", *tests))


def graphs(node: Node, ex: Executor) -> int:
    """The parts that take seconds first, the training part's lockstep sets (most of a call) last."""
    log, k = Logged(ex, "graphs.txt"), node.knobs
    rc = log.run(node.suite("-rs", "correctness/test_capture_replay.py", "correctness/test_capture_replay_training.py"))
    for part in ("add", "rng", "provider", "train"):
        rc |= log.run(node.program("graphs_check.py", part, "--pairs", k.GRAPH_PAIRS, "--sets", k.GRAPH_SETS))
    return rc


def routercost(node: Node, ex: Executor) -> int:
    """The router's host cost per call (harness.router_cost), flagos against plain cuda in one process, for each op
    set of ROUTER_COST_OPS. Single ops only: they need no autograd, so plain cuda shares the flagos process; the
    harness's training step does, and a flagos process cannot run plain cuda's (docs/bench.md)."""
    k, log = node.knobs, Logged(ex, "router_cost.txt", noise=False)
    rc = 0
    for ops in k.ROUTER_COST_OPS.split():
        rc |= log.run(
            node.harness("harness.router_cost", "--ops", ops, "--steps", "0", "--rounds", k.ROUTER_COST_ROUNDS)
        )
    return rc


def stepops(node: Node, ex: Executor) -> int:
    args = ("--d-model", node.knobs.STEP_OPS_D, *shlex.split(node.knobs.STEP_OPS_ARGS))
    return Logged(ex, "step_ops.txt").run(node.program("step_ops.py", *args))


def replay(node: Node, ex: Executor) -> int:
    """The replay's seed pairs and op sweep, then the correctness suite on the swept ops under verify and with the
    replay off, both arms at once (each worker compiles FlagGems' kernels itself); reports, never fails there."""
    k, log = node.knobs, Logged(ex, "replay.txt")
    parts = k.REPLAY_PARTS.split()
    rc = 0
    if "seed" in parts:
        rc |= log.run(
            node.program("replay_check.py", "seed", "--pairs", k.REPLAY_PAIRS, "--json", node.out / "replay-seed.json")
        )
    if "sweep" in parts:
        ops = ("--ops", k.SWEEP_OPS) if k.SWEEP_OPS else ()
        sweep = (
            "sweep",
            "--pairs",
            k.SWEEP_PAIRS,
            "--budget",
            k.SWEEP_BUDGET,
            *ops,
            "--json",
            node.out / "replay-sweep.json",
        )
        rc |= log.run(node.program("replay_check.py", *sweep))
    if rc or "verify" not in parts:
        return rc
    ex.run(node.program("replay_check.py", "conf", "--out", "/tmp/replay.conf"))
    arms = {"verify": {"FLAGOS_FLAGGEMS_VERIFY": "1"}, "python": {"FLAGOS_FLAGGEMS_REPLAY": "0"}}

    def arm(name: str) -> Callable[[], int]:
        # --tb=line, as full tracebacks outlasted the limit once; SIGINT at the limit, so a cut run still prints
        # the -rfE summary the failures are counted from
        args = (*k.VERIFY_TESTS.split(), "-n", k.VERIFY_WORKERS, "-rfE", "--tb=line")
        cmd = node.suite(*args, FLAGOS_BACKEND_CONFIG="/tmp/replay.conf", **arms[name])
        return lambda: ex.run(
            cmd, log=f"/tmp/verify-{name}.txt", show=False, timeout=float(k.VERIFY_TIMEOUT), interrupt=True
        )

    rcs = dict(zip(arms, ex.together([arm(name) for name in arms]), strict=True))
    failed: dict[str, set[str]] = {}
    for name in arms:
        lines = (
            Path(f"/tmp/verify-{name}.txt").read_text().splitlines()
            if Path(f"/tmp/verify-{name}.txt").is_file()
            else []
        )
        failed[name] = {line.split(" - ")[0] for line in lines if line.startswith(("FAILED", "ERROR"))}
        mismatches = sum("FLAGOS_FLAGGEMS_VERIFY: the replay" in line for line in lines)
        log.say(f"correctness suite, swept ops on flaggems, {name} (exit {rcs[name]}; 124: cut by the time limit): "
                f"{lines[-1] if lines else ''}")  # fmt: skip
        log.say(f"  verify mismatches: {mismatches}")
    log.say(f"failing only with the replay: {' '.join(sorted(failed['verify'] - failed['python']))}")
    ex.copy(Path("/tmp/verify-verify.txt"), node.out / "verify.txt")
    return 0


TRAIN_CONFIGS = ("fp32-adamw-foreach", "fp32-adamw-fused", "bf16-autocast", "fp16-autocast-gradscaler")


def train(node: Node, ex: Executor) -> int:
    """Training flagos against cuda (shipped conf and every op native), then alternating step times."""
    log, native = Logged(ex, "train.txt"), {"FLAGOS_BACKEND_CONFIG": str(ALL_NATIVE)}
    files = {arm: Path(f"/tmp/train-{arm}.jsonl") for arm in ("cuda", "flagos", "native")}
    ex.remove(*files.values())
    for config in TRAIN_CONFIGS:
        for arm, env in (("cuda", {}), ("flagos", {}), ("native", native)):
            run = ("run", "--arm", "cuda" if arm == "cuda" else "flagos", "--config", config)
            ex.output(node.program("train_check.py", *run, **env), append_to=files[arm])
    log.say("flagos (shipped cuda conf) against plain cuda:")
    rc = log.run(node.program("train_check.py", "compare", files["cuda"], files["flagos"]))
    log.say("flagos (every op native) against plain cuda:")
    rc |= log.run(node.program("train_check.py", "compare", files["cuda"], files["native"]))
    log.run(node.program("train_check.py", "after-import"))
    for _ in range(int(node.knobs.TIME_PAIRS)):  # alternating processes; median ms/step of each
        for arm, env in (("cuda", {}), ("flagos", {}), ("native", native)):
            run = ("run", "--arm", "cuda" if arm == "cuda" else "flagos", "--config", "fp32-adamw-foreach")
            text = ex.output(node.program("train_check.py", *run, "--time-steps", "50", **env))
            ms = json.loads(text)["ms_per_step"] if text else float("nan")
            log.say(f"step ms {arm} {round(ms, 3)}")
    return rc


def smoke(node: Node, ex: Executor) -> int:
    return 0  # the common start's checks are the whole mode


MODES: dict[str, Callable[[Node, Executor], int]] = {
    "smoke": smoke, "full": suites, "bench": suites, "index": suites, "train": train, "models": models,
    "dist": dist, "fsdp": fsdp, "checks": checks, "opinfo": opinfo, "mixed": mixed, "compile": compile_,
    "llm": llm, "decode": decode, "replay": replay, "stepops": stepops, "flaggems": flaggems,
    "flaggems-time": flaggems_time, "interop": interop, "graphs": graphs, "zoo": zoo, "profdiff": zoo,
    "routercost": routercost,
}  # fmt: skip
