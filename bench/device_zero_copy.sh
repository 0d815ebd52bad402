#!/usr/bin/env bash
# Issue 14, zero_copy on the GPU machine: pyclient/bench/next_latency.py over the shm doorbell with every output
# (numpy copies, numpy zero_copy with the default keys, numpy zero_copy of input_ids and lengths only, torch, cuda)
# and gRPC beside it, with the CPU-loop measure; then the hand-off tests (zero_copy, doorbell, torch) against this
# machine's torch and numpy. About 2 minutes. Carry build/devrun (bench/prepare_devrun.sh). Writes next_latency.json
# and pytest.txt to $OUT.
set -uo pipefail
d=build/devrun
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
G=$d/gload
[[ -x $G ]] || { gunzip -kf $d/gload.gz && chmod +x $G; }
python3 -c 'import torch, grpc, numpy; print("torch", torch.__version__, "grpcio", grpc.__version__, "numpy", numpy.__version__)'
timeout 240 python3 pyclient/bench/next_latency.py --gload-bin "$G" --batches 20000 --ready 2000 --cpu-steps 2000 \
	> "$OUT/next_latency.json" || echo "next_latency exit $?"
python3 - "$OUT/next_latency.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(json.dumps(r))
PY
(cd pyclient && GLOAD_BIN=$PWD/../$G timeout 240 python3 -m pytest -q -rs -p no:cacheprovider tests/test_handoff.py \
	tests/test_torch.py 2>&1 | tail -15) | tee "$OUT/pytest.txt"
