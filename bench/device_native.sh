#!/usr/bin/env bash
# Issue 14, the native batch copier on the GPU machine: (1) it is compiled there when a C compiler exists (else the
# carried pyclient/gload/_copier.so serves), (2) the CUDA tests of the copier and of the hand-off run against that
# machine's torch (tests/test_native.py, tests/test_torch.py, tests/test_handoff.py, tests/test_cuda_host_path.py),
# (3) bench/device_handoff_ab.sh compares the client before it (build/devrun/pyclient-base, from
# bench/prepare_handoff_ab.sh) with this tree's, same server, same call (LATENCY/TRAIN/ORDER/TRAIN_ORDER as there).
#
# Before carrying build/devrun and pyclient/gload/_copier.so: bench/prepare_devrun.sh, then
# BASE=<commit before the copier> bench/prepare_handoff_ab.sh. On the GPU machine: OUT=$OUT bench/device_native.sh
# (TESTS=0 skips step 2).
set -uo pipefail
d=build/devrun
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if command -v cc >/dev/null; then
	scripts/build-copier.sh && echo "copier: compiled here ($(cc --version | head -1))"
else
	echo "copier: no C compiler here; the carried build"
fi
PYTHONPATH=$PWD/pyclient python3 -c 'from gload import _native; print("native copier:", _native.AVAILABLE, _native.WHY_NOT)'
G=$d/gload
[[ -x $G ]] || { gunzip -kf $d/gload.gz && chmod +x $G; }
if [[ ${TESTS:-1} == 1 ]]; then
	PY=python3
	if ! python3 -c 'import pytest' 2>/dev/null; then
		V=$(mktemp -d /tmp/gload-venv.XXXXXX)
		python3 -m venv --system-site-packages "$V" && "$V/bin/pip" install -q --no-index --find-links $d/whl pytest 2>&1 | tail -2
		PY=$V/bin/python
	fi
	echo "== pytest (CUDA: copier and hand-off) $(date -u +%T)"
	(cd pyclient && GLOAD_BIN=$PWD/../$G timeout 300 $PY -m pytest -q -rs -p no:cacheprovider tests/test_native.py \
		tests/test_torch.py tests/test_handoff.py tests/test_cuda_host_path.py 2>&1 | tail -25) | tee "$OUT/pytest_cuda.txt"
fi
bash bench/device_handoff_ab.sh
