#!/usr/bin/env bash
# Issue 7 on a machine with N >= 2 GPUs: DDP training (bench/train_ddp.py under torchrun) fed by one gload server over
# shared memory, every GPU watched. Three runs: ideal (batches staged on each GPU), gload, and gload with one rank
# slowed in data (the watch must name it). Carry build/devrun, made by bench/prepare_devrun.sh.
set -u
d=build/devrun
OUT=${OUT:-/tmp/out}
N=${N:-$(nvidia-smi -L | wc -l)}
mkdir -p "$OUT"
G=$d/gload
[[ -x $G ]] || { gunzip -kf $d/gload.gz && chmod +x $G; }
W=$(mktemp -d /tmp/gload-ddp.XXXXXX)
gunzip -c $d/llama3.json.gz > "$W/tokenizer.json"
gunzip -c $d/corpus.jsonl.gz > "$W/corpus.jsonl"
$G tokenize --quiet --tokenizer "$W/tokenizer.json" --add-special-tokens --max-length 1024 --out "$W/data" "$W/corpus.jsonl"
ADDR="unix://$W/gload.sock"
$G serve --dataset corpus="$W/data" --listen "$ADDR" --watch-window 600s --log-level warn 2> "$OUT/ddp_serve.log" &
SERVE=$!
trap 'kill $SERVE 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -S $W/gload.sock ]] && break; sleep 0.1; done
export PYTHONPATH=$PWD/pyclient
TR=(python3 -m torch.distributed.run --standalone --nproc-per-node "$N" bench/train_ddp.py --addr "$ADDR" --steps "${STEPS:-100}")
echo "== ideal ($N GPUs)"; "${TR[@]}" --ideal --label ideal --json "$OUT/ddp.jsonl" 2>&1 | grep -v Warning | tail -"$N"
for run in gload slow; do
	extra=()
	[[ $run == slow ]] && extra=(--slow-rank 1 --slow-ms 120)
	echo "== $run ($N GPUs)"
	$G bench run --addr "$ADDR" --json --out "$OUT/ddp_bench_$run.json" --skip-steps 10 -- \
		"${TR[@]}" "${extra[@]}" --label "$run" --json "$OUT/ddp.jsonl" 2>&1 | grep -v Warning | tail -40
done
