#!/usr/bin/env bash
# The native batch copier on the GPU machine: (1) it is compiled there when a C compiler exists (else the carried
# pyclient/gload/_copier.so serves: carry it too), (2) the CUDA tests of the copier and of the hand-off run against
# that machine's torch (tests/test_native.py, tests/test_torch.py, tests/test_handoff.py,
# tests/test_cuda_host_path.py), (3) the handoff suite (LATENCY/TRAIN/ORDER/TRAIN_ORDER as there).
#
# bench/device.sh native (TESTS=0 skips step 2; about 2 minutes plus the handoff suite).
set -uo pipefail
. bench/lib.sh
if command -v cc >/dev/null; then
	scripts/build-copier.sh && echo "copier: compiled here ($(cc --version | head -1))"
else
	echo "copier: no C compiler here; the carried build"
fi
PYTHONPATH=$PWD/pyclient python3 -c 'from gload import _native; print("native copier:", _native.AVAILABLE, _native.WHY_NOT)'
if [[ ${TESTS:-1} == 1 ]]; then
	PY=$(pytest_python)
	echo "== pytest (CUDA: copier and hand-off) $(date -u +%T)"
	(cd pyclient && GLOAD_BIN=$PWD/../$G timeout 300 $PY -m pytest -q -rs -p no:cacheprovider tests/test_native.py \
		tests/test_torch.py tests/test_handoff.py tests/test_cuda_host_path.py 2>&1 | tail -25) | tee "$OUT/pytest_cuda.txt"
fi
bash bench/suites/handoff.sh
