#!/usr/bin/env bash
# The Python client's hand-off on the GPU machine: pyclient/bench/next_latency.py (ready next() after an idle and
# after a busy 1 ms step, batches/s of 16x1024 batches, a CPU-bound loop beside a Loader) over the shm doorbell for
# numpy copies, numpy zero_copy (default keys; input_ids and lengths only), torch CPU and cuda, plus gRPC numpy.
# ORDER lists the clients run, in that order (default "new new": this tree's client twice, since this host's timings
# move between runs); any other name V is build/devrun/pyclient-V, the client of another commit
# (bench/prepare_devrun.sh --pyclient-base COMMIT [--name V]), run against the same server binary: e.g.
# ORDER="base new new base". TRAIN=1 adds train_ref's small model (--layers 1 --dim 192 --batch-size 8) and the
# 8-layer reference, ideal vs the gload feed of each client of TRAIN_ORDER (default "new"; device="cuda", pad 128);
# LATENCY=0 leaves next_latency out.
#
# bench/device.sh handoff (about 3 minutes per client run; TRAIN=1 about 2 more per client). Writes summary.txt (one
# line per result) and the raw JSON to $OUT.
set -uo pipefail
. bench/lib.sh
python3 -c 'import torch, grpc, numpy; print("torch", torch.__version__, torch.cuda.get_device_name(0), "grpcio", grpc.__version__, "numpy", numpy.__version__)'
nproc
# Each client runs this tree's benchmark script from a copy beside its own gload package.
# "new" is this tree's client; any other name V is build/devrun/pyclient-V (bench/prepare_devrun.sh --pyclient-base).
VARIANTS=$(printf '%s\n' ${ORDER:-new new} ${TRAIN_ORDER:-new} | sort -u)
for v in $VARIANTS; do
	mkdir -p "$W/$v/bench"
	if [[ $v == new ]]; then cp -r pyclient/gload "$W/new/"; else cp -r "$d/pyclient-$v/gload" "$W/$v/"; fi
	cp pyclient/bench/next_latency.py "$W/$v/bench/"
done
mkdir -p "$W/examples/udhr"
cp examples/udhr/tokenizer.json "$W/examples/udhr/"
if [[ ${LATENCY:-1} == 1 ]]; then
	for v in ${ORDER:-new new}; do
		n=$(ls "$OUT" | grep -c "^next_latency_$v" || true)
		echo "== next_latency $v (#$((n + 1))) $(date -u +%T)"
		# next_latency.py finds the repository (for the example tokenizer) two levels above its folder.
		timeout 150 python3 "$W/$v/bench/next_latency.py" --gload-bin "$PWD/$G" --batches 20000 --ready 2000 --cpu-steps 2000 --transports shm,grpc \
			> "$OUT/next_latency_${v}_$((n + 1)).json" 2> "$W/err_$v.txt" || { echo "exit $?"; tail -5 "$W/err_$v.txt"; }
	done
fi
if [[ ${TRAIN:-0} == 1 ]]; then
	tokenize_corpus
	serve_corpus
	export GLOAD_ADDR=$ADDR GLOAD_DATASET=corpus GLOAD_TRANSPORT=shm
	TR=(python3 $d/train_ref.py --corpus "$W/corpus.jsonl" --tokenizer "$W/tokenizer.json" --warmup 10 --pad-multiple 128)
	for v in ${TRAIN_ORDER:-new}; do
		echo "== train_ref small model ($v) $(date -u +%T)"
		PYTHONPATH="$W/$v:$PWD/bench" timeout 120 "${TR[@]}" --steps 300 --layers 1 --dim 192 --batch-size 8 \
			--modes ideal,feed --feed train_feed:feed --json "$OUT/train_small_$v.jsonl" > "$W/train_small_$v.txt" 2>&1 \
			|| { echo "exit $?"; tail -5 "$W/train_small_$v.txt"; }
		echo "== train_ref 8-layer reference ($v) $(date -u +%T)"
		PYTHONPATH="$W/$v:$PWD/bench" timeout 150 "${TR[@]}" --steps 150 --modes ideal,feed --feed train_feed:feed \
			--json "$OUT/train_ref_$v.jsonl" > "$W/train_ref_$v.txt" 2>&1 || { echo "exit $?"; tail -5 "$W/train_ref_$v.txt"; }
	done
fi
echo "== done $(date -u +%T)"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, os, sys
out = sys.argv[1]
for name in sorted(os.listdir(out)):
    p = os.path.join(out, name)
    if name.startswith("next_latency_") and os.path.getsize(p):
        for r in json.load(open(p))["results"]:
            keys = ("transport", "output", "ready_next_p50_us", "ready_next_p99_us", "ready_busy_p50_us",
                    "ready_busy_p99_us", "batches_per_s", "step_us_alone", "step_us_with_loader", "slowdown_pct")
            print(name[len("next_latency_"):-5], " ".join(f"{k}={r[k]}" for k in keys if k in r))
    elif name.startswith("train_") and name.endswith(".jsonl"):
        for l in open(p):
            if l.strip():
                t = json.loads(l)
                print(name[:-6], t.get("mode"), "step_ms", round(t.get("step_ms", 0), 3), "data_wait_pct",
                      round(t.get("data_wait_pct", 0), 3), "tokens_per_s", round(t.get("tokens_per_s", 0)))
PY
