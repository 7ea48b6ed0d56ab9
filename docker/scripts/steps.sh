#!/bin/bash
# The steps the stages of docker/*/Dockerfile share, one RUN (one layer) each:
#   steps apt PACKAGE...    Debian packages without recommends, after dropping the apt sources of nvidia/cuda bases
#                           (one source fewer to reach through a proxy; its signing key rotates under old images)
#   steps check-python      python3 is the matrix row's PYTHON_VERSION (X.Y)
#   steps python X.Y SOURCE the venv /opt/venv of CPython X.Y: from the context's pythons/X.Y (SOURCE host, a copy of
#                           the host's installation) or from this image's own Debian packages (SOURCE a suite)
#   steps python-headers X.Y=SOURCE...  each Python's Python.h and pyconfig.h in /opt/torch-fl/python-headers/X.Y:
#                           from pythons/X.Y/include (host) or the suite's libpythonX.Y-dev, only unpacked
#   steps lock FILE         a lock's packages by hash, --no-deps; pip reads the BuildKit secret pipconf
#   steps wheel DIR [NAME]  DIR's wheel with --no-index, then pip check (with NAME, only NAME's problems fail:
#                           DTK images carry conflicts of their own)
# pip is python3 -m pip: the venv's where PATH starts with one, else the image's own (dcu).
set -euo pipefail

usage() {
  echo "usage: steps apt PACKAGE... | check-python | python X.Y SOURCE | python-headers X.Y=SOURCE..." >&2
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

step_python_headers() {
  local out=/opt/torch-fl/python-headers item version source
  mkdir -p "$out"
  for item in "$@"; do
    version="${item%%=*}" source="${item#*=}"
    mkdir -p "$out/$version"
    if [ "$source" = host ]; then
      cp -a "$STAGED_PYTHONS/$version/include/python$version/." "$out/$version/"
    else
      python_headers_from_debian "$version" "$source" "$out/$version"
    fi
    [ -f "$out/$version/Python.h" ] && [ -f "$out/$version/pyconfig.h" ] || {
      echo "steps python-headers: no Python.h or pyconfig.h of $version ($source)" >&2; exit 1; }
  done
}

# Only unpacked, never installed: the headers of another Debian suite need none of its libraries to be compiled
# against. The package index comes from the image's own Debian mirror.
python_headers_from_debian() {
  local version="$1" suite="$2" dest="$3" tmp mirror
  tmp=$(mktemp -d)
  mirror=$(grep -rhoE 'https?://[^ ]+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d 2>/dev/null | head -n1)
  mirror="${mirror:-http://deb.debian.org/debian}"
  mkdir -p "$tmp/lists/partial" "$tmp/archives/partial"
  echo "deb $mirror $suite main" >"$tmp/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache::Archives=$tmp/archives" -o APT::Sandbox::User=root
    "${APT_FRESHNESS[@]}")
  apt-get "${opts[@]}" update
  (cd "$tmp" && apt-get "${opts[@]}" download "libpython$version-dev")
  dpkg-deb -x "$tmp"/libpython"$version"-dev_*.deb "$tmp/root"
  cp -a "$tmp/root/usr/include/python$version/." "$dest/"
  # Debian's pyconfig.h includes the one of the machine's multiarch triplet: take that one
  cp "$tmp/root/usr/include/$(uname -m)-linux-gnu/python$version/pyconfig.h" "$dest/pyconfig.h"
  rm -rf "$tmp"
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
  python-headers) step_python_headers "$@" ;;
  lock) step_lock "$@" ;;
  wheel) step_wheel "$@" ;;
  *) usage ;;
esac
