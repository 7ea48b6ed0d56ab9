#!/bin/bash
# Run a command in the DTK environment (the ENTRYPOINT of the dcu test image; every RUN of the dcu Dockerfile).
#
#   with-dtk CMD [ARGS...]
#
# /opt/dtk/env.sh sets ROCM_PATH, PATH, LD_LIBRARY_PATH, ... for DTK's HIP runtime and compilers. It reads unset
# variables, so it is sourced without `set -u` (never enable -u around it). TORCH_FL_DTK_ENV overrides its path.
# hyhal's libraries (/opt/hyhal/lib: libhydmi.so, mounted read-only by `nox -s test-dcu` when the host has
# them) are appended to LD_LIBRARY_PATH when present and not already on it.
set +u
dtk_env="${TORCH_FL_DTK_ENV:-/opt/dtk/env.sh}"
if [ ! -f "$dtk_env" ]; then
  echo "with-dtk: $dtk_env not found: the image is not a DTK image (BUILDER_IMAGE/TEST_IMAGE must be one)" >&2
  exit 1
fi
# shellcheck disable=SC1090
source "$dtk_env" >&2
if [ -d /opt/hyhal/lib ] && [[ ":${LD_LIBRARY_PATH:-}:" != *":/opt/hyhal/lib:"* ]]; then
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/opt/hyhal/lib"
fi
if [ "$#" -eq 0 ]; then
  echo "usage: with-dtk CMD [ARGS...]" >&2
  exit 2
fi
exec "$@"
