#!/usr/bin/env bash
# Issue 16: the Python client's whole suite (pyclient/tests) on the GPU machine, against the torch installed there
# (2.11 expected), so that the torch tests (DataLoader workers, CUDA pinned copies, DDP) run against torch 2.x, which
# CI cannot install (PyPI's Linux torch wheels pull ~3 GB of CUDA libraries). A whole torch group skipping fails the
# run (GLOAD_REQUIRE_GROUPS). Carry build/devrun (bench/prepare_devrun.sh); the machine has no network, so Python
# packages it lacks (pytest, grpcio, protobuf, numpy) come from build/devrun/wheels when prepare_devrun.sh was run with
# --wheels. Prints versions, the pytest summary with every skip's reason, and the exit status.
# bench/device.sh pytests (about 5-8 minutes).
set -u
. bench/lib.sh
PY=python3
need='import torch, pytest, grpc, google.protobuf, numpy'
if ! $PY -c "$need" 2>/dev/null; then
	V=$W/venv
	$PY -m venv --system-site-packages "$V"
	if [[ -d $d/wheels ]]; then
		"$V/bin/pip" install -q --no-index --find-links "$d/wheels" pytest grpcio protobuf numpy 2>&1 | tail -3
	fi
	PY=$V/bin/python
fi
$PY - <<'PY'
import importlib
for m in ("torch", "numpy", "grpc", "google.protobuf", "pytest"):
    try:
        mod = importlib.import_module(m)
        print(f"{m:16s} {getattr(mod, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"{m:16s} MISSING ({e})")
import torch
print(f"cuda available   {torch.cuda.is_available()} ({torch.cuda.device_count()} devices)")
PY
cd pyclient
GLOAD_BIN=$PWD/../$G GLOAD_REQUIRE_GROUPS=torch,ddp $PY -m pytest -q -rs -p no:cacheprovider tests 2>&1 | tee "$OUT/pytests.log" | tail -40
echo "pytest exit status ${PIPESTATUS[0]}"
