#!/bin/bash
# Build torch-fl-dcu-probe (dcu_probe.cpp beside this script, torch-free) with DTK's hipcc for every PYTORCH_ROCM_ARCH
# target, then run `--version` to prove it links and loads in this image. Run under with-dtk.
#
#   build_probe.sh SOURCE OUTPUT
#
# PYTORCH_ROCM_ARCH comes from BUILD_ENV (the matrix row's build_env, "K=V K=V"), else the environment, else the
# DTK default below.
set -euo pipefail
src="$1" out="$2"
arch="${PYTORCH_ROCM_ARCH:-gfx906;gfx926;gfx928;gfx936}"
for kv in ${BUILD_ENV:-}; do
  case "$kv" in PYTORCH_ROCM_ARCH=*) arch="${kv#PYTORCH_ROCM_ARCH=}" ;; esac
done
flags=()
IFS=';, ' read -r -a targets <<<"$arch"
for t in "${targets[@]}"; do
  [ -n "$t" ] && flags+=("--offload-arch=$t")
done
mkdir -p "$(dirname "$out")"
echo "build_probe: hipcc ${flags[*]} -std=c++17 -O2 -o $out $src -ldl"
hipcc "${flags[@]}" -std=c++17 -O2 -Wall -o "$out" "$src" -ldl
"$out" --version
