"""The node's knobs, declared once: every environment variable a mode reads, with its default. A mode takes them
from ``Knobs.read(os.environ)``; the table in ``--help`` is made from the same fields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields


def knob(default: str, help: str) -> str:
    return field(default=default, metadata={"help": help})  # type: ignore[return-value]


@dataclass(frozen=True)
class Knobs:
    OUT: str = knob("", "where a mode's files go (default reports/cuda-node; index: reports/index-node)")
    PYTHON: str = knob("python3", "the node's interpreter, with its torch")
    CXX: str = knob("", "the C++ compiler; one with a shared libstdc++ is chosen where this one has none")
    REUSE_BUILD: str = knob("0", "1: keep the wheel an earlier call built here")
    REBUILD: str = knob("0", "index: 1 builds the wheel even where the carried index has one")
    VARIANT: str = knob("cu130", "index: the wheels/<variant>/ index the node installs from")
    FLAGOS_ACCELERATOR: str = knob("cuda", "the runtime the installed torch_fl drives")
    ROUTES: str = knob("native flaggems", "smoke: the routes add.Tensor is checked on")
    SUITE_WORKERS: str = knob("", "full: pytest workers (default 8; index: none); 0: one process")
    PYTEST_ARGS: str = knob("", "full, index: more pytest arguments")
    BENCH_ARGS: str = knob("", "bench, full: arguments of python -m harness (index: --short)")
    BENCH_ACCELERATOR: str = knob("cuda", "bench: the accelerator the harness measures")
    TORCH_FL_COMMIT: str = knob("", "the commit the bench report names (default: the checkout's HEAD)")
    TIME_PAIRS: str = knob("5", "train, models, compile: alternating timing pairs or lockstep sets")
    OPINFO_SAMPLES: str = knob("1", "opinfo: samples per (operator, dtype)")
    OPINFO_WORKERS: str = knob("7", "opinfo: pytest workers per conf")
    OPINFO_TIMEOUT: str = knob("240", "opinfo: seconds per conf")
    MIXED_WORKERS: str = knob("4", "mixed: worker processes")
    MIXED_TIMEOUT: str = knob("300", "mixed: seconds")
    COMPILE_SUITE: str = knob("0", "compile: 1 runs tests/compile first; or the test files to run")
    LLM_SETS: str = knob("2", "llm: lockstep sets")
    DECODE_SETS: str = knob("3", "decode: lockstep sets")
    REPLAY_PARTS: str = knob("seed sweep verify", "replay: the parts to run")
    REPLAY_PAIRS: str = knob("30", "replay: seed pairs")
    SWEEP_PAIRS: str = knob("7", "replay: sweep pairs")
    SWEEP_BUDGET: str = knob("240", "replay: sweep seconds")
    SWEEP_OPS: str = knob("", "replay: the swept ops (default: replay_check.py's)")
    VERIFY_TESTS: str = knob("correctness", "replay: the tests run under verify and with the replay off")
    VERIFY_WORKERS: str = knob("7", "replay: pytest workers per arm")
    VERIFY_TIMEOUT: str = knob("400", "replay: seconds per arm")
    STEP_OPS_D: str = knob("256,1024", "stepops: d_model values")
    STEP_OPS_ARGS: str = knob("", "stepops: more arguments of step_ops.py")
    QUALIFY_DIR: str = knob("", "flaggems: the qualify run directory (default build/qualify-flaggems; resumes)")
    QUALIFY_WORKERS: str = knob("12", "flaggems: qualify workers")
    QUALIFY_EXTEND: str = knob("", "flaggems: a report (repo-relative) whose finished operators are carried")
    QUALIFY_RETIME: str = knob("", "flaggems: 1 runs the operators QUALIFY_EXTEND timed by an older method again")
    QUALIFY_AGAIN: str = knob("", "flaggems: operators (a,b) that run again though QUALIFY_EXTEND finished them")
    QUALIFY_TUNE_FOR: str = knob("", "flaggems: seconds of autotuning after which an operator's samples stop")
    QUALIFY_DTYPES: str = knob("float32,bfloat16,float16,int64,bool", "flaggems: dtypes qualified")
    FLAGGEMS_SECONDS: str = knob("570", "flaggems: the whole mode's seconds")
    CHECK_SECONDS: str = knob("220", "flaggems: seconds kept for the checks after qualify (0: qualify only)")
    FLAGGEMS_WORKLOADS: str = knob("", "flaggems: the real workloads on its confs (default: real_models.py's)")
    FLAGGEMS_ROUNDS: str = knob("8", "flaggems: timing rounds of the workloads on its confs (A/A beside)")
    ZOO_MODELS: str = knob("all", "zoo: the models (harness.zoo's names)")
    ZOO_MODES: str = knob("all", "zoo: train-eager, decode-eager, train-compiled, decode-reduce-overhead")
    ZOO_ARMS: str = knob("flagos,plain,plain-again", "zoo: the arms (plain-again is the A/A control)")
    ZOO_ROUNDS: str = knob("", "zoo: lockstep rounds (default: harness.zoo's)")
    ZOO_BUDGET: str = knob("360", "zoo: seconds after which no (model, mode) pair is set up")
    ZOO_CPU: str = knob("none", "zoo: the CPU every arm's timed turns run on (N, auto or none: harness.zoo --cpu)")
    PROFDIFF_MODELS: str = knob("qwen2-tied152k,mistral-sliding", "zoo, profdiff: the models profiled (none)")
    PROFDIFF_STEPS: str = knob("3", "zoo, profdiff: profiled steps per arm")
    ROUTER_COST_OPS: str = knob("all decode", "routercost: harness.router_cost's op sets (--ops), one run each")
    ROUTER_COST_ROUNDS: str = knob("15", "routercost: rounds of 200 calls per arm")
    GRAPH_PAIRS: str = knob("20", "graphs: pairs")
    GRAPH_SETS: str = knob("3", "graphs: lockstep sets of the training part")

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> Knobs:
        return cls(**{f.name: environ[f.name] for f in fields(cls) if environ.get(f.name)})

    @classmethod
    def table(cls) -> str:
        return "\n".join(f"  {f.name:18} {f.default!r:22} {f.metadata['help']}" for f in fields(cls))
