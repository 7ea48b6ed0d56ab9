#!/usr/bin/env bash
# Builds torch_fl natively on a CUDA node with torch but no Docker (a lent GPU machine), installs the wheel beside
# the node's torch and runs MODE from a copy of tests/, so that the installed package is what runs. A lent machine
# hands back few files: a mode writes at most 8 to $OUT (reports/cuda-node), and fails when one of its checks fails.
#   [REUSE_BUILD=1] [PYTHON=python3] [CXX=g++] bash build_tools/node/cuda_node.sh [MODE]
# REUSE_BUILD=1 keeps the wheel an earlier call built here; else build.log. Every mode starts with smoke: node.txt.
# MODE     what it runs, from tests/ and build_tools/ (knobs=defaults)                           files it writes
# smoke    torch_fl info, a matmul, add on ROUTES="native flaggems"; FLAGOS_ACCELERATOR=cuda              node.txt
# full     routing + correctness suites (SUITE_WORKERS=8; 0: one process; PYTEST_ARGS), then bench  pytest.txt junit.xml
# bench    the route A/B bench (BENCH_ARGS, BENCH_ACCELERATOR=cuda, TORCH_FL_COMMIT=HEAD)      bench.txt bench/*
# index    full into reports/index-node, no workers unless SUITE_WORKERS, BENCH_ARGS=--short, torch-fl pip-installed into a venv
#          from the carried wheels/$VARIANT/ (cu130) index as on a cluster; lacking the node's wheel (or REBUILD=1),
#          it builds that the builder's way and indexes a copy. build/node-wheels/ (the tools) joins .whl/
# train    training flagos against cuda (train_check.py), TIME_PAIRS=5 alternating step times        train.txt
# models   the model suite against cuda and its repeat (A/A), TIME_PAIRS=5 alternating step times   models.txt
# dist     2 GPUs: the distributed suite, then all_reduce bandwidth against plain NCCL                  dist.txt
# fsdp     FSDP2, DTensor, TP and DCP on a 1-rank flagos mesh against the host (fsdp_check.py)          fsdp.txt
# checks   models beside the suites (8 workers), the exit check under load  models.txt pytest.txt junit.xml exit.txt
# opinfo   the op database under the native and the cpu-default conf side by side; OPINFO_SAMPLES=1,
#          OPINFO_WORKERS=7 per conf, OPINFO_TIMEOUT=240                      opinfo-{native,cpu}.{txt,json}
# mixed    fails where the emulation takes a host tensor cuda refuses (MIXED_WORKERS=4, MIXED_TIMEOUT=300) mixed.txt
# compile  torch.compile flagos against cuda, TIME_PAIRS=5 lockstep sets, Inductor features; COMPILE_SUITE=1
#          first runs tests/compile, COMPILE_SUITE="compile/test_x.py ..." those files           compile.txt
# llm      a compiled HF Llama step flagos against cuda (harness.llm), LLM_SETS=2 lockstep sets         llm.txt
# decode   the reduce-overhead tests, then greedy decoding (harness.decode), DECODE_SETS=3 sets      decode.txt
# replay   REPLAY_PARTS="seed sweep verify" of replay_check.py: seed pairs (REPLAY_PAIRS=30), op sweep (SWEEP_PAIRS=7,
#          SWEEP_BUDGET=240, SWEEP_OPS="exp out=,..."), the correctness suite or VERIFY_TESTS on the swept ops
#          under verify and with the replay off (VERIFY_WORKERS=7, VERIFY_TIMEOUT=400; reports, never fails)
#                                                     replay.txt replay-seed.json replay-sweep.json verify.txt
# stepops  the eager step's ATen calls replayed on flagos and cuda, STEP_OPS_D=256,1024 STEP_OPS_ARGS=   step_ops.txt
# flaggems record workloads, qualify flaggems (QUALIFY_WORKERS=12, QUALIFY_DTYPES=float32,bfloat16) within
#          FLAGGEMS_SECONDS=570 less CHECK_SECONDS=220 (its 3, ops pending, is no failure), workloads and models
#          on its conf; QUALIFY_DIR=build/qualify-flaggems resumes  flaggems.txt qualify-report.{json,md}
#                                                                     qualify-events.jsonl flaggems-first.json
# interop  DLPack of a flagos tensor as a CUDA capsule, then the DLPack, queue-sharing and sparse tests  interop.txt
# graphs   capture tests, then graphs_check.py add rng provider train (GRAPH_PAIRS=20, GRAPH_SETS=3)  graphs.txt
# zoo      the model zoo flagos against cuda and cuda again (harness.zoo): ZOO_MODELS=all ZOO_MODES=all
#          ZOO_ARMS=flagos,plain,plain-again ZOO_ROUNDS=8 ZOO_BUDGET=360 (s: no pair is set up after it), then the
#          profile diff of PROFDIFF_MODELS=qwen2-tied152k,mistral-sliding ("": none), PROFDIFF_STEPS=3
#                                                      zoo.txt zoo.json zoo.md zoo.png profdiff.json profdiff.md
# profdiff the profile diff alone (harness.profdiff): PROFDIFF_MODELS, PROFDIFF_STEPS      zoo.txt profdiff.{json,md}
set -euo pipefail
mode=${1:-full}
case $mode in  # a misspelt mode stops here, not in a long run of another one
  smoke | full | bench | index | train | models | dist | fsdp | checks | opinfo | mixed | compile | llm) ;;
  decode | replay | stepops | flaggems | interop | graphs | zoo | profdiff) ;;
  *) echo "cuda_node.sh: unknown mode '$mode'; the table at the top of $0 lists the modes" >&2; exit 2 ;;
esac
workers=${SUITE_WORKERS:-8} wheels=(.whl/*.whl) locked=
if [ "$mode" = index ]; then  # full's defaults but these; build/node-wheels/ first, no lock
  OUT=${OUT:-reports/index-node} BENCH_ARGS=${BENCH_ARGS:---short} variant=${VARIANT:-cu130} check=--check
  workers=${SUITE_WORKERS:-}
  wheels=(build/node-wheels/*.whl .whl/*.whl) dist=/tmp/torch-fl-dist
fi
OUT=${OUT:-reports/cuda-node}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
repo=$(pwd)
site=/tmp/torch-fl-site
rm -rf "$site" /tmp/torch-fl-index /tmp/torch-fl-node
export PYTHONUNBUFFERED=1
: >"$OUT/node.txt"
log() { echo "$*" | tee -a "$OUT/node.txt"; }

# Extra wheels the node lacks travel in .whl/: the build backend by hash from the node lock (the cuda builder's pins,
# build_tools/locks.py), the test tools (flag_gems and its deps) as they are. A wheel in two folders is taken once.
if [ "$mode" != index ]; then
  node_lock=docker/cuda/locks/cuda-node-py312.txt
  locked=$(sed -n 's/^\([A-Za-z0-9._-]*\)==.*/\1/p' "$node_lock" | tr 'A-Z-' 'a-z_')
  "$PY" -m pip install -q --no-index --find-links .whl --require-hashes --no-deps --no-compile --no-cache-dir \
    --target "$site" -r "$node_lock" \
    || { echo "the build backend of $node_lock is not in .whl/: pip download --no-deps -r $node_lock -d .whl"; exit 1; }
fi
extra=()
for w in "${wheels[@]}"; do
  [ -e "$w" ] || continue
  [[ " ${extra[*]##*/} " != *" ${w##*/} "* ]] || continue
  grep -qx "$(basename "$w" | cut -d- -f1 | tr 'A-Z-' 'a-z_')" <<<"$locked" || extra+=("$w")
done
[ ${#extra[@]} -eq 0 ] \
  || "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${extra[@]}"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH"

# A g++ with a shared libstdc++ (CMakeLists.txt says why); images for nvcc may put one without it first.
for cxx in ${CXX:-} g++ /usr/bin/g++ c++; do
  lib=$(command -v "$cxx" >/dev/null && "$cxx" -print-file-name=libstdc++.so || true)
  [ "${lib#/}" != "$lib" ] || continue
  [ -n "${CXX:-}" ] && [ "$cxx" != "$CXX" ] && echo "CXX=$CXX has no shared libstdc++: using $cxx"
  CXX=$(command -v "$cxx") && export CXX && break
done
if [ -n "${CXX:-}" ]; then echo "C++ compiler: $CXX ($("$CXX" --version | head -1))"; fi

start=$(date +%s)
if [ "$mode" = index ]; then
  [ "${REUSE_BUILD:-0}" = 1 ] || rm -rf "$dist" /tmp/torch-fl-repaired
  index=$repo/wheels/$variant have_wheel=0
  # What this node needs: its torch line in the project's variant scheme, and the carried wheel of that line whose
  # tags this Python takes (the cp3X-abi3 wheel serves every CPython from 3.X on), "-" where there is none.
  read -r fits label page line < <(TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" -c 'import sys, torch
from pathlib import Path
from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename
sys.path.append("torch_fl"); import _variant as v; want = v.make(torch.__version__, sys.argv[1]); here = set(sys_tags())
found = [w.name for w in sorted(Path(sys.argv[2]).glob(f"torch_fl-*+{want.label}-*.whl"))
         if parse_wheel_filename(w.name)[3] & here]
print(found[-1] if found else "-", want.label, v.line_page(want.line), "%d.%d" % want.line)' "$variant" "$index")
  pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  log "node: $("$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__,
    "gpus", torch.cuda.device_count())'); wants +$label for Python $pyver"
  [ "${REBUILD:-0}" != 1 ] && [ "$fits" != - ] && have_wheel=1
  if [ "$have_wheel" = 1 ] && [ -f "$index/$page/simple/torch-fl/index.html" ]; then
    log "index: the carried wheels/$variant has $fits on $page/"
  else
    if [ "$have_wheel" = 1 ]; then  # an index of another layout: the wheel is there, its line's page is not
      log "index: the carried wheels/$variant has $fits but no $page/ page; indexing a copy"
    else
      log "index: the carried wheels/$variant has no +$label wheel for Python $pyver ($(cd "$index" 2>/dev/null \
        && ls torch_fl-*.whl 2>/dev/null | tr '\n' ' ')); building it as the builder does"
      if [ "${REUSE_BUILD:-0}" = 1 ] && compgen -G "/tmp/torch-fl-repaired/*.whl" >/dev/null; then
        log "build: reusing $(cd /tmp/torch-fl-repaired && ls ./*.whl) (REUSE_BUILD=1)"
      else
        excludes=$("$PY" -c 'import sys; from build_tools import matrix
print(*next(t for t in matrix.load().toolchains.values() if t.variant == sys.argv[1]).auditwheel_exclude)' "$variant")
        { VARIANT=$variant BUILD_ENV=CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$PY" docker/scripts/build_wheel.py . "$dist" \
          && AUDITWHEEL_EXCLUDE=$excludes "$PY" docker/scripts/repair_wheel.py "$dist" /tmp/torch-fl-repaired
        } >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "build failed: $OUT/build.log"; exit 1; }
        log "build + repair: $(( $(date +%s) - start )) s: $(cd /tmp/torch-fl-repaired && ls ./*.whl)"
      fi
      grep -A12 "(repaired)" /tmp/torch-fl-repaired/auditwheel-show.txt >>"$OUT/node.txt" || true
    fi
    carried=$index index=/tmp/torch-fl-index/$variant
    mkdir -p "$index" && { cp -r "$carried/." "$index/" 2>/dev/null || true; }
    [ "$have_wheel" = 1 ] || cp /tmp/torch-fl-repaired/*.whl "$index/"
    "$PY" -c 'import sys; from pathlib import Path; from build_tools import index
r = index.build(Path(sys.argv[1]), sys.argv[2]); print("index:", ", ".join(d.filename for d in r.dists))' \
      "$index" "$variant" | tee -a "$OUT/node.txt"
  fi
  # The node: a venv over the system site-packages with torch, no torch-fl; the suites and bench run on it. A venv $PY's
  # site-packages (torch) come through a .pth file. Without pip, no setuptools shadows torch's; $PY's pip fills it.
  node_py=/tmp/torch-fl-node/bin/python
  "$PY" -m venv --system-site-packages --without-pip /tmp/torch-fl-node
  node_pip=("$PY" -m pip --python "$node_py")
  if ! "${node_pip[@]}" --version >/dev/null 2>&1; then
    rm -rf /tmp/torch-fl-node && "$PY" -m venv --system-site-packages /tmp/torch-fl-node
    node_pip=("$node_py" -m pip)
  fi
  "$PY" -c 'import sys, sysconfig; sys.prefix != sys.base_prefix and print(sysconfig.get_paths()["purelib"])' \
    >"$("$node_py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch-site.pth"
  log "install: pip install \"torch==$line.*\" torch-fl --index-url file://$index/$page/simple/"
  node_install() {
    (cd /tmp && PIP_CONFIG_FILE=/dev/null "${node_pip[@]}" install --no-cache-dir "$@" \
       --index-url "file://$index/$page/simple/" "torch==$line.*" torch-fl) >/tmp/torch-fl-pip.log 2>&1
  }
  if ! node_install; then  # torch's own requirements, which an offline node may lack and the index cannot give
    tail -3 /tmp/torch-fl-pip.log | tee -a "$OUT/node.txt"
    log "WARNING: the pip line failed on torch's own requirements (above); installing torch-fl with --no-deps"
    node_install --no-deps
  fi
  tail -2 /tmp/torch-fl-pip.log | tee -a "$OUT/node.txt"
  PY=$node_py
elif [ "${REUSE_BUILD:-0}" = 1 ] && compgen -G "/tmp/torch-fl-wheel/*.whl" >/dev/null; then
  echo "build: reusing $(ls /tmp/torch-fl-wheel)"
else
  # A fresh CMake cache, since it would keep an earlier compiler; file by file rather than in unity batches, since
  # the node's cores make it cheap and each source then compiles on its own.
  rm -rf /tmp/torch-fl-wheel /tmp/torch-fl-build
  "$PY" -m pip wheel -v --no-build-isolation --no-deps --config-settings=build-dir=/tmp/torch-fl-build \
    --config-settings=cmake.define.CMAKE_UNITY_BUILD=OFF -w /tmp/torch-fl-wheel . >"$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; echo "build failed: full log in $OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s: $(ls /tmp/torch-fl-wheel)"
fi
[ "$mode" = index ] || "$PY" -m pip install -q --no-deps --no-compile --target "$site" /tmp/torch-fl-wheel/*.whl

cd /tmp  # import the installed package, never the checkout
export FLAGOS_ACCELERATOR=${FLAGOS_ACCELERATOR:-cuda}
if [ "$mode" = index ]; then  # the torch-fl that imports is the pip line's, in the venv
  installed=$("$PY" -c 'from importlib.metadata import version; print(version("torch-fl"))')
  where=$("$PY" -c 'import torch_fl, os; print(os.path.dirname(torch_fl.__file__))')
  log "installed: torch-fl $installed at $where"
  [[ $installed = "0.1.0+$label" && $where = /tmp/torch-fl-node/* ]] \
    || { log "FAIL: the node venv must hold torch-fl 0.1.0+$label (another torch-fl on the path shadows it?)"; exit 1; }
fi
node_checks() {
  "$PY" -m torch_fl info ${check:+"$check"}
  [ "$mode" = index ] || "$PY" - <<'PY'
import torch, torch_fl
x = torch.randn(1000, 1000).to("flagos")
y = (x @ x.T).relu().sum()
ref = (x.cpu() @ x.cpu().T).relu().sum()
print("smoke: device", x.device, "result", float(y), "reference", float(ref))
assert torch.allclose(y.cpu(), ref, rtol=1e-3), (y, ref)
print("memory_allocated", torch.flagos.memory_allocated())
PY
  for route in ${ROUTES:-native flaggems}; do
    FLAGOS_OP_add__Tensor=$route FLAGOS_LOG=dispatch "$PY" -c "
import torch, torch_fl
a = torch.randn(101, 3, 320); b = torch.randn(101, 3, 320)
out = a.to('flagos') + b.to('flagos'); torch.flagos.synchronize()
assert torch.allclose(out.cpu(), a + b), 'mismatch'
print('add ok on route $route')" 2>&1 | grep -E "add.Tensor|add ok|Error|error"
  done
}
node_checks 2>&1 | tee -a "$OUT/node.txt"
cd "$repo"
[ "$mode" = smoke ] && exit 0

tests_copy=/tmp/torch-fl-tests
node=$repo/build_tools/node harness_home=$repo/build_tools/bench  # run by path: their folders hold no torch_fl
rm -rf "$tests_copy" && cp -r tests "$tests_copy" && cp pyproject.toml "$tests_copy/"
printf 'default = native\n' >/tmp/all-native.conf
# noise: stdin less the lines warnings print. logged FILE: that, to stdout and $OUT/FILE. A mode's checks run before
# it in a pipeline, whose failure exits the script with their status (set -e, pipefail).
noise() { grep --line-buffered -v -e UserWarning -e FutureWarning -e warnings.warn -e "return func" \
  -e "mask = row_mask" || true; }
logged() { noise | tee "$OUT/$1"; }
# suite ARGS...: pytest in the tests' copy, under its conf
suite() { (cd "$tests_copy" && "$PY" -m pytest -c pyproject.toml -q -p no:cacheprovider "$@"); }
status=0
case $mode in
  checks)  # the suites and the exit check in the background while models runs
    suite routing correctness -rs -n 8 --junitxml="$OUT/junit.xml" >"$OUT/pytest.txt" 2>&1 &
    suites=$!
    (cd /tmp && for settle in --no-settle ""; do
       echo "exit_driver $settle: $(FLAGOS_ACCELERATOR=cpu "$PY" "$tests_copy/routing/exit_driver.py" --runs 200 \
         --parallel 16 $settle 2>&1 | tail -1)"
     done >"$OUT/exit.txt") &
    exits=$!
    REUSE_BUILD=1 bash "$0" models >/dev/null 2>&1 || status=1
    (cd /tmp && rm -f /tmp/math-*.jsonl
     for config in bf16-autocast fp16-autocast-gradscaler; do
       "$PY" "$node/train_check.py" run --arm cuda --config $config --math-attention >>/tmp/math-cuda.jsonl
       FLAGOS_BACKEND_CONFIG=/tmp/all-native.conf "$PY" "$node/train_check.py" run --arm flagos --config $config \
         >>/tmp/math-flagos.jsonl
     done
     echo "flagos (every op native) against plain cuda with math attention:"
     "$PY" "$node/train_check.py" compare /tmp/math-cuda.jsonl /tmp/math-flagos.jsonl) 2>&1 | noise >>"$OUT/models.txt"
    wait "$suites" || status=1
    wait "$exits" || status=1
    tail -3 "$OUT/pytest.txt"
    cat "$OUT/exit.txt" ;;
  dist)  # needs 2 GPUs (nvidia-h200-x2); a failing suite stops before the bandwidth
    (suite distributed -rs
     cd /tmp && "$PY" -m torch.distributed.run --nproc-per-node 2 "$tests_copy/distributed/bandwidth.py" || exit 1
    ) 2>&1 | logged dist.txt ;;
  fsdp)
    cd /tmp && "$PY" "$node/fsdp_check.py" 2>&1 | logged fsdp.txt ;;
  mixed)  # plain cuda's verdicts are the reference (no torch_fl there)
    "$PY" -c "import expecttest" 2>/dev/null || { echo "mixed needs expecttest: carry its wheel in .whl/"; exit 1; }
    cd /tmp && timeout "${MIXED_TIMEOUT:-300}" "$PY" "$node/mixed_device_check.py" all --reference cuda \
      --workers "${MIXED_WORKERS:-4}" --out "$OUT/mixed.txt" ;;
  opinfo)
    "$PY" -c "import expecttest, xdist" 2>/dev/null \
      || { echo "opinfo needs expecttest and pytest-xdist: carry their wheels in .whl/ (pure Python)"; exit 1; }
    for conf in native cpu; do
      (cd "$tests_copy" && timeout "${OPINFO_TIMEOUT:-240}" "$PY" -m pytest -c pyproject.toml opinfo -q \
         -p no:cacheprovider -n "${OPINFO_WORKERS:-7}" --max-worker-restart=1000 --flagos-conf $conf \
         --opinfo-samples "${OPINFO_SAMPLES:-1}" --opinfo-counts "$OUT/opinfo-$conf.json" -rfE \
         >"$OUT/opinfo-$conf.txt" 2>&1) &
    done
    for _ in native cpu; do wait -n || status=1; done
    for conf in native cpu; do
      sed -n '/opinfo counts/,/^counts written/p' "$OUT/opinfo-$conf.txt"
      tail -1 "$OUT/opinfo-$conf.txt"
    done ;;
  compile)
    tests=${COMPILE_SUITE:-0}
    [ "$tests" = 1 ] && tests=compile
    (rc=0
     # shellcheck disable=SC2086  # COMPILE_SUITE is a list of test paths
     if [ "$tests" != 0 ]; then suite $tests -rs || rc=1; fi
     cd /tmp && { "$PY" "$node/compile_check.py" all --pairs "${TIME_PAIRS:-5}" || rc=1; }
     "$PY" "$node/compile_features_check.py" all || rc=1
     exit "$rc") 2>&1 | logged compile.txt ;;
  llm)
    cd "$harness_home" && "$PY" -m harness.llm all --sets "${LLM_SETS:-2}" 2>&1 | logged llm.txt ;;
  decode)
    (rc=0
     suite -rs compile/test_reduce_overhead.py compile/test_graph_runner.py || rc=1
     cd "$harness_home" && { "$PY" -m harness.decode all --sets "${DECODE_SETS:-3}" || rc=1; }
     exit "$rc") 2>&1 | logged decode.txt ;;
  zoo | profdiff)  # the reports straight into $OUT, rewritten after every pair: a cut call leaves what it measured
    commit=${TORCH_FL_COMMIT:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || true)}
    diffed=${PROFDIFF_MODELS-qwen2-tied152k,mistral-sliding}
    if [ "$mode" = zoo ]; then
      args=(--models "${ZOO_MODELS:-all}" --modes "${ZOO_MODES:-all}" --arms "${ZOO_ARMS:-flagos,plain,plain-again}"
        --budget "${ZOO_BUDGET:-360}" --profdiff "$diffed" --profile-steps "${PROFDIFF_STEPS:-3}")
      [ -z "${ZOO_ROUNDS:-}" ] || args+=(--rounds "$ZOO_ROUNDS")
      module=harness.zoo
    else
      args=(--models "$diffed" --steps "${PROFDIFF_STEPS:-3}") module=harness.profdiff
    fi
    (cd "$harness_home" && TORCH_FL_COMMIT=$commit "$PY" -m "$module" "${args[@]}" --out "$OUT") 2>&1 | logged zoo.txt ;;
  interop)
    (cd /tmp && "$PY" "$node/dlpack_check.py" \
     && suite -rs correctness/test_dlpack.py correctness/test_multiprocessing.py correctness/test_layouts.py) 2>&1 \
     | tee "$OUT/interop.txt" ;;
  graphs)  # the parts that take seconds first, the training part's lockstep sets (most of a call) last
    (rc=0
     suite -rs correctness/test_capture_replay.py correctness/test_capture_replay_training.py || rc=1
     cd /tmp && for part in add rng provider train; do
       "$PY" "$node/graphs_check.py" $part --pairs "${GRAPH_PAIRS:-20}" --sets "${GRAPH_SETS:-3}" || rc=1
     done
     exit "$rc") 2>&1 | logged graphs.txt ;;
  stepops)
    # shellcheck disable=SC2086  # STEP_OPS_ARGS is a list of options
    cd /tmp && "$PY" "$node/step_ops.py" --d-model "${STEP_OPS_D:-256,1024}" ${STEP_OPS_ARGS:-} 2>&1 \
      | logged step_ops.txt ;;
  replay)
    check=$node/replay_check.py
    parts=" ${REPLAY_PARTS:-seed sweep verify} "
    (cd /tmp && rc=0
     if [[ $parts == *" seed "* ]]; then
       "$PY" "$check" seed --pairs "${REPLAY_PAIRS:-30}" --json "$OUT/replay-seed.json" || rc=1
     fi
     if [[ $parts == *" sweep "* ]]; then
       "$PY" "$check" sweep --pairs "${SWEEP_PAIRS:-7}" --budget "${SWEEP_BUDGET:-240}" \
         ${SWEEP_OPS:+--ops "$SWEEP_OPS"} --json "$OUT/replay-sweep.json" || rc=1
     fi
     exit "$rc") 2>&1 | logged replay.txt
    [[ $parts == *" verify "* ]] || exit 0
    "$PY" "$check" conf --out /tmp/replay.conf
    # Both arms at once, as each worker compiles FlagGems' kernels itself; --tb=line, as full tracebacks outlasted
    # the limit once; SIGINT at the limit, so a cut run still prints the -rfE summary the failures are counted from.
    # shellcheck disable=SC2086  # VERIFY_TESTS is a list of node ids
    for arm in verify:FLAGOS_FLAGGEMS_VERIFY=1 python:FLAGOS_FLAGGEMS_REPLAY=0; do
      (rc=0; cd "$tests_copy" && env "${arm#*:}" FLAGOS_BACKEND_CONFIG=/tmp/replay.conf timeout -s INT -k 30 \
         "${VERIFY_TIMEOUT:-400}" "$PY" -m pytest -c pyproject.toml ${VERIFY_TESTS:-correctness} -q \
         -p no:cacheprovider -n "${VERIFY_WORKERS:-7}" -rfE --tb=line >"/tmp/verify-${arm%%:*}.txt" 2>&1 || rc=$?
       echo $rc >"/tmp/verify-${arm%%:*}.rc") &
    done
    wait
    for arm in verify python; do
      echo "correctness suite, swept ops on flaggems, $arm (exit $(cat /tmp/verify-$arm.rc); 124: cut by the" \
        "time limit): $(tail -1 /tmp/verify-$arm.txt)"
      echo "  verify mismatches: $(grep -c 'FLAGOS_FLAGGEMS_VERIFY: the replay' /tmp/verify-$arm.txt || true)"
      grep -E '^(FAILED|ERROR)' "/tmp/verify-$arm.txt" | sed 's/ - .*//' | sort >"/tmp/failed-$arm.txt" || true
    done | tee -a "$OUT/replay.txt"
    echo "failing only with the replay: $(comm -23 /tmp/failed-verify.txt /tmp/failed-python.txt | tr '\n' ' ')" \
      | tee -a "$OUT/replay.txt"
    cat /tmp/verify-verify.txt >"$OUT/verify.txt" ;;
  train)
    check=$node/train_check.py
    rm -f /tmp/train-*.jsonl
    (cd /tmp
     for config in fp32-adamw-foreach fp32-adamw-fused bf16-autocast fp16-autocast-gradscaler; do
       "$PY" "$check" run --arm cuda --config "$config" >>/tmp/train-cuda.jsonl
       "$PY" "$check" run --arm flagos --config "$config" >>/tmp/train-flagos.jsonl
       FLAGOS_BACKEND_CONFIG=/tmp/all-native.conf "$PY" "$check" run --arm flagos --config "$config" \
         >>/tmp/train-native.jsonl
     done
     echo "flagos (shipped cuda conf) against plain cuda:"
     rc=0
     "$PY" "$check" compare /tmp/train-cuda.jsonl /tmp/train-flagos.jsonl || rc=1
     echo "flagos (every op native) against plain cuda:"
     "$PY" "$check" compare /tmp/train-cuda.jsonl /tmp/train-native.jsonl || rc=1
     "$PY" "$check" after-import
     for _ in $(seq "${TIME_PAIRS:-5}"); do  # alternating processes; median ms/step of each
       for arm in cuda flagos native; do
         if [ $arm = native ]; then a=flagos; c=/tmp/all-native.conf; else a=$arm; c=; fi
         env ${c:+FLAGOS_BACKEND_CONFIG=$c} "$PY" "$check" run --arm $a --config fp32-adamw-foreach --time-steps 50 \
           | "$PY" -c "import json,sys; r=json.load(sys.stdin); print('step ms $arm', round(r['ms_per_step'], 3))"
       done
     done
     exit "$rc") 2>&1 | logged train.txt ;;
  flaggems)  # qualify's own status (3: operators left pending, a rerun resumes) is reported, never fatal
    q=${QUALIFY_DIR:-$repo/build/qualify-flaggems}
    mkdir -p "$q"
    deadline=$(( start + ${FLAGGEMS_SECONDS:-570} ))
    (cd /tmp
     "$PY" "$node/record_workloads.py" --samples "$q/samples" --provider flaggems --skip-if-recorded
     budget=$(( deadline - $(date +%s) - ${CHECK_SECONDS:-220} ))
     echo "qualify: budget ${budget} s"
     rc=0
     "$PY" -m torch_fl qualify --provider flaggems --out "$q" --workers "${QUALIFY_WORKERS:-12}" --chunk 10 \
       --dtypes "${QUALIFY_DTYPES:-float32,bfloat16}" --timeout 120 --budget "$budget" || rc=$?
     echo "qualify: exit $rc after $(( $(date +%s) - start )) s"
     # events.jsonl comes back too: a cold machine's rerun resumes from it
     for f in report.json report.md events.jsonl; do cp "$q/$f" "$OUT/qualify-$f"; done
     "$PY" "$node/flaggems_first.py" --conf "$q/qualified.conf" --tuned "$q/qualified-tuned.conf" \
       --json "$OUT/flaggems-first.json" || echo "flaggems_first: exit $?"
     echo "real workloads done after $(( $(date +%s) - start )) s"
     cd "$tests_copy" && "$PY" models/reference.py --device cuda --out /tmp/models-cuda.pt \
       && "$PY" models/reference.py --device cuda --out /tmp/models-cuda-again.pt >/dev/null \
       && { FLAGOS_BACKEND_CONFIG="$q/qualified.conf" FLAGOS_MODELS_REFERENCE=/tmp/models-cuda.pt \
            FLAGOS_MODELS_REFERENCE_REPEAT=/tmp/models-cuda-again.pt suite models -rs 2>&1 | tail -25 || true; }
     echo "model suite on the qualified conf done after $(( $(date +%s) - start )) s") 2>&1 | logged flaggems.txt ;;
  models)  # two plain-cuda processes: the reference and its repeat, whose difference (the A/A control) widens the bar
    rm -f /tmp/steps-cuda.jsonl /tmp/steps-flagos.jsonl /tmp/steps-cuda-again.jsonl
    (cd "$tests_copy" && "$PY" models/reference.py --device cuda --out /tmp/models-cuda.pt \
     && "$PY" models/reference.py --device cuda --out /tmp/models-cuda-again.pt >/dev/null \
     && { echo "A/A, plain cuda against plain cuda:"; "$PY" models/reference.py --compare /tmp/models-cuda.pt \
          /tmp/models-cuda-again.pt; } \
     && { FLAGOS_MODELS_REFERENCE=/tmp/models-cuda.pt FLAGOS_MODELS_REFERENCE_REPEAT=/tmp/models-cuda-again.pt \
          suite models -rs; rc=$?; true; } \
     && for _ in $(seq "${TIME_PAIRS:-5}"); do
          "$PY" models/steptime.py --device cuda >>/tmp/steps-cuda.jsonl
          "$PY" models/steptime.py --device flagos >>/tmp/steps-flagos.jsonl
          "$PY" models/steptime.py --device cuda >>/tmp/steps-cuda-again.jsonl  # the A/A arm
        done \
     && "$PY" models/steptime.py --compare /tmp/steps-cuda.jsonl /tmp/steps-flagos.jsonl /tmp/steps-cuda-again.jsonl \
     && exit "$rc") 2>&1 | tee "$OUT/models.txt" ;;
  *)  # full and index: the suites, then the bench; bench: the bench alone
    t0=$(date +%s)
    if [ "$mode" != bench ]; then
      # shellcheck disable=SC2086  # PYTEST_ARGS is a list of options
      (suite routing correctness -rs ${workers:+-n "$workers"} --junitxml="$OUT/junit.xml" ${PYTEST_ARGS:-} 2>&1 \
         | tee "$OUT/pytest.txt"; exit "${PIPESTATUS[0]}") || status=$?
      log "routing and correctness suites: $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/pytest.txt")"
      t0=$(date +%s)
    fi
    # Straight into $OUT: the bench rewrites its reports after every part, and what is under $OUT comes back even
    # from a call cut at its time limit. The report names the checkout's HEAD, which only the caller can ask.
    commit=${TORCH_FL_COMMIT:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || true)}
    # shellcheck disable=SC2086  # BENCH_ARGS is a list of options
    (cd "$harness_home" && TORCH_FL_COMMIT=$commit "$PY" -m harness --accelerator "${BENCH_ACCELERATOR:-cuda}" \
       --out "$OUT/bench" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.txt") || status=$?
    [ "$mode" != index ] || rm -f "$OUT/bench/bench.png"  # index: at most 7 files
    log "bench: $(( $(date +%s) - t0 )) s" ;;
esac
exit "$status"
