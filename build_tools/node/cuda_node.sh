#!/usr/bin/env bash
# Launches a GPU node's mode: builds torch_fl natively on a CUDA node with torch but no Docker (a lent GPU machine),
# installs it beside the node's torch and runs MODE from a copy of tests/. The steps are Python
# (build_tools/node: `python -m build_tools.node --help` lists the modes, the files each writes and every knob).
#   [REUSE_BUILD=1] [PYTHON=python3] [CXX=g++] [KNOB=value ...] bash build_tools/node/cuda_node.sh [MODE] [--dry-run]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."  # the checkout's root: the modes read tests/, docker/scripts/ and .whl/
exec "${PYTHON:-python3}" -m build_tools.node "${@:-full}"
