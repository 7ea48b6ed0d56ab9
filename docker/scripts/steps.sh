#!/bin/bash
# The steps the stages of docker/*/Dockerfile share. One RUN per step keeps each step a layer of its own.
#   steps apt PACKAGE...    Debian packages without recommends; first drops the apt sources of nvidia/cuda bases
#                           (one source fewer to reach through a proxy; its signing key rotates under old images)
#   steps check-python      python3 is the matrix row's PYTHON_VERSION (X.Y)
#   steps lock FILE         a lock's packages by hash, --no-deps (the lock holds every dependency); pip reads the
#                           BuildKit secret pipconf (index, staged wheelhouses, the cacert secret)
#   steps wheel DIR [NAME]  DIR's wheel with --no-index, then pip check; with NAME only that project's problems
#                           fail (DTK images carry conflicts of their own)
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
  # No bytecode at install time: a torch with its CUDA libraries holds tens of thousands of modules that no test
  # imports, and compiling them is a large part of a test image's build. Python compiles what a process imports
  # at its first import and writes it beside the source, so the images leave PYTHONDONTWRITEBYTECODE unset: in a
  # test container whose user may write the venv (root, as CI runs), every later process loads that bytecode
  # (about a second less per process that imports torch).
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
