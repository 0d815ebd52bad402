#!/usr/bin/env bash
# Sets up what the build, the demo and the tests need on a fresh Debian machine; safe to run again.
#   - Go modules (go mod download)
#   - a Python virtualenv in .venv with what the demo needs (.ci/requirements-demo.txt: the client's runtime
#     packages and Hugging Face datasets), and the Python client installed editable
#   - with SETUP_TEST=1 (make test): the test suite's packages in .venv (.ci/requirements.txt: pytest, tokenizers,
#     ray), and .venv-oldest with the oldest grpcio/protobuf/numpy the Python client supports
#     (.ci/requirements-oldest.txt) on Debian's Python, whose system site packages give it torch 1.13 (CPU, apt
#     python3-torch) for the DataLoader and DDP tests, with the oldest datasets/transformers/accelerate/torchdata
#     tested (.ci/requirements-oldest-nodeps.txt is installed without dependencies)
#   - with SETUP_TEST=1: bin/versitygw, a real S3-compatible server (Versity S3 Gateway, Apache-2.0) built from its Go
#     module, for the object-storage tests (about 2-4 minutes cold on 2 cores, nothing when present)
#   - with SETUP_HF=1 (the default in CI): libtokenizers.a for the optional Rust-core engine (cargo)
# Every step that can take longer than a few seconds prints a line before it, a line every 30 s while it runs, and
# a line with the seconds it took.
set -euo pipefail
cd "$(dirname "$0")/.."
need() { command -v "$1" >/dev/null 2>&1 || { echo "setup: $1 is required but not installed" >&2; exit 1; }; }
# step NAME CMD...: runs a long set-up step with a line before it, one every 30 s while it runs, and one after it
# with the seconds it took.
step() {
	local name=$1 t0=$SECONDS
	shift
	echo "setup: $name ..."
	(while sleep 30; do echo "setup: $name: still running ($((SECONDS - t0)) s)"; done) &
	local ticker=$! rc=0
	"$@" || rc=$?
	kill $ticker 2>/dev/null
	wait $ticker 2>/dev/null || true
	if ((rc != 0)); then
		echo "setup: $name FAILED (exit $rc) after $((SECONDS - t0)) s" >&2
		exit $rc
	fi
	echo "setup: $name done in $((SECONDS - t0)) s"
}
# pip_install PIP ARGS...: pip with one line per package it collects (its --quiet hides minutes of work; its full
# output is pages) and every error.
pip_install() { (set -o pipefail; "$@" --disable-pip-version-check --progress-bar off 2>&1 | { grep -E --line-buffered '^(Collecting|Successfully|ERROR|error|  )' || true; }); }
need go
need python3
step "go mod download" go mod download
if [[ ! -x .venv/bin/python ]]; then
	python3 -m venv .venv
fi
if ! .venv/bin/python -c 'import pyarrow, datasets, numpy, grpc, google.protobuf' 2>/dev/null; then
	step "pip install .ci/requirements-demo.txt into .venv (grpcio, protobuf, numpy, datasets: about 150 MB)" \
		pip_install .venv/bin/pip install -r .ci/requirements-demo.txt
fi
if [[ ${SETUP_TEST:-0} == 1 ]] && ! .venv/bin/python -c 'import tokenizers, pytest, pytest_timeout, ray' 2>/dev/null; then
	step "pip install .ci/requirements.txt into .venv (the test suite: pytest, tokenizers, ray: about 300 MB)" \
		pip_install .venv/bin/pip install -r .ci/requirements.txt
fi
# The Python client itself, editable, so that .venv/bin/python -c "import gload" works from anywhere. The compat
# mode puts pyclient on sys.path (a .pth file), so that a directory named gload in the working directory (a checkout
# cloned as ./gload) cannot shadow it as a namespace package.
if ! .venv/bin/python -c 'import gload, os, sys; sys.exit(os.path.dirname(gload.__file__ or "") != os.path.abspath("pyclient/gload"))' 2>/dev/null; then
	step "pip install -e pyclient into .venv" \
		.venv/bin/pip install --quiet --disable-pip-version-check --no-deps -e pyclient --config-settings editable_mode=compat
fi
# The Python client's native batch copier (pyclient/gload/_copier.c: plain C, no Python API, so one build serves every
# Python of this machine; pip builds it too when it installs the package): under a second.
if [[ ! pyclient/gload/_copier.so -nt pyclient/gload/_copier.c ]]; then
	if command -v cc >/dev/null 2>&1; then
		step "cc pyclient/gload/_copier.c (the Python client's native batch copier)" scripts/build-copier.sh
	else
		echo "setup: no C compiler (cc): the Python client's native copier is not built; its Python hand-off serves every stream (CI requires the copier)" >&2
	fi
fi
if [[ ${SETUP_TEST:-0} == 1 ]]; then
	# The Python client's suite also runs against the oldest supported grpcio/protobuf/numpy (make test-py), with
	# Debian's CPU torch 1.13 (the oldest torch supported): a few hundred MB from apt instead of PyPI's CUDA wheels.
	if ! /usr/bin/python3 -c 'import torch, ensurepip' 2>/dev/null; then
		if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
			step "apt-get update" apt-get update -qq
			step "apt-get install python3-torch python3-venv (CPU torch 1.13, a few hundred MB)" \
				env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch python3-venv >/dev/null
		else
			echo "setup: no torch for /usr/bin/python3 (apt-get install python3-torch python3-venv); torch tests will skip" >&2
		fi
	fi
	if [[ ! -x .venv-oldest/bin/python ]]; then
		/usr/bin/python3 -m venv --system-site-packages .venv-oldest
	fi
	if ! .venv-oldest/bin/python -c 'import grpc, google.protobuf, numpy, pytest, pytest_timeout, datasets, transformers, accelerate, torchdata, trl, rich' 2>/dev/null; then
		step "pip install .ci/requirements-oldest*.txt into .venv-oldest (grpcio, protobuf, numpy, datasets, transformers, accelerate, torchdata)" \
			pip_install .venv-oldest/bin/pip install -r .ci/requirements-oldest.txt
		step "pip install --no-deps .ci/requirements-oldest-nodeps.txt into .venv-oldest" \
			pip_install .venv-oldest/bin/pip install --no-deps -r .ci/requirements-oldest-nodeps.txt
	fi
	# Forked DataLoader workers of a process that used gRPC need grpcio >= 1.85 (older ones abort or hang there;
	# gload refuses them with ForkUnsafe): the fork tests run with Debian's torch and that grpcio (a few MB).
	if [[ ! -x .venv-forksafe/bin/python ]]; then
		/usr/bin/python3 -m venv --system-site-packages .venv-forksafe
	fi
	if ! .venv-forksafe/bin/python -c 'import grpc, google.protobuf, pytest, pytest_timeout, sys; sys.exit(grpc.__version__ != "1.85.3")' 2>/dev/null; then
		step "pip install .ci/requirements-forksafe.txt into .venv-forksafe (grpcio 1.85 beside Debian's torch)" \
			pip_install .venv-forksafe/bin/pip install -r .ci/requirements-forksafe.txt
	fi
fi
if [[ ${SETUP_TEST:-0} == 1 ]]; then
	# Object-storage tests run against a real S3 server on loopback (loader/objstore/s3test starts it).
	vgw_version=v1.8.0
	if [[ ! -x bin/versitygw ]] || [[ $(cat bin/.versitygw-version 2>/dev/null) != "$vgw_version" ]]; then
		mkdir -p bin
		step "go install versitygw $vgw_version into bin/ (the S3 test server; a few minutes on a cold cache)" \
			env GOBIN="$PWD/bin" go install -ldflags='-s -w' "github.com/versity/versitygw/cmd/versitygw@$vgw_version"
		echo "$vgw_version" >bin/.versitygw-version
	fi
fi
if [[ ${SETUP_HF:-0} == 1 ]]; then
	need cargo
	scripts/build-libtokenizers.sh # says itself what it does and how long it takes
fi
echo "setup: ready"
