#!/usr/bin/env bash
# Sets up everything the build, the demo and the tests need on a fresh Debian machine; safe to run again.
#   - Go modules (go mod download)
#   - a Python virtualenv in .venv with the pinned test packages (.ci/requirements.txt), and .venv-oldest with the
#     oldest grpcio/protobuf/numpy the Python client supports (.ci/requirements-oldest.txt)
#   - with SETUP_HF=1 (the default in CI): libtokenizers.a for the optional Rust-core engine (cargo)
set -euo pipefail
cd "$(dirname "$0")/.."
need() { command -v "$1" >/dev/null 2>&1 || { echo "setup: $1 is required but not installed" >&2; exit 1; }; }
need go
need python3
go mod download
if [[ ! -x .venv/bin/python ]] || ! .venv/bin/python -c 'import pyarrow, datasets, tokenizers, numpy, pytest, grpc, google.protobuf' 2>/dev/null; then
	python3 -m venv .venv
	.venv/bin/pip install --quiet --disable-pip-version-check -r .ci/requirements.txt
fi
# The Python client's suite also runs against the oldest supported grpcio/protobuf/numpy (make test-py).
if [[ ! -x .venv-oldest/bin/python ]] || ! .venv-oldest/bin/python -c 'import grpc, google.protobuf, numpy, pytest' 2>/dev/null; then
	python3 -m venv .venv-oldest
	.venv-oldest/bin/pip install --quiet --disable-pip-version-check -r .ci/requirements-oldest.txt
fi
if [[ ${SETUP_HF:-0} == 1 ]]; then
	need cargo
	scripts/build-libtokenizers.sh
fi
echo "setup: ready"
