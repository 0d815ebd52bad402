#!/usr/bin/env bash
# Issue 18: the engine's speed-up against its own one-core speed, with the one-core runs repeated between the 16-worker
# runs (that host's one-core speed moves by ±25% from run to run, so one one-core run decides a ratio): llama3, the
# Go-source corpus x5, --passes 2, GOMAXPROCS = workers; the sweep 1 2 4 8 16, then 1 16 1 16 1. Each line gives
# mb_per_s (the pass), steady_mb_per_s (the pass until the first worker found no document left: without its drain)
# and workers_busy. About 1.5 minutes. bench/device.sh tokenize sweep. Writes sweep.jsonl to $OUT.
set -uo pipefail
. bench/lib.sh
gunzip -c $d/corpus.jsonl.gz > "$W/go.jsonl"
for i in 1 2 3 4 5; do cat "$W/go.jsonl"; done > "$W/go5.jsonl"
for w in 1 2 4 8 16 1 16 1 16 1; do
	GOMAXPROCS=$w $G encode --bench --passes 2 --tokenizer $d/llama3.json.gz --workers $w < "$W/go5.jsonl" 2>/dev/null | grep '^{' >> "$OUT/sweep.jsonl"
done
cat > "$W/show.py" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"w{r['workers']:<2d} {r['mb_per_s']:7.1f} MB/s, steady {r['steady_mb_per_s']:7.1f}, busy {r['workers_busy']:.3f}")
PY
python3 "$W/show.py" "$OUT/sweep.jsonl"
