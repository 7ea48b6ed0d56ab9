#!/bin/bash
# The steps the stages of docker/*/Dockerfile share, one RUN (one layer) each:
#   steps apt PACKAGE...    Debian packages without recommends, after dropping the apt sources of nvidia/cuda bases
#                           (one source fewer to reach through a proxy; its signing key rotates under old images)
#   steps check-python      python3 is the matrix row's PYTHON_VERSION (X.Y)
#   steps python X.Y SOURCE the venv /opt/venv of CPython X.Y: from the context's pythons/X.Y (SOURCE host, a copy of
#                           the host's installation) or from this image's own Debian packages (SOURCE a suite)
#   steps lock FILE         a lock's packages by hash, --no-deps; pip reads the BuildKit secret pipconf
#   steps wheel DIR [NAME]  DIR's wheel with --no-index, then pip check (with NAME, only NAME's problems fail:
#                           DTK images carry conflicts of their own)
# pip is python3 -m pip: the venv's where PATH starts with one, else the image's own (dcu).
set -euo pipefail

usage() {
  echo "usage: steps apt PACKAGE... | check-python | python X.Y SOURCE" >&2
  echo "       steps lock FILE | wheel DIR [NAME]" >&2
  exit 2
}

# sid's Release files carry a Valid-Until a week ahead; a mirror that holds a snapshot of sid serves them past it.
# The signatures are still checked: only the freshness window is not.
APT_FRESHNESS=(-o Acquire::Check-Valid-Until=false)

step_apt() {
  [ "$#" -gt 0 ] || usage
  rm -f /etc/apt/sources.list.d/cuda*.list /etc/apt/sources.list.d/cuda*.sources
  export DEBIAN_FRONTEND=noninteractive
  apt-get "${APT_FRESHNESS[@]}" update
  apt-get install -y --no-install-recommends "$@"
  rm -rf /var/lib/apt/lists/*
}

step_check_python() {
  python3 -c 'import os, sys; have = "%d.%d" % sys.version_info[:2]; want = os.environ["PYTHON_VERSION"]
sys.exit(None if have == want else f"image python {have} != matrix python {want}")'
}

STAGED_PYTHONS=/pythons  # the context's pythons/ (bind-mounted by the RUN that needs it)

# The shared libraries a CPython built on Debian bookworm loads (its C modules: ssl, ctypes, sqlite3, ...).
HOST_PYTHON_LIBS=(libssl3 zlib1g libffi8 libbz2-1.0 liblzma5 libsqlite3-0 libreadline8 libncursesw6 libuuid1
  libgdbm6 libexpat1 ca-certificates)

step_python() {
  [ "$#" -eq 2 ] || usage
  local version="$1" source="$2" python
  if [ "$source" = host ]; then
    [ -x "$STAGED_PYTHONS/$version/bin/python$version" ] || {
      echo "steps python: no staged python$version under the context's pythons/$version" >&2; exit 1; }
    step_apt "${HOST_PYTHON_LIBS[@]}"
    cp -a "$STAGED_PYTHONS/$version" "/opt/python$version"
    echo "/opt/python$version/lib" >"/etc/ld.so.conf.d/python$version.conf"
    ldconfig
    python="/opt/python$version/bin/python$version"
  else
    step_apt "python$version" "python$version-venv"
    python="python$version"
  fi
  "$python" -m venv /opt/venv
  /opt/venv/bin/python -c 'import ssl, sqlite3, ctypes, zlib' # what pip and the suites import
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
  python) step_python "$@" ;;
  lock) step_lock "$@" ;;
  wheel) step_wheel "$@" ;;
  *) usage ;;
esac
