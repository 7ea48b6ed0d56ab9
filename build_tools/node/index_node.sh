#!/usr/bin/env bash
# A GPU node installs torch-fl from a file:// index exactly as a cluster node would; the routing and correctness
# suites and the route A/B bench then run from the installed wheel, never from the checkout.
#   [VARIANT=cu130] [BENCH_ARGS=--short] [PYTEST_ARGS=] [ROUTES="native flaggems"] bash build_tools/node/index_node.sh
# Also PYTHON, CXX, TORCH_FL_COMMIT; FLAGOS_ACCELERATOR and BENCH_ACCELERATOR (cuda; cpu tries it on a laptop);
# REUSE_BUILD=1 keeps a wheel an earlier call built, REBUILD=1 builds one though the index has it.
# The index is the carried wheels/<variant>/ (`nox -s build-cuda`, `nox -s index`), read through its page of this
# node's torch line, torch-M.m/. Lacking a wheel for this node's Python and torch line (a cp312 node, while the
# builder's Debian has 3.11), it is built here as the builder builds it and indexed in a copy. Extra wheels travel
# in .whl/ (flag_gems and its deps) and build/node-wheels/ (the build and index tools, the README's "On a cluster").
# At most 7 files land in $OUT (reports/index-node): node.txt build.log pytest.txt junit.xml bench.txt bench/*.
set -euo pipefail
OUT=${OUT:-reports/index-node}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
repo=$(pwd)
variant=${VARIANT:-cu130}
tools=/tmp/torch-fl-tools
rm -rf "$tools" /tmp/torch-fl-index /tmp/torch-fl-node
[ "${REUSE_BUILD:-0}" = 1 ] || rm -rf /tmp/torch-fl-dist /tmp/torch-fl-repaired
export PYTHONUNBUFFERED=1
# A wheel in both folders (scikit-build-core) is taken once: pip refuses the same project twice.
extras=$(for w in build/node-wheels/*.whl .whl/*.whl; do [ -f "$w" ] && echo "$w"; done | awk -F/ '!seen[$NF]++')
if [ -n "$extras" ]; then
  # shellcheck disable=SC2086  # one path per word
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$tools" $extras
fi
export PYTHONPATH="$tools${PYTHONPATH:+:$PYTHONPATH}" PATH="$tools/bin:$PATH"
log() { echo "$*" | tee -a "$OUT/node.txt"; }
: >"$OUT/node.txt"

# What this node needs: its Python tag and torch line, in the project's variant scheme.
read -r pytag label page line < <(TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" - "$variant" <<'PY'
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("v", "torch_fl/_variant.py"); v = importlib.util.module_from_spec(spec)
sys.modules["v"] = v; spec.loader.exec_module(v)
want = v.make(torch.__version__, sys.argv[1])
print(f"cp{sys.version_info[0]}{sys.version_info[1]}", want.label, v.line_page(want.line), "%d.%d" % want.line)
PY
)
log "node: $("$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__,
  "gpus", torch.cuda.device_count())'); wants +$label ($pytag)"

index="$repo/wheels/$variant"
have_wheel=0
[ "${REBUILD:-0}" != 1 ] && compgen -G "$index/torch_fl-*+$label-$pytag-*.whl" >/dev/null && have_wheel=1
if [ "$have_wheel" = 1 ] && [ -f "$index/$page/simple/torch-fl/index.html" ]; then
  log "index: the carried wheels/$variant has $(cd "$index" && ls torch_fl-*+"$label"-"$pytag"-*.whl) on $page/"
else
  if [ "$have_wheel" = 1 ]; then  # an index of another layout: the wheel is there, its line's page is not
    log "index: the carried wheels/$variant has the +$label $pytag wheel but no $page/ page; indexing a copy"
  else
    log "index: the carried wheels/$variant has no +$label $pytag wheel ($(cd "$index" 2>/dev/null \
      && ls torch_fl-*.whl 2>/dev/null | tr '\n' ' ')); building it as the builder does"
    for cxx in ${CXX:-} g++ /usr/bin/g++ c++; do  # a g++ with a shared libstdc++ (CMakeLists.txt says why)
      lib=$(command -v "$cxx" >/dev/null && "$cxx" -print-file-name=libstdc++.so || true)
      if [ "${lib#/}" != "$lib" ]; then CXX=$(command -v "$cxx") && export CXX && break; fi
    done
    start=$(date +%s)
    if [ "${REUSE_BUILD:-0}" = 1 ] && compgen -G "/tmp/torch-fl-repaired/*.whl" >/dev/null; then
      log "build: reusing $(cd /tmp/torch-fl-repaired && ls ./*.whl) (REUSE_BUILD=1)"
    else
      excludes=$("$PY" -c 'import tomllib, sys; m = tomllib.load(open("configs/toolchains.toml", "rb"))
print(" ".join(next(r for r in m["toolchains"].values() if r["variant"] == sys.argv[1])["auditwheel"]["exclude"]))' \
        "$variant")
      { VARIANT=$variant BUILD_ENV="CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)" "$PY" docker/scripts/build_wheel.py . \
          /tmp/torch-fl-dist \
        && AUDITWHEEL_EXCLUDE=$excludes "$PY" docker/scripts/repair_wheel.py /tmp/torch-fl-dist /tmp/torch-fl-repaired
      } >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "build failed: $OUT/build.log"; exit 1; }
      log "build + repair: $(( $(date +%s) - start )) s: $(cd /tmp/torch-fl-repaired && ls ./*.whl)"
    fi
    grep -A12 "(repaired)" /tmp/torch-fl-repaired/auditwheel-show.txt >>"$OUT/node.txt" || true
  fi
  mkdir -p /tmp/torch-fl-index
  cp -r "$index" "/tmp/torch-fl-index/$variant" 2>/dev/null || mkdir -p "/tmp/torch-fl-index/$variant"
  [ "$have_wheel" = 1 ] || cp /tmp/torch-fl-repaired/*.whl "/tmp/torch-fl-index/$variant/"
  index=/tmp/torch-fl-index/$variant
  "$PY" -c 'import sys; from pathlib import Path; from build_tools import index
r = index.build(Path(sys.argv[1]), sys.argv[2]); print("index:", ", ".join(d.filename for d in r.dists))' \
    "$index" "$variant" | tee -a "$OUT/node.txt"
fi

# The node: its own Python with torch (a venv over the system site-packages), nothing of torch-fl. A venv $PY's
# site-packages (where torch is) come through a .pth file: --system-site-packages reaches only the base's. Without
# pip the venv has no seeded setuptools to shadow torch's: the node's pip installs into it, else (an old pip) its own.
node_py=/tmp/torch-fl-node/bin/python
"$PY" -m venv --system-site-packages --without-pip /tmp/torch-fl-node
if "$PY" -m pip --python "$node_py" --version >/dev/null 2>&1; then
  node_pip=("$PY" -m pip --python "$node_py")
else
  rm -rf /tmp/torch-fl-node && "$PY" -m venv --system-site-packages /tmp/torch-fl-node
  node_pip=("$node_py" -m pip)
fi
"$PY" -c 'import sys, sysconfig; sys.prefix != sys.base_prefix and print(sysconfig.get_paths()["purelib"])' \
  >"$("$node_py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch-site.pth"
pipline="pip install \"torch==$line.*\" torch-fl --index-url file://$index/$page/simple/"
log "install: $pipline"
node_install() {
  (cd /tmp && PIP_CONFIG_FILE=/dev/null "${node_pip[@]}" install --no-cache-dir "$@" \
     --index-url "file://$index/$page/simple/" "torch==$line.*" torch-fl) >/tmp/torch-fl-pip.log 2>&1
}
if ! node_install; then
  # pip also checks torch's own requirements, which an offline node's torch may lack and this index cannot give:
  # said loudly, then torch-fl alone (its one requirement, the torch line, holds).
  tail -3 /tmp/torch-fl-pip.log | tee -a "$OUT/node.txt"
  log "WARNING: the pip line failed on torch's own requirements (above); installing torch-fl with --no-deps"
  node_install --no-deps
fi
tail -2 /tmp/torch-fl-pip.log | tee -a "$OUT/node.txt"
cd /tmp  # import the installed package, never the checkout
export FLAGOS_ACCELERATOR=${FLAGOS_ACCELERATOR:-cuda}
installed=$("$node_py" -c 'from importlib.metadata import version; print(version("torch-fl"))')
where=$("$node_py" -c 'import torch_fl, os; print(os.path.dirname(torch_fl.__file__))')
log "installed: torch-fl $installed at $where"
if [ "$installed" != "0.1.0+$label" ] || [ "${where#/tmp/torch-fl-node/}" = "$where" ]; then
  log "FAIL: the node venv must hold torch-fl 0.1.0+$label (another torch-fl on the node's path shadows it?)"
  exit 1
fi
"$node_py" -m torch_fl info --check 2>&1 | tee -a "$OUT/node.txt"
for route in ${ROUTES:-native flaggems}; do
  FLAGOS_OP_add__Tensor=$route FLAGOS_LOG=dispatch "$node_py" -c "
import torch, torch_fl
a = torch.randn(101, 3, 320); b = torch.randn(101, 3, 320)
out = a.to('flagos') + b.to('flagos'); torch.flagos.synchronize()
assert torch.allclose(out.cpu(), a + b), 'mismatch'
print('add ok on route $route')" 2>&1 | grep -E "add.Tensor|add ok|Error|error" | tee -a "$OUT/node.txt"
done

tests_copy=/tmp/torch-fl-tests
rm -rf "$tests_copy" && cp -r "$repo/tests" "$tests_copy" && cp "$repo/pyproject.toml" "$tests_copy/"
status=0
t0=$(date +%s)
# shellcheck disable=SC2086  # PYTEST_ARGS and BENCH_ARGS are lists of options
(cd "$tests_copy" && "$node_py" -m pytest -c pyproject.toml routing correctness -q -p no:cacheprovider -rs \
   --junitxml="$OUT/junit.xml" ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/pytest.txt"; exit "${PIPESTATUS[0]}") || status=$?
log "routing and correctness suites from the installed wheel: $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/pytest.txt")"
t0=$(date +%s)
# The harness runs from the tests' copy, whose folder holds no torch_fl: the installed wheel is what it measures.
commit=${TORCH_FL_COMMIT:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || true)}
# shellcheck disable=SC2086
(cd "$tests_copy/bench" && TORCH_FL_COMMIT=$commit "$node_py" -m harness --accelerator "${BENCH_ACCELERATOR:-cuda}" \
   --out /tmp/torch-fl-bench ${BENCH_ARGS:---short} 2>&1 | tee "$OUT/bench.txt"; exit "${PIPESTATUS[0]}") || status=$?
mkdir -p "$OUT/bench"
cp /tmp/torch-fl-bench/bench.json /tmp/torch-fl-bench/bench.md "$OUT/bench/" 2>/dev/null || true
log "bench: $(( $(date +%s) - t0 )) s"
exit "$status"
