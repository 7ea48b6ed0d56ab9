#!/bin/bash
# The steps the stages of docker/*/Dockerfile share, one RUN (one layer) each:
#   steps apt PACKAGE...    Debian packages without recommends, after dropping the apt sources of nvidia/cuda bases
#                           (one source fewer to reach through a proxy; its signing key rotates under old images)
#   steps check-python      python3 is the matrix row's PYTHON_VERSION (X.Y)
#   steps lock FILE         a lock's packages by hash, --no-deps; pip reads the BuildKit secret pipconf
#   steps wheel DIR [NAME]  DIR's wheel with --no-index, then pip check (with NAME, only NAME's problems fail:
#                           DTK images carry conflicts of their own)
# pip is python3 -m pip: the venv's where PATH starts with one, else the image's own (dcu).
set -euo pipefail

usage() {
  echo "usage: steps apt PACKAGE... | check-python | lock FILE | wheel DIR [NAME]" >&2
  exit 2
}

step_apt() {
  [ "$#" -gt 0 ] || usage
  rm -f /etc/apt/sources.list.d/cuda*.list /etc/apt/sources.list.d/cuda*.sources
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "$@"
  rm -rf /var/lib/apt/lists/*
}

step_check_python() {
  python3 -c 'import os, sys; have = "%d.%d" % sys.version_info[:2]; want = os.environ["PYTHON_VERSION"]
sys.exit(None if have == want else f"image python {have} != matrix python {want}")'
}

step_lock() {
  [ "$#" -eq 1 ] || usage
  # a lock that pins nothing (the shared lock of a row outside a torch.shared_deps group) installs nothing
  grep -q '^[A-Za-z0-9]' "$1" || return 0
  # --no-compile: most of torch's modules are never imported, and compiling them is much of a test image's build.
  # PYTHONDONTWRITEBYTECODE stays unset, so a container compiles what it imports once for all its processes.
  PIP_CONFIG_FILE=/run/secrets/pipconf python3 -m pip install --require-hashes --no-deps --no-compile -r "$1"
}

step_wheel() {
  [ "$#" -eq 1 ] || [ "$#" -eq 2 ] || usage
  python3 -m pip install --no-cache-dir --no-index "$1"/*.whl
  if [ "$#" -eq 1 ]; then
    python3 -m pip check
  else
    { python3 -m pip check || true; } | { ! grep -i "^$2"; }
  fi
}

[ "$#" -gt 0 ] || usage
step="$1"
shift
case "$step" in
  apt) step_apt "$@" ;;
  check-python) step_check_python "$@" ;;
  lock) step_lock "$@" ;;
  wheel) step_wheel "$@" ;;
  *) usage ;;
esac
