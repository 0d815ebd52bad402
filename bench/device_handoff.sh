#!/usr/bin/env bash
# Issue 14 on the GPU machine: the shm doorbell hand-off against the message hand-off (GLOAD_SHM_DOORBELL=0) and
# gRPC, in one run: pyclient/bench/next_latency.py (next() with a ready batch, throughput, a CPU-bound loop beside a
# Loader), then train_ref's small model (--layers 1 --dim 192 --batch-size 8) and the 8-layer reference, ideal vs
# gload feed at --pad-multiple 128.
#
# Before carrying build/devrun: bench/prepare_devrun.sh. On the GPU machine: OUT=$OUT bench/device_handoff.sh
# (about 6 minutes). Writes to $OUT (at most 8 files come back): next_latency_{doorbell,messages}.json, summary.txt
# (every result row), logs.txt (versions, the CUDA tests, every run's log tail), exits.txt, serve.log.
set -uo pipefail
d=build/devrun
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
R=$(mktemp -d /tmp/gload-handoff-res.XXXXXX)  # raw results; $OUT gets them gathered at the end
G=$d/gload
[[ -x $G ]] || { gunzip -kf $d/gload.gz && chmod +x $G; }
W=$(mktemp -d /tmp/gload-handoff.XXXXXX)
SERVE=
cleanup() {
	if [[ -n $SERVE ]]; then kill "$SERVE" 2>/dev/null || true; wait "$SERVE" 2>/dev/null || true; fi
	rm -rf "$W" "$R"
}
trap cleanup EXIT
export PYTHONPATH=$PWD/pyclient:$PWD/bench
python3 -c 'import torch, grpc; print("torch", torch.__version__, torch.cuda.get_device_name(0), "grpcio", grpc.__version__)' | tee "$R/versions.txt"

# The CUDA tests of the hand-off (doorbell copies released on their event, static buffers under a CUDA graph) and the
# doorbell suite, against this machine's torch; pytest from build/devrun/whl when the image lacks it.
PY=python3
if ! python3 -c 'import pytest' 2>/dev/null; then
	V=$W/venv
	python3 -m venv --system-site-packages "$V" && "$V/bin/pip" install -q --no-index --find-links $d/whl pytest 2>&1 | tail -2
	PY=$V/bin/python
fi
echo "== pytest (CUDA hand-off) $(date -u +%T)"
(cd pyclient && GLOAD_BIN=$PWD/../$G timeout 240 $PY -m pytest -q -rs -p no:cacheprovider tests/test_handoff.py tests/test_torch.py \
	-k "cuda or static or doorbell" 2>&1 | tail -15) | tee "$R/pytest_cuda.txt"

for mode in doorbell messages; do
	echo "== next_latency ($mode) $(date -u +%T)"
	GLOAD_SHM_DOORBELL=$([[ $mode == doorbell ]] && echo 1 || echo 0) timeout 150 python3 pyclient/bench/next_latency.py \
		--gload-bin "$G" --batches 20000 --ready 2000 --cpu-steps 2000 --transports "shm$([[ $mode == doorbell ]] && echo ,grpc)" \
		> "$OUT/next_latency_$mode.json" 2> "$R/next_latency_$mode.err" || echo "next_latency $mode exit $?" | tee -a "$OUT/exits.txt"
done

gunzip -c $d/llama3.json.gz > "$W/tokenizer.json"
gunzip -c $d/corpus.jsonl.gz > "$W/corpus.jsonl"
$G tokenize --quiet --tokenizer "$W/tokenizer.json" --add-special-tokens --max-length 1024 --workers "$(nproc)" \
	--out "$W/data" "$W/corpus.jsonl"
ADDR="unix://$W/gload.sock"
$G serve --dataset corpus="$W/data" --listen "$ADDR" --log-level warn 2> "$OUT/serve.log" &
SERVE=$!
for _ in $(seq 100); do [[ -S $W/gload.sock ]] && break; sleep 0.1; done
export GLOAD_ADDR=$ADDR GLOAD_DATASET=corpus GLOAD_TRANSPORT=shm
TR=(python3 $d/train_ref.py --corpus "$W/corpus.jsonl" --tokenizer "$W/tokenizer.json" --warmup 10 --pad-multiple 128)
for mode in doorbell messages; do
	echo "== train_ref small model ($mode) $(date -u +%T)"
	GLOAD_SHM_DOORBELL=$([[ $mode == doorbell ]] && echo 1 || echo 0) timeout 120 "${TR[@]}" --steps 300 \
		--layers 1 --dim 192 --batch-size 8 --modes ideal,feed --feed train_feed:feed --json "$R/train_small_$mode.jsonl" \
		> "$R/train_small_$mode.txt" 2>&1 || echo "small $mode exit $?" | tee -a "$OUT/exits.txt"
done
for mode in doorbell messages; do
	echo "== train_ref 8-layer reference ($mode) $(date -u +%T)"
	GLOAD_SHM_DOORBELL=$([[ $mode == doorbell ]] && echo 1 || echo 0) timeout 150 "${TR[@]}" --steps 150 --modes ideal,feed \
		--feed train_feed:feed --json "$R/train_ref_$mode.jsonl" > "$R/train_ref_$mode.txt" 2>&1 || echo "ref $mode exit $?" | tee -a "$OUT/exits.txt"
done
echo "== done $(date -u +%T)"
for f in "$R"/*.txt "$R"/*.err; do [[ -f $f ]] && { echo "=== $(basename "$f")"; tail -40 "$f"; }; done > "$OUT/logs.txt"
python3 - "$OUT" "$R" <<'PY' | tee "$OUT/summary.txt"
import json, os, sys
out, res = sys.argv[1], sys.argv[2]
for mode in ("doorbell", "messages"):
    p = os.path.join(out, f"next_latency_{mode}.json")
    if os.path.exists(p) and os.path.getsize(p):
        for r in json.load(open(p))["results"]:
            print(mode, json.dumps(r))
for name in sorted(os.listdir(res)):
    if name.startswith("train_") and name.endswith(".jsonl"):
        for l in open(os.path.join(res, name)):
            if l.strip():
                t = json.loads(l)
                print(name, t.get("mode"), "step_ms", round(t.get("step_ms", 0), 3), "data_wait_pct",
                      round(t.get("data_wait_pct", 0), 3), "tokens_per_s", round(t.get("tokens_per_s", 0)))
PY
