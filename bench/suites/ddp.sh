#!/usr/bin/env bash
# Issue 7 on a machine with N >= 2 GPUs: DDP training (bench/train_ddp.py under torchrun) fed by one gload server over
# shared memory, every GPU watched. Three runs: ideal (batches staged on each GPU), gload, and gload with one rank
# slowed in data (the watch must name it). bench/device.sh ddp (N=GPUs, default all; about 3 minutes). Never run yet.
set -u
. bench/lib.sh
N=${N:-$(nvidia-smi -L | wc -l)}
tokenize_corpus
serve_corpus --watch-window 600s
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
