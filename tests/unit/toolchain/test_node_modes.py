"""The GPU node's modes (``python -m build_tools.node MODE``, launched by cuda_node.sh) under a recorder that writes
down each command instead of running it: what every mode runs, from where, and that the knobs reach it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from buildtest_support import REPO

from build_tools.command import Command
from build_tools.node import __main__ as cli
from build_tools.node.executor import Local, Recorder
from build_tools.node.modes import MODES

VENV_TORCH_FL = "/tmp/torch-fl-node/lib/python3.12/site-packages/torch_fl"
ANSWERS = {  # what a node answers the index mode's questions with
    "import _variant as v": "- pt211cu130 torch-2.11 2.11",
    'version("torch-fl")': "0.1.0+pt211cu130",
    "os.path.dirname(torch_fl.__file__)": VENV_TORCH_FL,
    "auditwheel_exclude": "libc10*.so* libtorch*.so*",
}
# What each mode runs after the common start: a command line of the plan must hold each of these
EXPECTED = {
    "smoke": [],
    "full": ["pytest -c pyproject.toml -q -p no:cacheprovider routing correctness -rs -n 8 --junitxml=OUT/junit.xml",
             "cd REPO/build_tools/bench && ", "-m harness --accelerator cuda --out OUT/bench > OUT/bench.txt"],
    "bench": ["-m harness --accelerator cuda --out OUT/bench > OUT/bench.txt"],
    "index": ["docker/scripts/build_wheel.py . /tmp/torch-fl-dist", "AUDITWHEEL_EXCLUDE='libc10*.so* libtorch*.so*'",
              "docker/scripts/repair_wheel.py /tmp/torch-fl-dist /tmp/torch-fl-repaired",
              "--index-url file:///tmp/torch-fl-index/cu130/torch-2.11/simple/ 'torch==2.11.*' torch-fl",
              "/tmp/torch-fl-node/bin/python -m pytest -c pyproject.toml -q -p no:cacheprovider routing correctness "
              "-rs --junitxml=OUT/junit.xml", "-m harness --accelerator cuda --out OUT/bench --short"],
    "train": ["build_tools/node/train_check.py run --arm cuda --config fp32-adamw-foreach )",
              "FLAGOS_BACKEND_CONFIG=/tmp/all-native.conf", "train_check.py compare /tmp/train-cuda.jsonl "
              "/tmp/train-native.jsonl >> OUT/train.txt", "train_check.py after-import >> OUT/train.txt"],
    "models": ["models/reference.py --device cuda --out /tmp/models-cuda.pt > OUT/models.txt",
               "FLAGOS_MODELS_REFERENCE=/tmp/models-cuda.pt", "-q -p no:cacheprovider models -rs",
               "steptime.py --compare /tmp/steps-cuda.jsonl /tmp/steps-flagos.jsonl /tmp/steps-cuda-again.jsonl"],
    "dist": ["-p no:cacheprovider distributed -rs > OUT/dist.txt",
             "-m torch.distributed.run --nproc-per-node 2 /tmp/torch-fl-tests/distributed/bandwidth.py"],
    "fsdp": ["cd /tmp && ", "build_tools/node/fsdp_check.py > OUT/fsdp.txt"],
    "checks": ["[together: 3 jobs]", "routing correctness -rs -n 8 --junitxml=OUT/junit.xml > OUT/pytest.txt",
               "FLAGOS_ACCELERATOR=cpu", "routing/exit_driver.py --runs 200 --parallel 16 --no-settle",
               "train_check.py run --arm cuda --config bf16-autocast --math-attention"],
    "opinfo": ["[together: 2 jobs]", "[timeout 240s]", "opinfo -n 7 --max-worker-restart=1000 --flagos-conf native",
               "--opinfo-samples 1 --opinfo-counts OUT/opinfo-cpu.json -rfE > OUT/opinfo-cpu.txt"],
    "mixed": ["[timeout 300s]", "mixed_device_check.py all --reference cuda --workers 4 --out OUT/mixed.txt"],
    "compile": ["compile_check.py all --pairs 5 > OUT/compile.txt", "compile_features_check.py all >> OUT/compile.txt"],
    "llm": ["cd REPO/build_tools/bench && ", "-m harness.llm all --sets 2 > OUT/llm.txt"],
    "decode": ["-rs compile/test_reduce_overhead.py compile/test_graph_runner.py > OUT/decode.txt",
               "-m harness.decode all --sets 3 >> OUT/decode.txt"],
    "replay": ["replay_check.py seed --pairs 30 --json OUT/replay-seed.json > OUT/replay.txt",
               "replay_check.py sweep --pairs 7 --budget 240 --json OUT/replay-sweep.json >> OUT/replay.txt",
               "replay_check.py conf --out /tmp/replay.conf", "[timeout 400s INT]",
               "FLAGOS_FLAGGEMS_VERIFY=1", "FLAGOS_FLAGGEMS_REPLAY=0", "correctness -n 7 -rfE --tb=line",
               "cp -r /tmp/verify-verify.txt OUT/verify.txt"],
    "stepops": ["step_ops.py --d-model 256,1024 > OUT/step_ops.txt"],
    "flaggems": ["record_workloads.py --samples REPO/build/qualify-flaggems/samples --provider flaggems "
                 "--resume REPO/build/qualify-flaggems --skip-if-recorded",
                 "-m torch_fl qualify --provider flaggems --out REPO/build/qualify-flaggems "
                 "--workers 12 --chunk 10 --dtypes float32,bfloat16,float16,int64,bool --timeout 120 --budget",
                 "flaggems_first.py --conf REPO/build/qualify-flaggems/qualified.conf",
                 "FLAGOS_BACKEND_CONFIG=REPO/build/qualify-flaggems/qualified.conf"],
    "flaggems-time": ["cp -r REPO/configs/backends_cuda_flaggems.conf "
                      "REPO/build/flaggems-time/backends_cuda_flaggems.conf",
                      "flaggems_first.py --conf REPO/build/flaggems-time/backends_cuda_flaggems.conf --tuned "
                      "REPO/build/flaggems-time/backends_cuda_flaggems_tuned.conf --rounds 8 --json "
                      "OUT/flaggems-first.json > OUT/flaggems.txt"],
    "interop": ["dlpack_check.py > OUT/interop.txt", "correctness/test_dlpack.py correctness/test_multiprocessing.py"],
    "graphs": ["correctness/test_capture_replay.py correctness/test_capture_replay_training.py > OUT/graphs.txt",
               "graphs_check.py train --pairs 20 --sets 3 >> OUT/graphs.txt"],
    "zoo": ["cd REPO/build_tools/bench && ", "-m harness.zoo --models all --modes all --arms flagos,plain,plain-again "
            "--budget 360 --profdiff qwen2-tied152k,mistral-sliding --profile-steps 3 --cpu none --out ",
            "/out > OUT/zoo.txt"],
    "profdiff": ["-m harness.profdiff --models qwen2-tied152k,mistral-sliding --steps 3 --out ", "/out > OUT/zoo.txt"],
    "routercost": ["cd REPO/build_tools/bench && ", "-m harness.router_cost --ops all --steps 0 --rounds 15 "
                   "> OUT/router_cost.txt", "-m harness.router_cost --ops decode --steps 0 --rounds 15 "
                   ">> OUT/router_cost.txt"],
}  # fmt: skip


def plan(mode: str, tmp_path: Path, **knobs: str) -> tuple[int, list[str]]:
    out = tmp_path / "out"
    environ = {"PATH": "/usr/bin", "OUT": str(out), **knobs}
    node = cli.node_of(mode, REPO, environ)
    recorder = Recorder(node.out, ANSWERS)
    status = cli.run(node, recorder)
    lines = [line.replace(f"{out}/", "OUT/").replace(f"OUT/{out.name}", "OUT").replace(str(REPO), "REPO")
             for line in recorder.lines]  # fmt: skip
    return status, [re.sub(r"PATH=/tmp/torch-fl-site/bin:/usr/bin ", "", line) for line in lines]


def test_every_mode_is_planned():
    assert set(EXPECTED) == set(MODES) == set(cli.WRITES)


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_each_mode_runs_its_steps(mode, tmp_path):
    status, lines = plan(mode, tmp_path)
    assert status == 0, "\n".join(lines)
    text = "\n".join(lines)
    for expected in EXPECTED[mode]:
        assert expected in text, f"{mode}: {expected!r} not in the plan:\n{text}"
    # every mode starts with the checks on the installed package; --check where pip installed it from the index
    assert any(line.endswith("-m torch_fl info" + (" --check" if mode == "index" else "") + " >> OUT/node.txt")
               for line in lines), text  # fmt: skip
    assert ("cp -r REPO/tests /tmp/torch-fl-tests" in text) == (mode != "smoke")


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_nothing_that_imports_torch_fl_runs_from_the_checkouts_root(mode, tmp_path):
    """From the root, `import torch_fl` would find the checkout's sources rather than the installed wheel: only
    the build, pip and the index tools (which read torch_fl/_variant.py by its folder) run there."""
    _, lines = plan(mode, tmp_path)
    at_root = [line for line in lines if line.lstrip("$( ").startswith("cd REPO &&")]
    allowed = ("-m pip ", "build_wheel.py", "repair_wheel.py", "import _variant", "from build_tools import")
    assert all(any(a in line for a in allowed) for line in at_root), "\n".join(at_root)


def test_the_native_build_is_reused_on_request_and_otherwise_fresh(tmp_path):
    _, fresh = plan("smoke", tmp_path)
    assert "rm -rf /tmp/torch-fl-wheel /tmp/torch-fl-build" in fresh
    assert any("-m pip wheel -v --no-build-isolation" in line and "CMAKE_UNITY_BUILD=OFF" in line for line in fresh)
    assert any("--require-hashes" in line and "docker/cuda/locks/cuda-node-py312.txt" in line for line in fresh)


def test_knobs_reach_the_commands(tmp_path):
    _, lines = plan("train", tmp_path, TIME_PAIRS="2")
    timed = [line for line in lines if "--time-steps 50" in line]
    assert len(timed) == 2 * 3, "two alternating rounds of cuda, flagos and flagos on the all-native conf"
    _, lines = plan("full", tmp_path, SUITE_WORKERS="0", PYTEST_ARGS="-k add", BENCH_ARGS="--runs 1")
    assert any("routing correctness -rs -n 0 --junitxml=OUT/junit.xml -k add" in line for line in lines)
    assert any(line.endswith("--out OUT/bench --runs 1 > OUT/bench.txt") for line in lines)
    _, lines = plan("replay", tmp_path, REPLAY_PARTS="seed")
    assert not any("sweep" in line or "verify" in line for line in lines)
    _, lines = plan("compile", tmp_path, COMPILE_SUITE="1")
    assert any("-q -p no:cacheprovider compile -rs > OUT/compile.txt" in line for line in lines)
    report = "configs/qualified/flaggems-5.0.2-cuda-torch2.11.json"
    _, lines = plan("flaggems", tmp_path, QUALIFY_EXTEND=report, QUALIFY_DTYPES="float32,bool", QUALIFY_TUNE_FOR="90")
    extended = [line for line in lines if f"--extend REPO/{report}" in line]
    assert len(extended) == 2, "the recording and the run both leave the report's finished operators out"
    assert "--skip-if-recorded --extend" in extended[0] and "--dtypes float32,bool" in extended[0]
    assert "--dtypes float32,bool" in extended[1] and "-m torch_fl qualify" in extended[1]
    assert "--tune-for 90" in extended[1]
    assert not any("--retime" in line for line in lines)
    _, lines = plan("flaggems", tmp_path, QUALIFY_EXTEND=report, QUALIFY_RETIME="1")
    assert sum("--retime" in line for line in lines) == 2, "the recording takes the retimed operators' calls too"
    _, lines = plan("flaggems", tmp_path, QUALIFY_EXTEND=report, QUALIFY_AGAIN="mul.Tensor")
    assert sum("--again mul.Tensor" in line for line in lines) == 2, "the recording takes its calls again too"


@pytest.mark.parametrize("stamp", ['{"operators": ["mul.Tensor", "sum"]}\n', "24 operators\n", None])
def test_the_operators_the_workloads_call_are_qualified_first(tmp_path, stamp):
    run = tmp_path / "run"
    if stamp is not None:  # record_workloads.py's stamp; an older one only counted the operators
        (run / "samples").mkdir(parents=True)
        (run / "samples" / ".workloads-recorded").write_text(stamp)
    _, lines = plan("flaggems", tmp_path, QUALIFY_DIR=str(run))
    qualify = next(line for line in lines if "-m torch_fl qualify" in line)
    assert ("--first mul.Tensor,sum" in qualify) == (stamp is not None and "{" in stamp), qualify
    assert qualify.count("--first") <= 1


def test_a_mode_that_needs_a_tool_the_node_lacks_says_which(tmp_path):
    class Lacking(Recorder):
        def run(self, cmd, **kw):
            super().run(cmd, **kw)
            return 1 if cmd.argv[-1] == "import expecttest" else 0

    node = cli.node_of("mixed", REPO, {"OUT": str(tmp_path)})
    recorder = Lacking(node.out, ANSWERS)
    assert cli.run(node, recorder) == 1
    assert "# mixed needs expecttest: carry its wheel in .whl/" in recorder.lines
    node = cli.node_of("flaggems", REPO, {"OUT": str(tmp_path)})
    recorder = Lacking(node.out, ANSWERS)
    assert cli.run(node, recorder) == 1, "the qualification's OpInfo recording imports it: asked before the call"
    assert not any("record_workloads.py" in line for line in recorder.lines)


@pytest.mark.parametrize(("status", "checked"), [(0, True), (3, True), (2, False)])
def test_the_flaggems_mode_checks_confs_only_where_qualify_wrote_them(tmp_path, status, checked):
    class Qualify(Recorder):
        def run(self, cmd, **kw):
            super().run(cmd, **kw)
            return status if "-m torch_fl qualify" in " ".join(map(str, cmd.argv)) else 0

    node = cli.node_of("flaggems", REPO, {"OUT": str(tmp_path)})
    recorder = Qualify(node.out, ANSWERS)
    assert cli.run(node, recorder) == (0 if checked else status)
    assert any("flaggems_first.py" in line for line in recorder.lines) == checked


def test_the_launcher_is_thin():
    script = (REPO / "build_tools" / "node" / "cuda_node.sh").read_text()
    code = [line for line in script.splitlines() if line.strip() and not line.startswith("#")]
    assert code[-1] == 'exec "${PYTHON:-python3}" -m build_tools.node "${@:-full}"'
    assert len(code) <= 4, code


def test_the_local_executor_logs_filters_and_stops(tmp_path):
    ex = Local(tmp_path, {"PATH": "/usr/bin:/bin"})
    script = "print('kept'); print('x UserWarning: y'); import sys; sys.exit(3)"
    cmd = Command("t", (sys.executable, "-c", script))
    assert ex.run(cmd, log="a.txt", show=False, quiet_noise=True) == 3
    assert (tmp_path / "a.txt").read_text() == "kept\n"
    ex.run(cmd, log="a.txt", append=True, show=False)
    assert (tmp_path / "a.txt").read_text() == "kept\nkept\nx UserWarning: y\n"
    sleeper = Command("s", (sys.executable, "-c", "import time; time.sleep(30)"))
    assert ex.run(sleeper, show=False, timeout=0.5, interrupt=True) == 124
    jsonl = tmp_path / "r.jsonl"
    assert ex.output(Command("o", (sys.executable, "-c", "print('{}')")), append_to=jsonl) == "{}"
    assert jsonl.read_text() == "{}\n"
    assert ex.together([lambda: 0, lambda: 5]) == [0, 5]
