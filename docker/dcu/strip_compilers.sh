#!/bin/bash
# Remove the compiler drivers from the dcu test image (the builder's DTK image): the suites run the wheel on the DTK
# runtime alone, and run_tests.py checks that no compiler is on PATH. Libraries stay (hipRTC uses libamd_comgr, not
# clang). Run under with-dtk, so DTK's PATH is searched too.
set -euo pipefail
shopt -s nullglob
names=(cc c++ gcc g++ clang clang++ clang-cpp hipcc hipcc.pl hipcc.bin nvcc amdclang amdclang++ hipclang
  'gcc-[0-9]*' 'g++-[0-9]*' 'clang-[0-9]*' 'clang++-[0-9]*' 'x86_64-linux-gnu-gcc*' 'x86_64-linux-gnu-g++*')
IFS=: read -r -a dirs <<<"$PATH"
removed=0
for d in "${dirs[@]}"; do
  [ -d "$d" ] || continue
  for n in "${names[@]}"; do
    for f in "$d"/$n; do
      if [ -e "$f" ] || [ -L "$f" ]; then
        rm -f "$f"
        removed=$((removed + 1))
      fi
    done
  done
done
left=()
for n in cc c++ gcc g++ clang clang++ hipcc nvcc; do
  if command -v "$n" >/dev/null 2>&1; then left+=("$(command -v "$n")"); fi
done
if [ "${#left[@]}" -gt 0 ]; then
  echo "strip_compilers: still on PATH: ${left[*]}" >&2
  exit 1
fi
echo "strip_compilers: removed $removed compiler drivers from PATH"
