#!/usr/bin/env bash
# Build and verify torch_fl natively on a CUDA node that has torch but no
# Docker (e.g. a lent GPU machine): build the wheel against the node's torch,
# install it, run the routing and correctness suites with FlagGems present,
# then the route A/B benchmark. Everything lands under $OUT (default reports/cuda-node).
#   bash build_tools/node/cuda_node.sh [smoke|full|bench|train|models|dist|fsdp|checks|opinfo|mixed|compile|llm|
#                                       decode|replay|stepops|flaggems|interop|graphs]
#   full:   the routing and correctness suites (SUITE_WORKERS xdist workers, 8; 0: one process), then the bench;
#           BENCH_ARGS="--runs 3 ..." adds bench options. bench: the bench alone
#   train:  flagos training against plain cuda in separate processes (tests/node/train_check.py), and the step
#           time (TIME_PAIRS alternating processes per arm)
#   models: the model suite against a plain-cuda reference (tests/models) and that reference's repeat in a third
#           process (the A/A control), then the step time of TIME_PAIRS alternating processes per arm, with a
#           second plain-cuda arm as its A/A control
#   dist:   the distributed suite on 2 GPUs (tests/distributed) and the all_reduce bus bandwidth, flagos
#           against plain CUDA NCCL in the same processes
#   fsdp:   FSDP2, DTensor, tensor parallelism and DCP on one GPU (tests/node/fsdp_check.py): a 1-rank flagos mesh
#           over NCCL, fully_shard with one shard (fp32, bf16 mixed precision, CPU offload), TP of an MLP and an
#           attention block, DCP save, load and a failed save, each against one process on the host
#   opinfo: torch's op database on flagos over CUDA (tests/opinfo), the native and the cpu-default conf side by
#           side, OPINFO_SAMPLES (default 1) samples per (op, dtype), OPINFO_WORKERS xdist workers per conf (7)
#   checks: models beside the routing and correctness suites and the exit check under load (emulated runtime,
#           200 short backward-then-exit runs with and without torch_fl's exit settling); no bench
#   compile: torch.compile on flagos against torch.compile on plain cuda (tests/node/compile_check.py): numbers,
#           mode="reduce-overhead", and the step time of TIME_PAIRS lockstep sets (one process per arm, timed in
#           turns) with an A/A control, then the Inductor features of each arm's graph under max-autotune
#           (tests/node/compile_features_check.py); COMPILE_SUITE=1 runs the compile suite (tests/compile) on
#           flagos first, COMPILE_SUITE="compile/test_x.py ..." those files of it
#   llm:    a compiled HF Llama training step (155M parameters, seq 1024, bf16 autocast, fused AdamW) on flagos
#           against plain cuda (the bench harness's case, tests/bench/harness/llm.py): LLM_SETS (2) lockstep sets
#           of one process per arm with an A/A control; ms/step, peak memory, the eager attention kernels of
#           each arm, the Inductor features of the flagos graph
#   decode: greedy decoding at batch 1 (issue 34; tests/bench/harness/decode.py): an HF Llama of 8 layers, hidden
#           1024, bf16, StaticCache, plain cuda and flagos eager, compiled and reduce-overhead with an A/A arm, in
#           DECODE_SETS (3) lockstep sets: tokens/s, identical tokens, flagos reduce-overhead >= 0.95x plain; first
#           the reduce-overhead tests of the compile suite on flagos (compile/test_reduce_overhead.py,
#           compile/test_graph_runner.py)
#   stepops: where the eager training step's host time goes, op by op (tests/node/step_ops.py): one step's ATen
#           calls recorded on flagos, then replayed in one process on flagos and on cuda copies; STEP_OPS_D d_models,
#           STEP_OPS_ARGS more options (--counters N: the router's phase counters over N more replays)
#   interop: DLPack of a flagos tensor as a CUDA capsule (tests/node/dlpack_check.py), then the DLPack, queue-sharing
#           and sparse tests of the correctness suite
#   graphs: flagos graphs (issue 34): the graph tests of the correctness suite on CUDA, then tests/node/graphs_check.py:
#           the seed adds captured once and replayed (GRAPH_PAIRS in-process pairs against plain cuda's captured add,
#           with an A/A arm), dropout under capture, a captured AdamW training step against eager (parameters) and
#           its step time against plain cuda captured (GRAPH_SETS lockstep sets of one process per arm, A/A arm)
#   replay: the flaggems replay (tests/node/replay_check.py): the seed cases as in-process pairs of plain cuda,
#           flagos native, FlagGems' Python path and the replay, then the op sweep (small shapes and 4096x4096),
#           then the correctness suite with the swept ops on flaggems, once under FLAGOS_FLAGGEMS_VERIFY=1 and once
#           with the replay off (the failures FlagGems has of its own); REPLAY_PARTS="seed sweep verify" picks
#           parts, SWEEP_OPS="exp out=,div out=" entries of the sweep
#   flaggems: FlagGems-first, qualified on this node (torch_fl.qualify): the model suite's and the real workloads'
#           calls recorded (tests/node/record_workloads.py), `python -m torch_fl qualify --provider flaggems` with
#           QUALIFY_WORKERS workers (12) within what is left of FLAGGEMS_SECONDS (570) less CHECK_SECONDS (220),
#           then on the conf it wrote: the real workloads against all-native (tests/node/flaggems_first.py) and
#           the model suite against plain cuda. QUALIFY_DIR (build/qualify-flaggems) survives a warm machine's
#           next call, which resumes the qualification
#   mixed:  which calls with one host tensor among device tensors plain cuda and the flagos emulation accept, over
#           OpInfo samples (tests/node/mixed_device_check.py); fails when the emulation accepts one that cuda refuses
# REUSE_BUILD=1 keeps a wheel an earlier call built on this machine.
# At most 8 files land in $OUT (build.log, node.txt, pytest.txt, junit.xml, bench.txt, bench/bench.{json,md,png};
# train: train.txt; models: models.txt; dist: dist.txt; fsdp: fsdp.txt; checks: models.txt, pytest.txt,
# junit.xml, exit.txt; opinfo: opinfo-{native,cpu}.{txt,json}; mixed: mixed.txt; compile: compile.txt; interop:
# interop.txt; graphs: graphs.txt; llm: llm.txt; decode: decode.txt; stepops: step_ops.txt; flaggems: flaggems.txt,
# qualify-report.{json,md}, qualify-events.jsonl, flaggems-first.json): a lent machine hands back only a few.
set -euo pipefail
mode=${1:-full}
OUT=${OUT:-reports/cuda-node}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
repo=$(pwd)
site=/tmp/torch-fl-site
rm -rf "$site"
export PYTHONUNBUFFERED=1

# Extra wheels the node lacks travel in .whl/. The build backend comes from the node lock, by hash (the same pins
# as the cuda builder's; build_tools/locks.py); the test tools (flag_gems and its deps) as they are.
node_lock=docker/cuda/locks/cuda-node-py312.txt
locked=$(sed -n 's/^\([A-Za-z0-9._-]*\)==.*/\1/p' "$node_lock" | tr 'A-Z-' 'a-z_')
"$PY" -m pip install -q --no-index --find-links .whl --require-hashes --no-deps --no-compile --no-cache-dir \
  --target "$site" -r "$node_lock" \
  || { echo "the build backend of $node_lock is not in .whl/: pip download --no-deps -r $node_lock -d .whl"; exit 1; }
extra=()
for w in .whl/*.whl; do
  [ -e "$w" ] || continue
  name=$(basename "$w" | cut -d- -f1 | tr 'A-Z-' 'a-z_')
  grep -qx "$name" <<<"$locked" || extra+=("$w")
done
if [ ${#extra[@]} -gt 0 ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${extra[@]}"
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

# A g++ with a shared libstdc++ (CMakeLists.txt says why); images for nvcc may put one without it first.
for cxx in ${CXX:-} g++ /usr/bin/g++ c++; do
  lib=$(command -v "$cxx" >/dev/null && "$cxx" -print-file-name=libstdc++.so || true)
  if [ "${lib#/}" != "$lib" ]; then
    [ -n "${CXX:-}" ] && [ "$cxx" != "$CXX" ] && echo "CXX=$CXX has no shared libstdc++: using $cxx"
    CXX=$(command -v "$cxx") && export CXX && break
  fi
done
if [ -n "${CXX:-}" ]; then echo "C++ compiler: $CXX ($("$CXX" --version | head -1))"; fi

start=$(date +%s)
if [ "${REUSE_BUILD:-0}" = 1 ] && compgen -G "/tmp/torch-fl-wheel/*.whl" >/dev/null; then
  echo "build: reusing $(ls /tmp/torch-fl-wheel)"
else
  rm -rf /tmp/torch-fl-wheel /tmp/torch-fl-build  # a fresh CMake cache: it would keep an earlier compiler
  # file by file (CMakeLists.txt builds in unity batches elsewhere): the node's cores make it cheap, and it keeps
  # each source compiling on its own
  "$PY" -m pip wheel -v --no-build-isolation --no-deps --config-settings=build-dir=/tmp/torch-fl-build \
    --config-settings=cmake.define.CMAKE_UNITY_BUILD=OFF -w /tmp/torch-fl-wheel . >"$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; echo "build failed: full log in $OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s: $(ls /tmp/torch-fl-wheel)"
fi
"$PY" -m pip install -q --no-deps --no-compile --target "$site" /tmp/torch-fl-wheel/*.whl

cd /tmp  # import the installed package, never the checkout
export FLAGOS_ACCELERATOR=cuda
node_checks() {
"$PY" -m torch_fl info
"$PY" - <<'PY'
import torch, torch_fl
x = torch.randn(1000, 1000).to("flagos")
y = (x @ x.T).relu().sum()
ref = (x.cpu() @ x.cpu().T).relu().sum()
print("smoke: device", x.device, "result", float(y), "reference", float(ref))
assert torch.allclose(y.cpu(), ref, rtol=1e-3), (y, ref)
print("memory_allocated", torch.flagos.memory_allocated())
PY
for route in native flaggems; do
  FLAGOS_OP_add__Tensor=$route FLAGOS_LOG=dispatch "$PY" -c "
import torch, torch_fl
a = torch.randn(101, 3, 320); b = torch.randn(101, 3, 320)
out = a.to('flagos') + b.to('flagos')
torch.flagos.synchronize()
assert torch.equal(out.cpu(), a + b) or torch.allclose(out.cpu(), a + b), 'mismatch'
print('add ok on route $route')" 2>&1 | grep -E "add.Tensor|add ok|Error|error"
done
}
node_checks 2>&1 | tee "$OUT/node.txt"
cd "$repo"
[ "$mode" = smoke ] && exit 0

tests_copy=/tmp/torch-fl-tests
rm -rf "$tests_copy" && cp -r tests "$tests_copy" && cp pyproject.toml "$tests_copy/"
if [ "$mode" = checks ]; then
  status=0
  (cd "$tests_copy" && "$PY" -m pytest -c pyproject.toml routing correctness -q -p no:cacheprovider -rs -n 8 \
     --junitxml="$OUT/junit.xml" >"$OUT/pytest.txt" 2>&1) &
  suites=$!
  (cd /tmp && for settle in --no-settle ""; do
     echo "exit_driver $settle: $(FLAGOS_ACCELERATOR=cpu "$PY" "$tests_copy/routing/exit_driver.py" --runs 200 \
       --parallel 16 $settle 2>&1 | tail -1)"
   done >"$OUT/exit.txt") &
  exits=$!
  REUSE_BUILD=1 bash "$0" models >/dev/null 2>&1 || status=1
  (cd /tmp && printf 'default = native\n' >/tmp/all-native.conf && rm -f /tmp/math-*.jsonl
   for config in bf16-autocast fp16-autocast-gradscaler; do
     "$PY" "$tests_copy/node/train_check.py" run --arm cuda --config $config --math-attention >>/tmp/math-cuda.jsonl
     FLAGOS_BACKEND_CONFIG=/tmp/all-native.conf "$PY" "$tests_copy/node/train_check.py" run --arm flagos \
       --config $config >>/tmp/math-flagos.jsonl
   done
   echo "flagos (every op native) against plain cuda with math attention:"
   "$PY" "$tests_copy/node/train_check.py" compare /tmp/math-cuda.jsonl /tmp/math-flagos.jsonl) 2>&1 \
   | grep --line-buffered -v -e "UserWarning" -e "mask = row_mask" >>"$OUT/models.txt"
  wait "$suites" || status=1
  wait "$exits" || status=1
  tail -3 "$OUT/pytest.txt"; cat "$OUT/exit.txt"
  exit "$status"
fi
if [ "$mode" = dist ]; then  # needs 2 GPUs (nvidia-h200-x2): collectives, DDP, all_reduce bus bandwidth
  status=0
  (cd "$tests_copy" && "$PY" -m pytest -c pyproject.toml distributed -q -p no:cacheprovider -rs; rc=$?
   cd /tmp && "$PY" -m torch.distributed.run --nproc-per-node 2 "$tests_copy/distributed/bandwidth.py" || rc=1
   exit $rc) 2>&1 | grep --line-buffered -v -e "UserWarning" -e "FutureWarning" -e "return func" \
   | tee "$OUT/dist.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  exit "$status"
fi
if [ "$mode" = fsdp ]; then  # one GPU: the sharded code paths a 1-rank mesh runs
  cd /tmp && "$PY" "$tests_copy/node/fsdp_check.py" 2>&1 \
    | grep --line-buffered -v -e "UserWarning" -e "FutureWarning" -e "warnings.warn" | tee "$OUT/fsdp.txt"
  exit "${PIPESTATUS[0]}"
fi
if [ "$mode" = mixed ]; then  # the emulation's mixed-device verdicts against plain cuda's (no torch_fl there)
  "$PY" -c "import expecttest" 2>/dev/null || { echo "mixed needs expecttest: carry its wheel in .whl/"; exit 1; }
  cd /tmp && timeout "${MIXED_TIMEOUT:-300}" "$PY" "$tests_copy/node/mixed_device_check.py" all --reference cuda \
    --workers "${MIXED_WORKERS:-4}" --out "$OUT/mixed.txt"
  exit $?
fi
if [ "$mode" = opinfo ]; then
  "$PY" -c "import expecttest, xdist" 2>/dev/null \
    || { echo "opinfo needs expecttest and pytest-xdist: carry their wheels in .whl/ (pure Python)"; exit 1; }
  status=0; pids=()
  for conf in native cpu; do
    (cd "$tests_copy" && timeout "${OPINFO_TIMEOUT:-240}" "$PY" -m pytest -c pyproject.toml opinfo -q \
       -p no:cacheprovider -n "${OPINFO_WORKERS:-7}" --max-worker-restart=1000 --flagos-conf $conf \
       --opinfo-samples "${OPINFO_SAMPLES:-1}" --opinfo-counts "$OUT/opinfo-$conf.json" -rfE \
       >"$OUT/opinfo-$conf.txt" 2>&1) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  for conf in native cpu; do
    sed -n '/opinfo counts/,/^counts written/p' "$OUT/opinfo-$conf.txt"; tail -1 "$OUT/opinfo-$conf.txt"
  done
  exit "$status"
fi
if [ "$mode" = compile ]; then  # torch.compile: compiled flagos against compiled plain cuda
  status=0
  (rc=0
   suite=${COMPILE_SUITE:-0}
   [ "$suite" = 1 ] && suite=compile  # the whole compile suite (a few minutes more)
   if [ "$suite" != 0 ]; then
     # shellcheck disable=SC2086  # COMPILE_SUITE is a list of test paths
     cd "$tests_copy" && { "$PY" -m pytest -c pyproject.toml $suite -q -p no:cacheprovider -rs || rc=1; }
   fi
   cd /tmp && { "$PY" "$tests_copy/node/compile_check.py" all --pairs "${TIME_PAIRS:-5}" || rc=1; }
   "$PY" "$tests_copy/node/compile_features_check.py" all || rc=1
   exit $rc) 2>&1 | grep --line-buffered -v -e "UserWarning" -e "warnings.warn" | tee "$OUT/compile.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  exit "$status"
fi
if [ "$mode" = llm ]; then  # a compiled decoder LLM step: compiled flagos against compiled plain cuda
  cd "$tests_copy/bench" && "$PY" -m harness.llm all --sets "${LLM_SETS:-2}" 2>&1 \
    | grep --line-buffered -v -e "UserWarning" -e "warnings.warn" | tee "$OUT/llm.txt"
  exit "${PIPESTATUS[0]}"
fi
if [ "$mode" = decode ]; then  # decoding: eager, compiled, reduce-overhead on flagos against plain cuda
  (cd "$tests_copy" && rc=0
   "$PY" -m pytest -c pyproject.toml -q -p no:cacheprovider -rs compile/test_reduce_overhead.py \
     compile/test_graph_runner.py || rc=1
   cd "$tests_copy/bench" && { "$PY" -m harness.decode all --sets "${DECODE_SETS:-3}" || rc=1; }
   exit $rc) 2>&1 | grep --line-buffered -v -e "UserWarning" -e "warnings.warn" | tee "$OUT/decode.txt"
  exit "${PIPESTATUS[0]}"
fi
if [ "$mode" = interop ]; then  # DLPack's CUDA capsule, the queue's refusal, the sparse message (issue 32)
  (cd /tmp && "$PY" "$tests_copy/node/dlpack_check.py" \
   && cd "$tests_copy" && "$PY" -m pytest -c pyproject.toml -q -p no:cacheprovider -rs correctness/test_dlpack.py \
        correctness/test_multiprocessing.py correctness/test_layouts.py) 2>&1 | tee "$OUT/interop.txt"
  exit "${PIPESTATUS[0]}"
fi
if [ "$mode" = graphs ]; then  # capture and replay on flagos over CUDA (issue 34)
  (cd "$tests_copy" && rc=0
   "$PY" -m pytest -c pyproject.toml -q -p no:cacheprovider -rs correctness/test_capture_replay.py \
     correctness/test_capture_replay_training.py || rc=1
   # the parts that take seconds first, the training part's lockstep sets (most of a call) last
   cd /tmp && for part in add rng provider train; do
     "$PY" "$tests_copy/node/graphs_check.py" $part --pairs "${GRAPH_PAIRS:-20}" --sets "${GRAPH_SETS:-3}" || rc=1
   done
   exit $rc) 2>&1 | grep --line-buffered -v -e "UserWarning" -e "warnings.warn" | tee "$OUT/graphs.txt"
  exit "${PIPESTATUS[0]}"
fi
if [ "$mode" = stepops ]; then  # the eager step's op stream replayed in one process: host µs per op, flagos - cuda
  # shellcheck disable=SC2086  # STEP_OPS_ARGS is a list of options (--rounds 8 --counters 5)
  cd /tmp && "$PY" "$tests_copy/node/step_ops.py" --d-model "${STEP_OPS_D:-256,1024}" ${STEP_OPS_ARGS:-} 2>&1 \
    | grep --line-buffered -v -e "UserWarning" -e "warnings.warn" | tee "$OUT/step_ops.txt"
  exit "${PIPESTATUS[0]}"
fi
if [ "$mode" = replay ]; then
  status=0
  check="$tests_copy/node/replay_check.py"
  parts=" ${REPLAY_PARTS:-seed sweep verify} "
  (cd /tmp && rc=0
   if [[ $parts == *" seed "* ]]; then
     "$PY" "$check" seed --pairs "${REPLAY_PAIRS:-30}" --json "$OUT/replay-seed.json" || rc=1
   fi
   if [[ $parts == *" sweep "* ]]; then
     "$PY" "$check" sweep --pairs "${SWEEP_PAIRS:-7}" --budget "${SWEEP_BUDGET:-240}" ${SWEEP_OPS:+--ops "$SWEEP_OPS"} \
       --json "$OUT/replay-sweep.json" || rc=1
   fi
   exit $rc) 2>&1 | { grep --line-buffered -v -e "UserWarning" -e "warnings.warn" -e "mask = row_mask" || true; } \
     | tee "$OUT/replay.txt"  # grep selects nothing (status 1) when only the verify part runs
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  if [[ $parts == *" verify "* ]]; then
    "$PY" "$check" conf --out /tmp/replay.conf
    # both arms side by side, VERIFY_WORKERS each (one 300 s arm of 14 workers got through about 90%: each
    # worker compiles FlagGems' kernels itself). The short summary (-rfE) names each failure with its message,
    # so verify mismatches are counted from it; one line per traceback (--tb=line), since printing full ones
    # outlasted the limit once; the time limit interrupts (SIGINT) rather than kills, so a cut run still prints
    # that summary, and its exit status is reported, never fatal here. VERIFY_TESTS: node ids instead of the suite
    pids=()
    for arm in verify python; do
      if [ $arm = verify ]; then flags="FLAGOS_FLAGGEMS_VERIFY=1"; else flags="FLAGOS_FLAGGEMS_REPLAY=0"; fi
      (rc=0; cd "$tests_copy" && env $flags FLAGOS_BACKEND_CONFIG=/tmp/replay.conf timeout -s INT -k 30 \
         "${VERIFY_TIMEOUT:-400}" "$PY" -m pytest -c pyproject.toml ${VERIFY_TESTS:-correctness} -q \
         -p no:cacheprovider -n "${VERIFY_WORKERS:-7}" -rfE --tb=line >"/tmp/verify-$arm.txt" 2>&1 || rc=$?
       echo $rc >"/tmp/verify-$arm.rc") &
      pids+=($!)
    done
    wait "${pids[@]}" || true
    for arm in verify python; do
      echo "correctness suite, swept ops on flaggems, $arm (exit $(cat /tmp/verify-$arm.rc); 124: cut by the" \
        "time limit): $(tail -1 /tmp/verify-$arm.txt)"
      echo "  verify mismatches: $(grep -c 'FLAGOS_FLAGGEMS_VERIFY: the replay' /tmp/verify-$arm.txt || true)"
      grep -E '^(FAILED|ERROR)' "/tmp/verify-$arm.txt" | sed 's/ - .*//' | sort >"/tmp/failed-$arm.txt" || true
    done | tee -a "$OUT/replay.txt"
    echo "failing only with the replay: $(comm -23 /tmp/failed-verify.txt /tmp/failed-python.txt | tr '\n' ' ')" \
      | tee -a "$OUT/replay.txt"
    cat /tmp/verify-verify.txt >"$OUT/verify.txt"
  fi
  exit "$status"
fi
if [ "$mode" = train ]; then
  status=0
  check="$tests_copy/node/train_check.py"
  printf 'default = native\n' >/tmp/all-native.conf
  rm -f /tmp/train-*.jsonl
  (cd /tmp
   for config in fp32-adamw-foreach fp32-adamw-fused bf16-autocast fp16-autocast-gradscaler; do
     "$PY" "$check" run --arm cuda --config "$config" >>/tmp/train-cuda.jsonl
     "$PY" "$check" run --arm flagos --config "$config" >>/tmp/train-flagos.jsonl
     FLAGOS_BACKEND_CONFIG=/tmp/all-native.conf "$PY" "$check" run --arm flagos --config "$config" \
       >>/tmp/train-native.jsonl
   done
   echo "flagos (shipped cuda conf) against plain cuda:"
   rc=0; "$PY" "$check" compare /tmp/train-cuda.jsonl /tmp/train-flagos.jsonl || rc=1
   echo "flagos (every op native) against plain cuda:"
   "$PY" "$check" compare /tmp/train-cuda.jsonl /tmp/train-native.jsonl || rc=1
   "$PY" "$check" after-import
   for i in $(seq "${TIME_PAIRS:-5}"); do  # alternating processes; median ms/step of each
     for arm in cuda flagos native; do
       if [ $arm = native ]; then a=flagos; c=/tmp/all-native.conf; else a=$arm; c=; fi
       env ${c:+FLAGOS_BACKEND_CONFIG=$c} "$PY" "$check" run --arm $a --config fp32-adamw-foreach --time-steps 50 \
         | "$PY" -c "import json,sys; r=json.load(sys.stdin); print('step ms $arm', round(r['ms_per_step'], 3))"
     done
   done; exit $rc) 2>&1 | grep --line-buffered -v -e "UserWarning" -e "mask = row_mask" | tee "$OUT/train.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  exit "$status"
fi
if [ "$mode" = flaggems ]; then
  status=0
  q=${QUALIFY_DIR:-$repo/build/qualify-flaggems}
  mkdir -p "$q"
  deadline=$(( start + ${FLAGGEMS_SECONDS:-570} ))
  (cd /tmp
   "$PY" "$tests_copy/node/record_workloads.py" --samples "$q/samples" --provider flaggems --skip-if-recorded
   budget=$(( deadline - $(date +%s) - ${CHECK_SECONDS:-220} ))
   echo "qualify: budget ${budget} s"
   rc=0; "$PY" -m torch_fl qualify --provider flaggems --out "$q" --workers "${QUALIFY_WORKERS:-12}" --chunk 10 \
     --dtypes "${QUALIFY_DTYPES:-float32,bfloat16}" --timeout 120 --budget "$budget" || rc=$?
   echo "qualify: exit $rc after $(( $(date +%s) - start )) s"  # 3: operators left pending (a rerun resumes)
   cp "$q/report.json" "$OUT/qualify-report.json"; cp "$q/report.md" "$OUT/qualify-report.md"
   cp "$q/events.jsonl" "$OUT/qualify-events.jsonl"  # carried back, a cold machine's rerun resumes from it
   "$PY" "$tests_copy/node/flaggems_first.py" --conf "$q/qualified.conf" --tuned "$q/qualified-tuned.conf" \
     --json "$OUT/flaggems-first.json" || echo "flaggems_first: exit $?"
   echo "real workloads done after $(( $(date +%s) - start )) s"
   cd "$tests_copy" && "$PY" models/reference.py --device cuda --out /tmp/models-cuda.pt \
     && "$PY" models/reference.py --device cuda --out /tmp/models-cuda-again.pt >/dev/null \
     && { FLAGOS_BACKEND_CONFIG="$q/qualified.conf" FLAGOS_MODELS_REFERENCE=/tmp/models-cuda.pt \
          FLAGOS_MODELS_REFERENCE_REPEAT=/tmp/models-cuda-again.pt \
          "$PY" -m pytest -c pyproject.toml models -q -p no:cacheprovider -rs 2>&1 | tail -25 || true; }
   echo "model suite on the qualified conf done after $(( $(date +%s) - start )) s") 2>&1 \
   | grep --line-buffered -v -e "UserWarning" -e "warnings.warn" | tee "$OUT/flaggems.txt"
  exit "$status"
fi
if [ "$mode" = models ]; then
  status=0
  rm -f /tmp/steps-cuda.jsonl /tmp/steps-flagos.jsonl /tmp/steps-cuda-again.jsonl
  # two plain-cuda processes: the reference and its repeat, whose difference (the A/A control) widens the bar
  (cd "$tests_copy" && "$PY" models/reference.py --device cuda --out /tmp/models-cuda.pt \
   && "$PY" models/reference.py --device cuda --out /tmp/models-cuda-again.pt >/dev/null \
   && { echo "A/A, plain cuda against plain cuda:"; "$PY" models/reference.py --compare /tmp/models-cuda.pt \
        /tmp/models-cuda-again.pt; } \
   && { FLAGOS_MODELS_REFERENCE=/tmp/models-cuda.pt FLAGOS_MODELS_REFERENCE_REPEAT=/tmp/models-cuda-again.pt \
        "$PY" -m pytest -c pyproject.toml models -q -p no:cacheprovider -rs; rc=$?; true; } \
   && for i in $(seq "${TIME_PAIRS:-5}"); do
        "$PY" models/steptime.py --device cuda >>/tmp/steps-cuda.jsonl
        "$PY" models/steptime.py --device flagos >>/tmp/steps-flagos.jsonl
        "$PY" models/steptime.py --device cuda >>/tmp/steps-cuda-again.jsonl  # the A/A arm
      done && "$PY" models/steptime.py --compare /tmp/steps-cuda.jsonl /tmp/steps-flagos.jsonl \
        /tmp/steps-cuda-again.jsonl && exit "$rc") 2>&1 \
   | tee "$OUT/models.txt"; [ "${PIPESTATUS[0]}" = 0 ] || status=1
  exit "$status"
fi

status=0
t0=$(date +%s)
if [ "$mode" != bench ]; then  # bench: the benchmark alone
  (cd "$tests_copy" && "$PY" -m pytest -c pyproject.toml routing correctness -q -p no:cacheprovider -rs \
     -n "${SUITE_WORKERS:-8}" --junitxml="$OUT/junit.xml" 2>&1 | tee "$OUT/pytest.txt"; exit "${PIPESTATUS[0]}") \
     || status=$?
  echo "routing and correctness suites: $(( $(date +%s) - t0 )) s"; t0=$(date +%s)
fi
# straight into $OUT: the bench rewrites its reports after every part, and what is under $OUT comes back even
# from a call cut at its time limit. The harness runs from the tests' copy (its folder holds no torch_fl, so the
# installed one is measured); the report names the checkout's HEAD, which only the caller can ask.
commit=${TORCH_FL_COMMIT:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || true)}
# shellcheck disable=SC2086  # BENCH_ARGS is a list of options
(cd "$tests_copy/bench" && TORCH_FL_COMMIT=$commit "$PY" -m harness --accelerator cuda --out "$OUT/bench" \
   ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.txt") || status=$?
echo "bench: $(( $(date +%s) - t0 )) s"
exit "$status"
