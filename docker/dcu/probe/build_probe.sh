#!/bin/bash
# Build torch-fl-dcu-probe with DTK's hipcc for every PYTORCH_ROCM_ARCH target (BUILD_ENV's, else the environment's,
# else DTK's), then run `--version` to show it links and loads in this image. Run under with-dtk.
#   build_probe.sh SOURCE OUTPUT
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
