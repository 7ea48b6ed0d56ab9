#!/bin/bash
# with-dtk CMD [ARGS...]: CMD in the DTK environment (every RUN of the dcu Dockerfile, the test image's ENTRYPOINT).
# /opt/dtk/env.sh (or TORCH_FL_DTK_ENV) reads unset variables, so it is sourced without `set -u`. hyhal's libraries
# (/opt/hyhal/lib, mounted by `nox -s test-dcu` where the host has them) go on LD_LIBRARY_PATH when present.
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
